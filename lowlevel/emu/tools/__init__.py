"""Observers of a launch, outside the engine: each sees a launch through the small interface
of base.py (initialize, event, finish), as gpuocelot's trace generators do.

    base.py       Tool: the interface, and the events the engine reports
    racecheck.py  shared-memory hazards between barriers (LOWLEVEL_EMU_RACECHECK=1)
    counters.py   each launch's instruction figures, added to its context's totals
    printf.py     device printf's output, written to stdout when the kernel completes
"""
import os

from .base import Tool
from .racecheck import RaceCheck


def enabled() -> list[Tool]:
    """The tools the environment turns on for every launch."""
    if os.environ.get("LOWLEVEL_EMU_RACECHECK", "") not in ("", "0"):
        return [RaceCheck()]
    return []


__all__ = ["RaceCheck", "Tool", "enabled"]

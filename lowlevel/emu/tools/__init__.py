"""Observers of a launch, outside the engine: each sees a launch through the small interface
of base.py (initialize, event, finish), as gpuocelot's trace generators do.

    base.py       Tool: the interface, and the events the engine reports
    racecheck.py  shared-memory hazards between barriers (LOWLEVEL_EMU_RACECHECK=1)
    counters.py   each launch's instruction figures, added to its context's totals
    printf.py     device printf's output, written to stdout when the kernel completes
    timemodel.py  the H200 time model (LOWLEVEL_EMU_TIMING=model): each op's modelled duration,
                  and KernelTime, the launch's observer (its CPU seconds, its modelled time)
    devicetime.py the modelled timeline of a context: ops placed on copy engines and SMs
    h200.py       the modelled device's figures, with their sources
    progress.py   "CTAs done of total" for launches over 2 s, when stderr is a terminal
"""
import os
import sys

from .base import Tool
from .progress import Progress
from .racecheck import RaceCheck


def enabled() -> list[Tool]:
    """The tools the environment turns on for every launch: racecheck when asked for, and
    progress on an interactive terminal (LOWLEVEL_EMU_PROGRESS=0 turns it off)."""
    tools: list[Tool] = []
    if os.environ.get("LOWLEVEL_EMU_RACECHECK", "") not in ("", "0"):
        tools.append(RaceCheck())
    if os.environ.get("LOWLEVEL_EMU_PROGRESS", "") != "0" and _interactive(sys.stderr):
        tools.append(Progress())
    return tools


def _interactive(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):      # replaced by an object without isatty, or closed
        return False


__all__ = ["Progress", "RaceCheck", "Tool", "enabled"]

"""Instruction counters: each completed launch's figures, added to its context's totals
(what `lowlevel trace` reports, and tools/bench_emu.py reads as the last launch's stats)."""
from .base import Tool


class LaunchCounters(Tool):
    def __init__(self, context, kernel_name: str):
        self.context = context
        self.kernel_name = kernel_name

    def finish(self, stats) -> None:
        self.context.last_launch_stats = (self.kernel_name, stats)
        self.context.count_instructions(stats.thread_instructions)

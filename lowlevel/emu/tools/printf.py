"""Device printf's output: what a launch printed (in thread order, isa/printf.py) goes to
stdout when the kernel completes, as the CUDA runtime flushes it at synchronisation."""
import sys

from .base import Tool


class PrintfOutput(Tool):
    def finish(self, stats) -> None:
        if stats.printed:
            sys.stdout.write(stats.printed)
            sys.stdout.flush()

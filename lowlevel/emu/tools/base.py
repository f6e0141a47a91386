"""The interface of a launch observer, as gpuocelot's trace generators have one.

A tool is handed to the engine with a launch (engine/scheduler.run_kernel(tools=...)):

    initialize(launch)   before the first batch; `launch` is the engine's launch context
                         (kernel, grid, block, and `who_batch`/`block_name` to name threads)
    event(kind, *args)   what happened, for the kinds in the tool's `events`:
                           "batch", smem, stride         a batch of CTAs starts (its shared memory)
                           "barrier", ctas               a barrier completed (batch CTAs, None: all)
                           "shared_access", is_write, idx, size, lanes, iid
                                                         lanes of instruction `iid` accessed shared
                                                         elements `idx` of `size` bytes
    finish(stats)        after a launch that completed: its LaunchStats

A tool with no `events` costs the engine nothing while the kernel runs.
"""


class Tool:
    events: frozenset = frozenset()

    def initialize(self, launch) -> None:
        """Before the first batch of a launch."""

    def event(self, kind: str, *args) -> None:
        """One of the kinds in `events` happened."""

    def finish(self, stats) -> None:
        """After the launch completed."""

"""What the layers above ask of the emulator between calls: the thread-instructions its
kernels ran, what its device times mean, and the last launch's figures; each of this
thread's current context."""
from ..tools.devicetime import timeline_from_env
from .context import live, thread_context


def thread_instructions() -> int:
    """Thread-instructions executed so far by kernels of this thread's current context."""
    ctx = live(thread_context())
    return 0 if ctx is None else ctx.thread_instructions


def timing() -> str:
    """What the emulated device's times mean in this thread's current context (or, with
    none current, in the next one made): modelled, or the emulator's CPU time."""
    ctx = live(thread_context())
    if ctx is None:
        try:
            modelled = timeline_from_env() is not None
        except ValueError as e:
            return f"unknown ({e})"
    else:
        modelled = ctx.timeline is not None
    return "modelled (H200 time model)" if modelled else "emulator CPU time"


def last_launch_stats():
    """The engine's LaunchStats of the last kernel completed in this thread's current
    context (for tools/bench_emu.py), or None."""
    ctx = live(thread_context())
    last = None if ctx is None else getattr(ctx, "last_launch_stats", None)
    return None if last is None else last[1]

"""The timeline a profile records: spans on the host's threads and on the device's streams,
all on one clock, time.perf_counter_ns().

    host spans     {"name", "cat", "tid", "start", "end", "args", "flow"}: ops (cat "op", the
                   dispatch; inside it "backend", the kernel function of the key below), the
                   frontend's validation ("frontend"), every driver and cuBLAS call ("driver",
                   "cublas": the ctypes crossing, its arguments and result)
    device spans   {"name", "cat", "device", "stream", "start", "end", "args", "flow"}: kernels,
                   copies, memsets, host functions, graph launches and cuBLAS calls, measured
                   by CUDA events recorded around them on their stream (lowlevel/cuda/profiling.py)

A call that queued device work and the device span it made share a "flow" id: the Chrome
trace draws an arrow from one to the other. Device times are read from the events only when
the profile closes (`close()` asks the `device_clock` the cuda layer attached to wait for
them), so recording adds no synchronisation to the work profiled.

This module is in the bottom layer: it imports nothing of lowlevel but the hooks, so the
Chrome export (chrome.py), the ASCII picture (ascii_art.py) and the plot (plot.py) work on
a timeline from any layer.
"""
import itertools
import threading
import time

from .. import trace as hooks
from . import nvtx_ranges


class Timeline(hooks.Recorder):
    """A Recorder that also keeps timestamped spans; `with Timeline() as t:` activates it."""

    def __init__(self):
        super().__init__()
        self.start = time.perf_counter_ns()
        self.end: int | None = None
        self.host: list[dict] = []
        self.device: list[dict] = []
        self.threads: dict[int, str] = {}          # thread ident -> its name
        self.driver = ""                           # which driver ran, for every report
        self.modelled = False                      # device times from the emulator's time model
        self.timing = ""                           # what device times mean, as the driver says
        self.notes: list[str] = []                 # how device times were placed, and their error
        self.device_clock = None                   # the cuda layer's event recorder, if any
        self.nvtx = False                          # push NVTX ranges (nvtx_ranges.py)
        self._flows = itertools.count(1)
        self._previous_timeline = None

    def __enter__(self):
        self.start = time.perf_counter_ns()
        super().__enter__()
        self._previous_timeline, hooks.active_timeline = hooks.active_timeline, self
        return self

    def __exit__(self, *exc):
        hooks.active_timeline = self._previous_timeline
        return super().__exit__(*exc)

    # -- recording ---------------------------------------------------------------------------
    def is_recording(self) -> bool:
        """Whether this timeline is active now (entered, not yet left)."""
        return any(r is self for r in hooks.recorders())

    def thread(self) -> int:
        """The calling thread's ident, its name kept for the trace."""
        t = threading.current_thread()
        if t.ident not in self.threads:
            self.threads[t.ident] = t.name
        return t.ident

    def new_flow(self) -> int:
        return next(self._flows)

    def host_span(self, name: str, cat: str, start: int, end: int, args: dict | None = None,
                  flow: int | None = None) -> dict:
        span = {"name": name, "cat": cat, "tid": self.thread(), "start": start, "end": end,
                "args": args or {}, "flow": flow}
        self.host.append(span)          # list.append is atomic: threads may record at once
        return span

    def device_span(self, name: str, cat: str, device: int, stream: int, start: int, end: int,
                    args: dict | None = None, flow: int | None = None) -> dict:
        span = {"name": name, "cat": cat, "device": device, "stream": stream, "start": start, "end": end,
                "args": args or {}, "flow": flow}
        self.device.append(span)
        return span

    def frontend_span(self, op: str, seconds: float) -> None:
        """Layer 1's validation, reported when it ends (trace.note_validation)."""
        end = time.perf_counter_ns()
        self.host_span(f"validate {op}", "frontend", end - round(seconds * 1e9), end)
        if self.nvtx:
            nvtx_ranges.mark(f"validated {op}", "frontend")

    # -- closing -----------------------------------------------------------------------------
    def resolve(self) -> None:
        """Read the device times of what was recorded so far (waits for those events); once
        the profile is closed and nothing is left to read, its events are destroyed."""
        clock = self.device_clock
        if clock is None:
            return
        clock.resolve(self)
        if self.end is not None and not clock.pending:
            clock.release()
            self.device_clock = None

    def close(self) -> None:
        """The end of the profile: the device spans' times are read (or, inside a stream
        capture, when next asked for), and the clock stops."""
        if self.end is None:
            self.end = time.perf_counter_ns()
        self.resolve()

    def bounds(self) -> tuple[int, int]:
        """The earliest and latest time of any span (the profile's own bounds if none)."""
        times = [s["start"] for s in self.host + self.device] + [s["end"] for s in self.host + self.device]
        end = self.end if self.end is not None else time.perf_counter_ns()
        return min([self.start, *times]), max([end, *times])


DEFAULT_STREAMS = (0, 1, 2)     # NULL and CU_STREAM_LEGACY, CU_STREAM_PER_THREAD


def stream_label(stream: int) -> str:
    if stream in (0, 1):
        return "legacy default stream"
    if stream == 2:
        return "per-thread default stream"
    return f"stream {stream:#x}"

"""The Profiler dispatch key and `lowlevel.profile()`: while a profile is active, every op is
recorded with its route and timings, then continues to its backend (a fallback that
redispatches below itself); and a timeline (lowlevel/trace/timeline.py) records, on one
clock (time.perf_counter_ns), every driver and cuBLAS call on each host thread, each op's
spans, and each device operation on its stream.

    with lowlevel.profile() as p:
        c = a @ b
    print(p.report())                    # the table of ops, and an ASCII timeline
    p.export_chrome_trace("t.json")      # open in ui.perfetto.dev or chrome://tracing
    p.plot("t.png")                      # matplotlib: pip install lowlevel[plot]

Device work is timed by CUDA events recorded around it on its own stream (see
lowlevel/cuda/profiling.py), never waited for inside the profile: the exit of `profile()`
waits for the recorded events and reads their times, as torch.profiler does. The spans of
an op: its frontend validation (layer 1), the op through the dispatcher and its backend
(layers 3 and 4, with the route and the kernels launched), the ctypes crossings below it
(layer 2), and the device's work (layer 5). While a profile is active and the `nvtx`
package imports, each op and driver call is an NVTX range too (lowlevel/trace/nvtx_ranges.py).
"""
import os
import threading
import time


from ..cuda import get_driver, is_current_stream_capturing
from ..cuda.profiling import DeviceClock
from ..trace import ascii_art, chrome, nvtx_ranges
from ..trace.timeline import Timeline
from .dispatcher import dtype_of, include, redispatch, resolve, route_through
from .keys import KeySet, Profiler
from .table import register_fallback

_tls = threading.local()


def device_timing(drv) -> str:
    """What the driver's device times mean, as the driver says it (`Driver.timing`: "measured
    on the GPU", "emulator CPU time", "modelled (H200 time model)"); a driver that does not
    say: modelled when LOWLEVEL_EMU_TIMING=model on the emulated GPU."""
    said = getattr(drv, "timing", None)
    if isinstance(said, str):
        return said
    if drv.kind != "emu":
        return "measured on the GPU"
    if os.environ.get("LOWLEVEL_EMU_TIMING", "").strip().lower() == "model":
        return "modelled (LOWLEVEL_EMU_TIMING=model)"
    return "emulator CPU time"


class profile:
    def __init__(self):
        self.records: list[dict] = []
        self.timeline = Timeline()

    def __enter__(self):
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        stack.append(self)
        self._include = include(Profiler)
        self._include.__enter__()
        self._start_timeline()
        return self

    def _start_timeline(self) -> None:
        timeline = self.timeline
        drv = get_driver()
        timeline.driver = f"driver: {drv.kind}, {drv.description}"
        timeline.timing = device_timing(drv)
        timeline.modelled = timeline.timing.startswith("modelled")
        timeline.nvtx = nvtx_ranges.nvtx() is not None
        timeline.device_clock = DeviceClock(timeline, capturing=is_current_stream_capturing)
        timeline.device_clock.context(drv, timeline)       # the anchor of the current context, first
        timeline.__enter__()

    def __exit__(self, *exc):
        self._include.__exit__(*exc)
        _tls.stack.pop()
        self.timeline.__exit__(*exc)
        self.timeline.close()                              # waits for the recorded events
        return False

    # -- what the profile shows --------------------------------------------------------------
    def device_us(self, record: dict) -> float | None:
        """The device time of the spans queued by the op's calls (summed), or None if none."""
        spans = [s for s in self.timeline.device if s["args"].get("issued by thread") == record["tid"]
                 and record["start"] <= s["args"].get("issued at", -1) <= record["end"]]
        return sum(s["end"] - s["start"] for s in spans) / 1e3 if spans else None

    def report(self, width: int | None = None) -> str:
        """The ops with their routes and times, which driver ran, and the ASCII timeline.
        Inside the profile it first waits for the device work recorded so far."""
        self.timeline.resolve()
        called = any(s["cat"] in ("driver", "cublas") for s in self.timeline.host)
        lines = [self.timeline.driver + ("" if called else "  (no driver call in this profile)"),
                 self._device_times()]
        lines += self.timeline.notes
        lines.append(f"{'op':10s} {'route':22s} {'host us':>9s} {'device us':>10s}")
        for r in self.records:
            device = self.device_us(r)
            shown = "-" if device is None else f"{device:.1f}"
            lines.append(f"{r['op']:10s} {' -> '.join(r['route']):22s} {r['host_s'] * 1e6:9.1f} {shown:>10s}")
        lines += ["", ascii_art.render(self.timeline, width)]
        return "\n".join(lines)

    def _device_times(self) -> str:
        if self.timeline.modelled:
            return (f"device times: MODELLED by the emulated GPU's time model (LOWLEVEL_EMU_TIMING=model: "
                    f"{self.timeline.timing}), not measured; read from events around each operation")
        return f"device times: measured by CUDA events around each operation on its stream ({self.timeline.timing})"

    def __str__(self) -> str:
        return self.report()

    def export_chrome_trace(self, path) -> None:
        """The timeline in the Chrome trace event format: open it in ui.perfetto.dev."""
        self.timeline.resolve()
        chrome.export(self.timeline, path)

    def plot(self, path) -> None:
        """The timeline as a picture (needs matplotlib: pip install lowlevel[plot])."""
        from ..trace import plot  # noqa: PLC0415  (matplotlib is optional)
        self.timeline.resolve()
        plot.plot(self.timeline, path)


def _record(op: str, below: KeySet, args, kwargs):
    prof = _tls.stack[-1] if getattr(_tls, "stack", None) else None
    timeline = prof.timeline if prof is not None else None
    launched = len(timeline.launches) if timeline is not None else 0
    if timeline is not None and timeline.nvtx:
        nvtx_ranges.push(op, "dispatch")
    start = time.perf_counter_ns()
    try:
        # the dispatch (the lookup), then the kernel of the key below: two spans of the op
        kernel = resolve(op, below, args) if timeline is not None else None
        backend = time.perf_counter_ns()
        result = kernel(*args, **kwargs) if kernel is not None else redispatch(op, below, *args, **kwargs)
    finally:
        end = time.perf_counter_ns()
        if timeline is not None and timeline.nvtx:
            nvtx_ranges.pop()
    if prof is not None:
        route = ["Profiler"] + route_through(op, below, dtype_of(args))
        kernels = [k.get("kernel") for k in timeline.launches[launched:]]
        tid = timeline.host_span(op, "op", start, end, {"route": " -> ".join(route), "kernels": kernels})["tid"]
        if kernel is not None:
            timeline.host_span(f"{op}: {route[1]} kernel", "backend", backend, end, {"key": route[1]})
        prof.records.append({"op": op, "route": route, "host_s": (end - start) / 1e9, "start": start, "end": end,
                             "tid": tid, "kernels": kernels})
    return result


register_fallback(Profiler, _record)

"""The Profiler dispatch key: while a profile is active, every op is recorded with its route
and timings, then continues to its backend (a fallback that redispatches below itself).

    with lowlevel.profile() as prof:
        c = a @ b
    print(prof.report())        # report() waits for the device to time its work

Host time is measured around the call; device time between two events recorded on the
current stream around it, read only when the report is made, so profiling adds no
synchronisation to the ops themselves.
"""
import threading
import time

from ..cuda import Event, current_stream
from .dispatcher import dtype_of, include, redispatch, route_through
from .keys import KeySet, Profiler
from .table import register_fallback

_tls = threading.local()


class profile:
    def __init__(self):
        self.records: list[dict] = []

    def __enter__(self):
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        stack.append(self)
        self._include = include(Profiler)
        self._include.__enter__()
        return self

    def __exit__(self, *exc):
        self._include.__exit__(*exc)
        _tls.stack.pop()
        return False

    def report(self) -> str:
        lines = [f"{'op':10s} {'route':22s} {'host us':>9s} {'device us':>10s}"]
        for r in self.records:
            device = "-"
            if r["events"] is not None:
                start, end = r["events"]
                end.synchronize()
                device = f"{start.elapsed_ms(end) * 1000:.1f}"
            lines.append(f"{r['op']:10s} {' -> '.join(r['route']):22s} {r['host_s'] * 1e6:9.1f} {device:>10s}")
        return "\n".join(lines)


def _on_cuda(args) -> bool:
    return any(getattr(getattr(a, "device", None), "type", None) == "cuda" for a in args)


def _record(op: str, below: KeySet, args, kwargs):
    prof = _tls.stack[-1] if getattr(_tls, "stack", None) else None
    events = None
    if _on_cuda(args):
        events = (Event().record(current_stream()), Event())
    start = time.perf_counter()
    result = redispatch(op, below, *args, **kwargs)
    host = time.perf_counter() - start
    if events is not None:
        events[1].record(current_stream())
    if prof is not None:
        route = ["Profiler"] + route_through(op, below, dtype_of(args))
        prof.records.append({"op": op, "route": route, "host_s": host, "events": events})
    return result


register_fallback(Profiler, _record)

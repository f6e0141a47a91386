"""The hooks the five-layer trace listens on: the bottom of the package, importing nothing
of lowlevel, so that every layer may call them. Each costs one global read when no trace
runs.

    Recorder          while active (`with Recorder() as r:`), collects what the hooks report
    note_validation   layer 1: frontend validation time per op
    note_call         layer 2: every driver and cuBLAS call, its arguments, result and time
    note_route        layer 3: the dispatch route
    note_launch       layers 4 and 5: the kernels launched

The report made of them is the `lowlevel trace` command (lowlevel/cli/trace.py). Recorders
nest (a profile inside a trace): each hook reports to every active one, innermost first.
A `timeline.Timeline` is a Recorder that also keeps timestamped spans: while one is active,
`active_timeline` names it, and the driver's and cuBLAS's checked calls (whose slow path runs
whenever `active` is set) add their spans to it.

    timeline.py       the Timeline: host spans per thread, device spans per stream, one clock
    chrome.py         a timeline as the Chrome trace event format (Perfetto, chrome://tracing)
    ascii_art.py      a timeline drawn with characters (profile.report())
    plot.py           a timeline drawn by matplotlib (profile.plot(), the `plot` extra)
    nvtx_ranges.py    NVTX ranges while a profile runs (the `nvtx` extra), for Nsight Systems
"""
import time

active = None          # the innermost Recorder in use, or None
active_timeline = None  # the innermost timeline.Timeline in use, or None


def recorders():
    """The active recorders, innermost first."""
    r = active
    while r is not None:
        yield r
        r = r.previous


class Recorder:
    previous = None        # the recorder active before this one

    def __init__(self):
        self.validation: list[tuple[str, float]] = []        # (op, seconds)
        self.calls: list[dict] = []                          # driver and cuBLAS calls
        self.routes: list[tuple[str, list[str], str]] = []   # (op, keys visited, kernel)
        self.launches: list[dict] = []                       # kernels: name, grid, block, module kind

    def __enter__(self):
        global active
        self.previous, active = active, self
        return self

    def __exit__(self, *exc):
        global active
        active = self.previous
        return False


def note_validation(op: str, seconds: float) -> None:
    if active is not None:
        for r in recorders():
            r.validation.append((op, seconds))
        if active_timeline is not None:
            active_timeline.frontend_span(op, seconds)


def note_call(library: str, symbol: str, args: str, result: str, seconds: float) -> None:
    if active is not None:
        at = time.perf_counter()
        for r in recorders():
            r.calls.append({"library": library, "symbol": symbol, "args": args, "result": result,
                            "seconds": seconds, "at": at})


def note_route(op: str, keys: list[str], kernel: str) -> None:
    if active is not None:
        for r in recorders():
            r.routes.append((op, keys, kernel))


def note_launch(**info) -> None:
    if active is not None:
        info["at_ns"] = time.perf_counter_ns()
        for r in recorders():
            r.launches.append(info)

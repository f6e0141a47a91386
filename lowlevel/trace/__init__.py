"""The hooks the five-layer trace listens on: the bottom of the package, importing nothing
of lowlevel, so that every layer may call them. Each costs one global read when no trace
runs.

    Recorder          while active (`with Recorder() as r:`), collects what the hooks report
    note_validation   layer 1: frontend validation time per op
    note_call         layer 2: every driver and cuBLAS call, its arguments, result and time
    note_route        layer 3: the dispatch route
    note_launch       layers 4 and 5: the kernels launched

The report made of them is the `lowlevel trace` command (lowlevel/cli/trace.py).
"""
import time

active = None          # the Recorder in use, or None


class Recorder:
    def __init__(self):
        self.validation: list[tuple[str, float]] = []        # (op, seconds)
        self.calls: list[dict] = []                          # driver and cuBLAS calls
        self.routes: list[tuple[str, list[str], str]] = []   # (op, keys visited, kernel)
        self.launches: list[dict] = []                       # kernels: name, grid, block, module kind

    def __enter__(self):
        global active
        self._previous, active = active, self
        return self

    def __exit__(self, *exc):
        global active
        active = self._previous
        return False


def note_validation(op: str, seconds: float) -> None:
    if active is not None:
        active.validation.append((op, seconds))


def note_call(library: str, symbol: str, args: str, result: str, seconds: float) -> None:
    if active is not None:
        active.calls.append({"library": library, "symbol": symbol, "args": args, "result": result,
                             "seconds": seconds, "at": time.perf_counter()})


def note_route(op: str, keys: list[str], kernel: str) -> None:
    if active is not None:
        active.routes.append((op, keys, kernel))


def note_launch(**info) -> None:
    if active is not None:
        active.launches.append(info)

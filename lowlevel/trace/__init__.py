"""Hooks the five-layer trace listens on. Each costs one global read when no trace runs.

A Recorder collects, while active: frontend validation time per op (layer 1), every driver
and cuBLAS call with its arguments, result and duration (layer 2), the dispatch route
(layer 3) and the kernels launched (layers 4 and 5). lowlevel/tracing.py builds the report.
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

"""The host cost of one dispatched call: ll.add on two small CPU tensors (validation,
dispatch, the numpy kernel, the result tensor), and dispatch.call alone with a kernel that
does nothing, so that only the dispatcher is timed.

    python tools/bench_dispatch.py

Each figure is the best of 7 repeats, in microseconds per call.
"""
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lowlevel as ll  # noqa: E402
from lowlevel import dispatch  # noqa: E402


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    a, b = ll.zeros(4), ll.zeros(4)
    dispatch.register_kernel("bench_noop", dispatch.CPU, lambda x, y: None)
    add = per_call_us(lambda: ll.add(a, b), 20_000)
    call = per_call_us(lambda: dispatch.call("bench_noop", a, b), 100_000)
    print(f"ll.add(a, b), 4-element CPU tensors:    {add:6.2f} us/call")
    print(f"dispatch.call (a kernel doing nothing): {call:6.2f} us/call")


if __name__ == "__main__":
    main()

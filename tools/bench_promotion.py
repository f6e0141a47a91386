"""The host cost of type promotion on the CPU backend: the common cases that keep the fast
path (one dtype; a Python float beside a float tensor; a Python int beside an int tensor)
beside the cases that promote (each operand cast to the result type first, then the op),
with torch's CPU eager op where torch is installed.

    python tools/bench_promotion.py

Each figure is the best of 7 repeats of 2000 calls on 16-element tensors, in microseconds
per call.
"""
import pathlib
import sys
import timeit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))      # this checkout's lowlevel

import lowlevel as ll  # noqa: E402

CASES = {
    # name: (operands, the op), written once for both libraries
    "f32 + f32 (fast)": (lambda T: (T.ones(16), T.ones(16)), lambda a, b: a + b),
    "f32 * 2.0 (fast)": (lambda T: (T.ones(16), 2.0), lambda a, b: a * b),
    "i64 + 1 (fast)": (lambda T: (T.ones(16, dtype=T.int64), 1), lambda a, b: a + b),
    "i64 * 1.5 (promotes)": (lambda T: (T.ones(16, dtype=T.int64), 1.5), lambda a, b: a * b),
    "f32 + f64 (promotes)": (lambda T: (T.ones(16), T.ones(16, dtype=T.float64)), lambda a, b: a + b),
    "i64 / i64 (promotes)": (lambda T: (T.ones(16, dtype=T.int64), T.ones(16, dtype=T.int64)), lambda a, b: a / b),
    "i64 // i64": (lambda T: (T.ones(16, dtype=T.int64), T.ones(16, dtype=T.int64)), lambda a, b: a // b),
    "f32 < 1.5": (lambda T: (T.ones(16), 1.5), lambda a, b: a < b),
}


def per_call_us(fn) -> float:
    return min(timeit.repeat(fn, number=2000, repeat=7)) / 2000 * 1e6


def main() -> None:
    try:
        import torch
    except ImportError:
        torch = None
    sys.stdout.write(f"{'case':<24}{'lowlevel us':>12}{'torch us':>10}\n")
    for name, (make, op) in CASES.items():
        a, b = make(ll)
        try:
            ours = f"{per_call_us(lambda: op(a, b)):.2f}"
        except (RuntimeError, TypeError, ValueError) as e:      # a lowlevel before promotion refused some
            ours = type(e).__name__
        theirs = "-"
        if torch is not None:
            ta, tb = make(torch)
            theirs = f"{per_call_us(lambda: op(ta, tb)):.2f}"
        sys.stdout.write(f"{name:<24}{ours:>12}{theirs:>10}\n")


if __name__ == "__main__":
    main()

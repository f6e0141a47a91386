"""Creation on CUDA: each of zeros ones full arange eye rand randn randint made on the
device (memsets, fill, arange and Philox kernels: what lowlevel does) beside the same values
made with numpy on the host and copied over (what it did before issue 23), with the time
(synchronised) and the peak of host memory each takes (tracemalloc: what Python and numpy
allocate, not the emulated GPU's memory). The device columns stay flat as n grows.

    python tools/bench_creation.py                  # n = 20M elements
    python tools/bench_creation.py 600000000 ones   # issue 23's reproducer
"""
import sys
import time
import tracemalloc

import numpy as np

import lowlevel as ll
from lowlevel import cuda
from lowlevel.frontend.creation import from_numpy_values

ON_DEVICE = {
    "zeros": lambda n: ll.zeros(n, device="cuda"), "ones": lambda n: ll.ones(n, device="cuda"),
    "full": lambda n: ll.full((n,), 2.5, device="cuda"), "arange": lambda n: ll.arange(n, device="cuda"),
    "eye": lambda n: ll.eye(int(n ** 0.5), device="cuda"), "rand": lambda n: ll.rand(n, device="cuda"),
    "randn": lambda n: ll.randn(n, device="cuda"), "randint": lambda n: ll.randint(0, 10, (n,), device="cuda"),
}
rng = np.random.default_rng(0)
THROUGH_THE_HOST = {
    "zeros": lambda n: np.zeros(n), "ones": lambda n: np.ones(n), "full": lambda n: np.full(n, 2.5),
    "arange": lambda n: np.arange(n), "eye": lambda n: np.eye(int(n ** 0.5)), "rand": lambda n: rng.random(n),
    "randn": lambda n: rng.standard_normal(n), "randint": lambda n: rng.integers(0, 10, n),
}


def measure(make, n):
    """(seconds, peak host bytes) of make(n), synchronised."""
    tracemalloc.start()
    start = time.perf_counter()
    t = make(n)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del t
    return seconds, peak


def host_way(name):
    def make(n):
        values = THROUGH_THE_HOST[name](n)
        dtype = ll.int64 if values.dtype.kind == "i" else ll.float32
        return from_numpy_values(values, dtype, "cuda")
    return make


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000
    names = sys.argv[2:] or list(ON_DEVICE)
    print(f"n = {n:,} elements on {cuda.GPU(0).name}")
    print(f"{'op':8s} {'device s':>9s} {'host MB':>8s}   {'via host s':>10s} {'host MB':>8s}")
    for name in names:
        ON_DEVICE[name](16), host_way(name)(16)           # modules loaded
        seconds, peak = measure(ON_DEVICE[name], n)
        line = f"{name:8s} {seconds:9.2f} {peak / 1e6:8.1f}"
        if n <= 100_000_000:
            seconds, peak = measure(host_way(name), n)
            line += f"   {seconds:10.2f} {peak / 1e6:8.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()

"""The kernels of tools/bench_barriers.py (the emulator's barrier speed rows) compute the
right thing, against numpy on random inputs with poisoned outputs: per-thread
cuda::memcpy_async into shared memory completed on a cuda::barrier, built for sm_80
(cp.async) and sm_90 (cp.async.bulk ... complete_tx), and a loop of arrive_and_wait beside
the same loop with __syncthreads. No timing here: bench_emu.py measures."""
import sys
from pathlib import Path

import numpy as np
import pytest

from lowlevel import cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
bench_barriers = pytest.importorskip("bench_barriers")


def _module(arch):
    pytest.importorskip("cuda.pathfinder")
    if arch == "compute_90" and cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("the sm_90 build needs an sm_90 device")
    try:
        return bench_barriers.module(arch)
    except RuntimeError as exc:
        pytest.skip(str(exc))


def _run(f, grid, x, *extra):
    din = cuda.mem_alloc(x.nbytes)
    cuda.memcpy_htod(din, np.ascontiguousarray(x))
    dout = cuda.mem_alloc(x.nbytes)
    cuda.memset_d8(dout, 0xFF, x.nbytes)
    f.launch(grid, bench_barriers.THREADS, (din, dout, *extra))
    cuda.synchronize()
    out = np.zeros_like(x)
    cuda.memcpy_dtoh(out, dout)
    return out


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_memcpy_async_on_a_barrier(driver, rng, arch):
    f = _module(arch).get_function("copy_barrier")
    x = rng.standard_normal((5 * bench_barriers.THREADS, 4)).astype(np.float32)
    got = _run(f, 5, x)
    assert np.array_equal(got, bench_barriers.copy_reference(x))


@pytest.mark.parametrize("kernel", ["loop_barrier", "loop_sync"])
def test_barrier_loops(driver, rng, kernel):
    f = _module("compute_80").get_function(kernel)
    x = rng.integers(0, 2 ** 32, 3 * bench_barriers.THREADS, dtype=np.uint32)
    got = _run(f, 3, x, np.int32(9))
    assert np.array_equal(got, bench_barriers.loop_reference(x, 9))

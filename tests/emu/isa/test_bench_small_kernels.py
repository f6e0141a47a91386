"""The kernel of tools/bench_small.py (bench_emu.py's fast-math and small-grid rows)
computes the right thing on every build and launch shape it is timed in: the
--use_fast_math build (.ftz on every float add, mul and fma; tanh.approx, div.approx)
and the precise one (tanhf's polynomial: fma.rn.f32 with uniform constants), on one
block of 64 threads and on many blocks, against float64 numpy on fresh random inputs
with poisoned outputs. No timing here: bench_emu.py measures."""
import sys
from pathlib import Path

import numpy as np
import pytest

from lowlevel import cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))
bench_small = pytest.importorskip("bench_small")


@pytest.mark.parametrize("key", bench_small.KEYS)
def test_bench_small_rows_compute_the_reference(driver, rng, key):
    label, got_key, launch, check, n = bench_small.setup(rng, key)
    assert got_key == key and n > 0 and label
    launch()()
    cuda.synchronize()
    ok, note = check()
    assert ok, note


def test_subnormal_inputs_flush_in_the_fast_math_build(driver, rng):
    """Subnormal inputs: the .ftz build reads them as signed zeros (gelu_scale(0) = 0),
    the precise build computes with them (a tiny result, v * (0.5 + 1))."""
    x = (rng.integers(1, 1 << 23, 512, dtype=np.uint32)
         | (rng.integers(0, 2, 512, dtype=np.uint32) << np.uint32(31))).view(np.float32)
    out = {}
    for fast in (True, False):
        f = bench_small.module(fast).get_function("gelu_scale")
        din, dout = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(x.nbytes)
        cuda.memcpy_htod(din, x)
        cuda.memset_d8(dout, 0xFF, x.nbytes)
        f.launch(2, 256, (din, dout, np.float32(bench_small.SCALE), np.int32(x.size)))
        cuda.synchronize()
        got = np.full_like(x, np.nan)
        cuda.memcpy_dtoh(got, dout)
        out[fast] = got
    assert (out[True] == 0).all()
    want = bench_small.reference(x)
    assert np.allclose(out[False], want, rtol=1e-5, atol=1e-44) and (out[False] != 0).any()

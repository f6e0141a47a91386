"""The handwritten kernels that cooperate inside a block or a warp: ptx/reduce_sum.ptx
(shuffles, shared memory, bar.sync, a float atomic) and ptx/softmax.ptx (one warp per row,
butterfly shuffles, ex2.approx), against numpy on every driver present.

Launch configurations follow ptx/README.md: reduce_sum takes a block that is a multiple of
32 and any grid (the caller zeroes *out first); softmax takes 32 * warps_per_block threads
and ceil(rows / warps_per_block) blocks (a smaller grid also works)."""
import math

import numpy as np
import pytest
from helpers.memory import device_poisoned, poisoned

from lowlevel import cuda, kernels

U32 = 2.0 ** -24                                 # float32 unit roundoff
F32_EPS = float(np.finfo(np.float32).eps)        # 2^-23: spacing at 1.0
F32_TINY = float(np.finfo(np.float32).tiny)


def upload(host):
    host = np.ascontiguousarray(host)
    dev = cuda.mem_alloc(max(4, host.nbytes))
    if host.nbytes:
        cuda.memcpy_htod(dev, host)
    return dev


def download(dev, shape, dtype):
    out = poisoned(shape, dtype)
    if out.nbytes:
        cuda.memcpy_dtoh(out, dev)
    return out


# ---- reduce_sum_f32 ---------------------------------------------------------------------------
def run_reduce(x: np.ndarray, grid: int, block: int, start: float = 0.0) -> float:
    f = kernels.module("reduce_sum").get_function("reduce_sum_f32")
    out = upload(np.array([start], np.float32))      # *out = start: the kernel adds onto it
    f.launch(grid, block, (upload(x), out, x.size))
    return float(download(out, 1, np.float32)[0])


def reduce_bound(x: np.ndarray, grid: int, block: int, start: float = 0.0) -> float:
    """How far a float32 sum by reduce_sum's tree can be from the exact sum.

    Every partial sum is built by float32 additions, each rounding with a relative error of
    at most u = 2^-24. An element passes through at most
        ceil(n / threads)      additions in its thread's grid-stride loop,
      + 5                      shfl.down steps in its warp,
      + 5                      more across the block's warp totals (up to 32 warps),
      + grid + 1               atomic additions onto *out, one per block, in any order,
    so with L that depth the error is at most gamma_L * sum |x_i| (gamma_L = L u / (1 - L u)),
    the classic bound for any summation tree of depth L (Higham, Accuracy and Stability of
    Numerical Algorithms, 4.2). The float64 inputs are exact float32 values and math.fsum is
    exact, so the reference itself adds no error.
    """
    threads = grid * block
    depth = math.ceil(x.size / threads) + 5 + 5 + grid + 1
    gamma = depth * U32 / (1 - depth * U32)
    return gamma * (math.fsum(np.abs(x.astype(np.float64))) + abs(start))


@pytest.mark.parametrize("block", [32, 96, 256, 1024])
def test_reduce_sum_any_grid(driver, rng, block):
    for n in (1, int(rng.integers(2, 200)), int(rng.integers(1000, 50_000)), int(rng.integers(100_000, 300_000))):
        grid = int(rng.integers(1, 40))
        x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3])).astype(np.float32)
        got = run_reduce(x, grid, block)
        exact = math.fsum(x.astype(np.float64))
        assert abs(got - exact) <= reduce_bound(x, grid, block), (n, grid, block, got, exact)


def test_reduce_sum_all_positive_large(driver, rng):
    # All terms of one sign: no cancellation, the bound is nearly met by real rounding.
    n = int(rng.integers(1_000_000, 1_500_000))
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    grid, block = int(rng.integers(8, 64)), 256
    got = run_reduce(x, grid, block)
    exact = math.fsum(x.astype(np.float64))
    assert abs(got - exact) <= reduce_bound(x, grid, block)
    # A plain sequential float32 sum is allowed n u |sum| of error; the tree is far closer.
    assert abs(got - exact) <= 1e-5 * exact


def test_reduce_sum_accumulates_onto_out(driver, rng):
    n = int(rng.integers(5000, 20_000))
    x = rng.standard_normal(n).astype(np.float32)
    start = float(np.float32(rng.standard_normal() * 100))
    grid, block = int(rng.integers(1, 10)), 128
    got = run_reduce(x, grid, block, start)
    exact = math.fsum([*x.astype(np.float64), start])
    assert abs(got - exact) <= reduce_bound(x, grid, block, start)


def test_reduce_sum_empty_and_zeros(driver, rng):
    # n == 0: every block adds 0.0; all-zero input gives +0.0 exactly.
    assert run_reduce(np.zeros(0, np.float32), 3, 64) == 0.0
    got = run_reduce(np.zeros(int(rng.integers(1, 5000)), np.float32), 4, 64)
    assert got == 0.0 and math.copysign(1.0, got) == 1.0


def test_reduce_sum_special_values(driver, rng):
    n = int(rng.integers(1000, 5000))
    x = rng.standard_normal(n).astype(np.float32)
    x[int(rng.integers(0, n))] = np.inf
    assert run_reduce(x, 5, 64) == np.inf
    x[int(rng.integers(0, n))] = np.nan
    assert math.isnan(run_reduce(x, 5, 64))


# ---- softmax_rows_f32 ---------------------------------------------------------------------------
def softmax_reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(reference in float64, |x - rowmax| as the kernel computes it) with ptx/README.md's
    conventions: a row with NaN or +inf, or only -inf, is all NaN; -inf elements give 0."""
    rows, cols = x.shape
    ref = np.full((rows, cols), np.nan)
    dist = np.zeros((rows, cols))
    for r in range(rows):
        row = x[r]
        if cols == 0 or np.isnan(row).any() or np.isposinf(row).any() or np.isneginf(row).all():
            continue
        m = row.max()
        d = (row - m).astype(np.float64)              # float32 subtraction, as the kernel does
        e = np.exp(d)
        ref[r] = e / e.sum()
        dist[r] = np.where(np.isfinite(d), np.abs(d), 0)
    return ref, dist


def softmax_tolerance(ref: np.ndarray, dist: np.ndarray, cols: int) -> np.ndarray:
    """Absolute tolerance per element.

    The kernel computes e = ex2.approx((x - m) * log2 e). ex2.approx.f32 is within 2 ulp;
    rounding t = d log2(e) to float32 (and log2(e) itself) adds an error of about
    |d| 2^-24 ln 2 log2 e = |d| / 2 ulp relative in 2^t: together the documented
    2 + 1.2 |d| ulp (see elementwise_f32.ptx). Each output is e_j / sum_k e_k: the numerator
    carries its own (2 + 1.2 |d_j|) ulp, the sum at most the worst term's (2 + 1.2 max|d|)
    plus its own roundings (ceil(cols / 32) in a lane, 5 in the butterfly), rcp.rn and
    mul.rn one half ulp each. Ulps are taken as 2^-23 |ref| (an upper bound of the spacing).
    Outputs below FLT_MIN may lose their relative accuracy: allow FLT_MIN absolutely.
    """
    worst = dist.max(axis=1, keepdims=True) if cols else 0
    ulps = (2 + 1.2 * dist) + (2 + 1.2 * worst) + math.ceil(cols / 32) + 5 + 1 + 2
    return ulps * F32_EPS * np.abs(ref) + F32_TINY


def check_softmax(got, ref, dist, cols):
    nan_rows = np.isnan(ref)
    assert np.isnan(got[nan_rows]).all(), "rows with NaN, +inf or only -inf must be all NaN"
    ok = ~nan_rows
    err = np.abs(got[ok].astype(np.float64) - ref[ok])
    tol = softmax_tolerance(ref, dist, cols)[ok]
    bad = ~(err <= tol)
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements outside tolerance; worst "
                           f"{np.max(err / tol):.2f} x tolerance")


def run_softmax(x: np.ndarray, warps_per_block: int, grid: int | None = None, in_place=False):
    f = kernels.module("softmax").get_function("softmax_rows_f32")
    rows, cols = x.shape
    dx = upload(x)
    dy = dx if in_place else device_poisoned(max(4, x.nbytes))
    if grid is None:
        grid = max(1, -(-rows // warps_per_block))
    f.launch(grid, 32 * warps_per_block, (dx, dy, rows, cols))
    return download(dy, (rows, cols), np.float32)


@pytest.mark.parametrize("cols_kind", ["one", "under_32", "exactly_32", "odd_over_32", "wide"])
def test_softmax_shapes(driver, rng, cols_kind):
    cols = {"one": 1, "under_32": int(rng.integers(2, 32)) | 1, "exactly_32": 32,
            "odd_over_32": int(rng.integers(33, 200)) | 1, "wide": int(rng.integers(500, 1500))}[cols_kind]
    rows = int(rng.integers(3, 60)) | 1
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    wpb = int(rng.choice([1, 3, 4, 8]))
    got = run_softmax(x, wpb)
    ref, dist = softmax_reference(x)
    check_softmax(got, ref, dist, cols)
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_small_grid_loops_over_rows(driver, rng):
    rows, cols = int(rng.integers(50, 120)) | 1, int(rng.integers(40, 90)) | 1
    x = (rng.standard_normal((rows, cols)) * 2).astype(np.float32)
    got = run_softmax(x, 2, grid=3)                     # 6 warps for many rows
    ref, dist = softmax_reference(x)
    check_softmax(got, ref, dist, cols)


def test_softmax_in_place(driver, rng):
    rows, cols = int(rng.integers(5, 30)), int(rng.integers(33, 100))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    got = run_softmax(x, 4, in_place=True)
    ref, dist = softmax_reference(x)
    check_softmax(got, ref, dist, cols)


@pytest.mark.parametrize("cols", [7, 45])
def test_softmax_special_values(driver, rng, cols):
    rows = 9
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    x[0, int(rng.integers(0, cols))] = np.nan             # NaN: row all NaN
    x[1, int(rng.integers(0, cols))] = np.inf             # +inf: row all NaN
    x[2, :] = -np.inf                                     # only -inf: row all NaN
    x[3, rng.permutation(cols)[: cols // 2]] = -np.inf    # some -inf: exactly 0 there
    x[4, :] = 1e30                                        # huge but equal: uniform
    x[5] = np.linspace(-120, 0, cols).astype(np.float32)  # tiny outputs (ex2 underflows)
    x[6, :] = 0.0
    x[7, 0], x[7, 1:] = np.nan, -np.inf                   # NaN among -inf
    got = run_softmax(x, 4)
    ref, dist = softmax_reference(x)
    check_softmax(got, ref, dist, cols)
    assert (got[3][np.isneginf(x[3])] == 0).all()
    np.testing.assert_allclose(got[4], 1.0 / cols, rtol=4 * F32_EPS)


def test_softmax_empty(driver, rng):
    f = kernels.module("softmax").get_function("softmax_rows_f32")
    # rows == 0 or cols == 0: nothing to write, nothing may fault.
    out = device_poisoned(64)
    f.launch(2, 64, (out, out, 0, 16))
    f.launch(2, 64, (out, out, 5, 0))
    cuda.synchronize()
    assert np.isnan(download(out, 16, np.float32)).all()

"""The handwritten kernels of ptx/ against numpy, on every driver present.

Inputs are fresh random numbers of awkward sizes; outputs are poisoned first, so an element
a kernel forgets to write shows up as NaN (or 0xFFFFFFFF)."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import kernels


def sizes(rng):
    return [0, 1, int(rng.integers(2, 300)), int(rng.integers(1000, 100_000))]


def test_vector_add(driver, rng):
    f = kernels.module("vector_add").get_function("vector_add")
    for n in sizes(rng)[1:]:
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out = device_poisoned(a.nbytes)
        f.launch((n + 255) // 256, 256, (upload(a), upload(b), out, n))
        np.testing.assert_array_equal(download(out, n, np.float32), a + b)


def test_saxpy(driver, rng):
    f = kernels.module("saxpy").get_function("saxpy")
    for n in sizes(rng):
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        alpha = np.float32(rng.standard_normal())
        dy = upload(y)
        f.launch(int(rng.integers(1, 20)), 128, (alpha, upload(x), dy, n))    # any grid covers n
        expect = (np.float64(alpha) * x + y).astype(np.float32)                   # one rounding: fma
        np.testing.assert_array_equal(download(dy, n, np.float32), expect)


FLOAT_DTYPES = [np.float32, np.float16]
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum}
UNARY = {"neg": np.negative, "relu": lambda x: np.where(np.isnan(x), x, np.maximum(x, 0)),
         "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp}


def special_values(rng, n, dtype):
    x = (rng.standard_normal(n) * 4).astype(dtype)
    x[: min(n, 6)] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], dtype)[: min(n, 6)]
    return rng.permutation(x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_elementwise_binary(driver, rng, op, dtype):
    suffix = "f32" if dtype == np.float32 else "f16"
    f = kernels.module(f"elementwise_{suffix}").get_function(f"{op}_{suffix}")
    n = int(rng.integers(1000, 20_000))
    a, b = special_values(rng, n, dtype), special_values(rng, n, dtype)
    out = device_poisoned(a.nbytes)
    f.launch(16, 256, (out, upload(a), upload(b), n))
    with np.errstate(all="ignore"):
        # Correctly rounded from the exact (float64) result, as IEEE arithmetic is.
        expect = BINARY[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(download(out, n, dtype), expect)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_elementwise_unary(driver, rng, op, dtype):
    suffix = "f32" if dtype == np.float32 else "f16"
    f = kernels.module(f"elementwise_{suffix}").get_function(f"{op}_{suffix}")
    n = int(rng.integers(1000, 20_000))
    x = special_values(rng, n, dtype)
    if op == "exp":
        x = np.clip(x, -20, 20).astype(dtype)       # the error bound below grows with |x|
    out = device_poisoned(x.nbytes)
    f.launch(16, 256, (out, upload(x), n))
    with np.errstate(all="ignore"):
        expect = UNARY[op](x.astype(np.float64))
    got = download(out, n, dtype)
    with np.errstate(over="ignore"):      # float16 overflows to inf, as the kernel's output must
        _check_unary(op, x, got, expect, dtype)


def _check_unary(op, x, got, expect, dtype):
    if op == "exp":
        # ex2.approx(x * log2 e): relative error about (2 + 1.2 |x|) float32 ulps.
        ulp = np.finfo(np.float32).eps if dtype == np.float32 else np.finfo(np.float16).eps
        finite = np.isfinite(expect.astype(dtype))     # as the output type sees it: f16 overflows at 65504
        np.testing.assert_array_equal(got[~finite], expect[~finite].astype(dtype))   # inf and NaN exact
        tol = (2 + 1.2 * np.abs(x[finite].astype(np.float64)) + 1) * ulp * np.abs(expect[finite])
        err = np.abs(got[finite].astype(np.float64) - expect[finite])
        assert (err <= tol + np.finfo(dtype).tiny).all(), f"worst excess {np.max(err - tol)}"
    else:
        np.testing.assert_array_equal(got, expect.astype(dtype))


def test_fill(driver, rng):
    mod = kernels.module("fill")
    for n in sizes(rng):
        value = np.float32(rng.standard_normal())
        out = device_poisoned(max(4, 4 * n))
        mod.get_function("fill_f32").launch(int(rng.integers(1, 9)), 64, (out, value, n))
        np.testing.assert_array_equal(download(out, n, np.float32), np.full(n, value))
        bits = int(rng.integers(0, 2**32))
        mod.get_function("fill_u32").launch(3, 32, (out, bits, n))
        np.testing.assert_array_equal(download(out, n, np.uint32), np.full(n, bits, np.uint32))

"""The math ops (sqrt rsqrt log log1p expm1 tanh sigmoid abs, minimum, pow, clamp, clamp_,
min) against numpy with hypothesis, on the CPU backend and CUDA: random shapes (0-sized
dimensions, non-contiguous views), NaN, inf and -0.0; and their errors."""
import numpy as np
import pytest
from helpers.tensor_strategies import FLOATS, LAYOUTS, PROPERTY, as_tensor, assert_same, shapes, values
from hypothesis import given
from hypothesis import strategies as st

import lowlevel as ll

UNARY = {"sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "log": np.log, "log1p": np.log1p,
         "expm1": np.expm1, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "abs": np.abs}
# exact on both backends (IEEE instructions); the rest go through ex2/lg2.approx on CUDA
EXACT = {"sqrt", "abs"}


def _kind(device):
    return "cpu" if device == "cpu" else "cuda"


def _one(data, device, dtypes):
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    return as_tensor(data.draw(values(dtype, data.draw(shapes()))), dtype, device, data.draw(LAYOUTS))


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(UNARY)))
def test_unary_math_matches_numpy(device, data, op):
    t, x = _one(data, device, FLOATS[_kind(device)])
    with np.errstate(all="ignore"):
        expected = UNARY[op](x).astype(x.dtype)
    got = getattr(t, op)().numpy()
    if op in EXACT or device == "cpu":
        assert_same(got, expected, rtol=0 if op in EXACT else 1e-6, atol=0 if op in EXACT else 1e-7)
    else:
        assert_same(got, expected, rtol=1e-5, atol=1e-6)
    if op not in EXACT:
        assert np.array_equal(np.isnan(got), np.isnan(expected))


@PROPERTY
@given(data=st.data(), lo=st.sampled_from([None, -1.0, 0.0, np.nan]), hi=st.sampled_from([None, 2.0, -0.0]))
def test_minimum_clamp_and_min_match_numpy(device, data, lo, hi):
    t, x = _one(data, device, FLOATS[_kind(device)])
    u, y = as_tensor(data.draw(values(t.dtype, x.shape)), t.dtype, device, "contiguous")
    assert_same(ll.minimum(t, u).numpy(), np.minimum(x, y), signed_zeros=False)
    if lo is not None or hi is not None:
        expected = x if lo is None else np.maximum(x, x.dtype.type(lo))
        expected = expected if hi is None else np.minimum(expected, x.dtype.type(hi))
        assert_same(t.clamp(lo, hi).numpy(), expected, signed_zeros=False)
        c = ll.tensor(x, dtype=t.dtype, device=device)
        assert c.clamp_(lo, hi) is c
        assert_same(c.numpy(), expected, signed_zeros=False)
    if x.size:
        assert_same(t.min().numpy(), np.min(x), signed_zeros=False)
        if x.ndim and x.shape[-1]:
            assert_same(t.min(-1, keepdim=True).values.numpy(), np.min(x, -1, keepdims=True), signed_zeros=False)


def _pow_tolerance(x, y, device):
    """CUDA's pow_f32 is 2^(y log2|x|) with lg2/ex2.approx: relative error about
    |y log2|x|| * 2^-22 (scaled by the multiply) plus a few ulp; the CPU is numpy's."""
    if device == "cpu":
        return 1e-6
    with np.errstate(all="ignore"):
        scale = np.abs(np.float64(y) * np.log2(np.abs(np.float64(x))))
    return float(np.max(np.where(np.isfinite(scale), scale, 0), initial=0)) * 2.0 ** -21 + 4e-7


@PROPERTY
@given(data=st.data(), exponent=st.sampled_from([2.0, 0.5, -1.0, 3.0, 0.0, -0.0, np.inf, np.nan]))
def test_pow_matches_numpy(device, data, exponent):
    # on CUDA float32 by ptx/pow_f32.ptx, with C's special cases (x^0 = 1, 1^y = 1, NaN,
    # signed zeros and infinities) exact, the rest approximate (see its header)
    t, x = _one(data, device, FLOATS[_kind(device)])
    with np.errstate(all="ignore"):
        expected = np.power(x, x.dtype.type(exponent))
        assert_same((t ** exponent).numpy(), expected, rtol=_pow_tolerance(x, exponent, device), atol=1e-30)
        y = data.draw(values(t.dtype, x.shape))
        got = ll.pow(t, ll.tensor(y, dtype=t.dtype, device=device)).numpy()
        expected = np.power(x, y)
        assert_same(got, expected, rtol=_pow_tolerance(x, y, device), atol=1e-30)
        number = ~np.isnan(expected)
        assert np.array_equal(np.signbit(got[number]), np.signbit(expected[number]))     # the sign is exact


def test_pow_special_cases_on_cuda(driver):
    x = ll.tensor([0.0, -0.0, -0.0, -2.0, -2.0, -np.inf, -1.0, 1.0, np.nan, -8.0, 0.0], device="cuda")
    y = ll.tensor([-1.0, 3.0, -3.0, 3.0, 0.5, 0.5, np.inf, np.nan, 0.0, 1.0 / 3.0, 0.0], device="cuda")
    with np.errstate(all="ignore"):
        expected = np.power(x.numpy(), y.numpy())
    np.testing.assert_array_equal(ll.pow(x, y).numpy(), expected)
    number = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(ll.pow(x, y).numpy()[number]), np.signbit(expected[number]))


def test_math_ops_refuse_what_they_cannot_take(device):
    i = ll.tensor([1, 2], device="cpu")
    for op in ("sqrt", "rsqrt", "log", "log1p", "expm1", "tanh", "sigmoid"):
        got = getattr(ll, op)(i)            # an int64 tensor computes in float32, as in PyTorch
        assert got.dtype is ll.float32
        np.testing.assert_array_equal(got.numpy(), getattr(ll, op)(i.to(ll.float32)).numpy())
        with pytest.raises(TypeError, match=f"{op}: expected a tensor, got list"):
            getattr(ll, op)([1.0])
    assert ll.abs(ll.tensor([-3, 2])).numpy().tolist() == [3, 2]
    with pytest.raises(TypeError, match="pow: integer powers are not supported"):
        i ** 2
    with pytest.raises(ValueError, match="clamp: at least one of min and max"):
        ll.zeros(2, device=device).clamp()
    with pytest.raises(TypeError, match="clamp: min must be a number or a tensor, got str"):
        ll.zeros(2, device=device).clamp("0")
    with pytest.raises(ValueError, match="minimum: shapes \\(2,\\) and \\(3,\\) do not broadcast"):
        ll.minimum(ll.zeros(2, device=device), ll.zeros(3, device=device))


def test_cuda_math_has_kernels_for_every_float_dtype(driver):
    x = ll.tensor([0.25, 4.0], device="cuda")
    np.testing.assert_allclose(x.rsqrt().numpy(), [2.0, 0.5], rtol=1e-6)
    np.testing.assert_allclose(x.half().tanh().numpy(), np.tanh(x.numpy()).astype(np.float16), rtol=1e-3)
    np.testing.assert_array_equal((x.double() ** 2.0).numpy(), [0.0625, 16.0])     # exact: 1 ulp at most
    np.testing.assert_array_equal((x.to(ll.bfloat16) ** 2.0).to(ll.float32).numpy(), [0.0625, 16.0])

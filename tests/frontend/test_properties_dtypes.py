"""Property tests (hypothesis) of the dtypes beside float32, against numpy, on the CPU backend
and on CUDA (the generated kernels of ptx/elementwise_{i32,i64,f64}.ptx, compare_*.ptx,
where_bits.ptx, reduce_dtypes.ptx and cast_all.ptx): int32 and int64 arithmetic that wraps
as numpy's does, float64 with NaN, inf and -0.0, comparisons, where of every dtype,
reductions, and casts between every pair of dtypes. Shapes include 0-sized dimensions,
broadcasting and non-contiguous views."""
import numpy as np
from helpers.tensor_strategies import LAYOUTS, NUMPY, PROPERTY, SPECIALS, as_tensor, assert_same
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

INTS_F64 = [ll.int32, ll.int64, ll.float64]
ALL = [ll.bool, ll.int32, ll.int64, ll.float16, ll.bfloat16, ll.float32, ll.float64]


def _elements(dtype, big=True):
    """Small numbers, and for integers the extremes (so that wrapping is tested); for floats
    the specials and fractions."""
    if dtype is ll.bool:
        return st.booleans()
    if not dtype.is_float:
        info = np.iinfo(NUMPY[dtype])
        extremes = st.sampled_from([info.min, info.max, info.min + 1, -1]) if big else st.nothing()
        return st.integers(-50, 50) | extremes
    return st.integers(-64, 64).map(float) | st.floats(-64, 64, width=16) | st.sampled_from(SPECIALS)


def _array(data, dtype, shape, big=True):
    if dtype is ll.bfloat16:       # values a bfloat16 holds exactly: float32 with the low half zero
        x = data.draw(hnp.arrays(np.float32, shape, elements=_elements(ll.float32)))
        return (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return data.draw(hnp.arrays(NUMPY[dtype], shape, elements=_elements(dtype, big)))


def _operands(data, device, dtypes, num=2, big=True):
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=num, min_dims=0, max_dims=3, min_side=0,
                                                         max_side=4), label="shapes")
    return dtype, [_tensor(data, _array(data, dtype, s, big), dtype, device) for s in shapes.input_shapes]


def _tensor(data, x, dtype, device):
    """(a tensor of x's values in a random layout, the values)."""
    layout = data.draw(LAYOUTS, label="layout")
    if dtype is ll.bfloat16:
        t, v = as_tensor(x, ll.float32, device, layout)
        return t.to(ll.bfloat16), v
    return as_tensor(x, dtype, device, layout)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(BINARY)))
def test_integer_and_float64_arithmetic_matches_numpy(device, data, op):
    dtype, [(a, x), (b, y)] = _operands(data, device, INTS_F64)
    with np.errstate(all="ignore"):
        expected = BINARY[op](x, y)          # integers wrap modulo 2^32 / 2^64 in numpy too
    assert_same(getattr(ll, op)(a, b).numpy(), expected, signed_zeros=op not in ("maximum", "minimum"))


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["neg", "abs", "relu", "sqrt", "div"]))
def test_integer_and_float64_unary_ops_and_division_match_numpy(device, data, op):
    dtypes = [ll.float64] if op in ("sqrt", "div") else INTS_F64
    dtype, [(a, x), (b, y)] = _operands(data, device, dtypes)
    with np.errstate(all="ignore"):
        expected = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "div": None,
                    "relu": lambda v: np.where((v > 0) | np.isnan(v), v, v.dtype.type(0))}[op]   # -0.0 -> +0.0
        expected = x / y if op == "div" else expected(x)
        got = a / b if op == "div" else getattr(ll, op)(a) if op != "relu" else a.relu()
    assert_same(got.numpy(), expected)


def test_integer_division_gives_floats_on_every_backend(device):
    # / on integers gives the default float dtype, as in PyTorch, on every backend
    a = ll.tensor([3, 4], dtype=ll.int32, device=device)
    out = a / ll.tensor([2, 8], dtype=ll.int32, device=device)
    assert out.dtype is ll.float32 and out.numpy().tolist() == [1.5, 0.5]


COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(COMPARE)))
def test_comparisons_of_every_number_dtype_match_numpy(device, data, op):
    dtype, [(a, x), (b, y)] = _operands(data, device, [ll.int32, ll.int64, ll.float64, ll.float16, ll.bfloat16])
    out = getattr(ll, op)(a, b)
    assert out.dtype is ll.bool
    assert_same(out.numpy(), COMPARE[op](x, y))


@PROPERTY
@given(data=st.data())
def test_where_of_every_dtype_matches_numpy(device, data):
    dtype, [(a, x), (b, y)] = _operands(data, device, ALL)
    cond = data.draw(hnp.arrays(np.bool_, np.broadcast_shapes(x.shape, y.shape)))
    got = ll.where(ll.tensor(cond, device=device), a, b)
    expected = np.where(cond, x, y)
    if dtype is ll.bfloat16:
        got, expected = got.to(ll.float32), expected.astype(np.float32)
    assert_same(got.numpy(), expected)


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["sum", "max", "min", "mean"]), keepdim=st.booleans())
def test_integer_and_float64_reductions_match_numpy(device, data, op, keepdim):
    dtypes = [ll.float64] if op == "mean" else INTS_F64
    dtype, [(t, x)] = _operands(data, device, dtypes, num=1)
    dim = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.none(), label="dim")
    if op in ("max", "min"):
        assume(x.size and (dim is None or x.shape[dim]))
    with np.errstate(all="ignore"):
        if op == "sum":          # integers sum in int64, as in numpy and PyTorch
            expected = np.sum(x, axis=dim, keepdims=keepdim, dtype=np.int64 if x.dtype.kind == "i" else None)
        elif op == "mean":
            expected = np.sum(x, axis=dim, keepdims=keepdim) / (x.size if dim is None else x.shape[dim])
        else:
            expected = getattr(np, op)(x, axis=dim, keepdims=keepdim)
    got = getattr(t, op)(dim, keepdim)
    got = (got.values if op in ("max", "min") and dim is not None else got).numpy()
    if dtype is ll.float64 and op in ("sum", "mean"):
        # another order of the additions: within (n/32 + 5) * 2^-53 * sum|x|
        n = x.size if dim is None else x.shape[dim]
        bound = (n / 32 + 5) * 2.0 ** -53 * np.sum(np.abs(np.where(np.isfinite(x), x, 0)), axis=dim, keepdims=keepdim)
        assert_same(got, np.asarray(expected), rtol=0, atol=float(np.max(bound, initial=0)) + 1e-300)
    else:
        assert_same(got, np.asarray(expected))


# ---- casts between every pair ---------------------------------------------------------------------
def _bf16_round(v32: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16 (ties to even) as float32, by float64 arithmetic."""
    bits = v32.view(np.uint32)
    lo = (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    hi = ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32).astype(np.float64)
    x = v32.astype(np.float64)
    even_lo = ((bits >> np.uint32(16)) & np.uint32(1)) == 0
    with np.errstate(all="ignore"):
        pick_hi = (np.abs(hi - x) < np.abs(x - lo)) | ((np.abs(hi - x) == np.abs(x - lo)) & ~even_lo)
        out = np.where(pick_hi, hi, lo).astype(np.float32)
    return np.where(np.isfinite(v32), out, v32)


def _expected_cast(x: np.ndarray, src, dst) -> np.ndarray:
    if dst is ll.bfloat16:           # through float32, as the CPU backend and PyTorch convert
        return _bf16_round(x.astype(np.float32))
    with np.errstate(all="ignore"):
        return x.astype(NUMPY[dst])


@PROPERTY
@given(data=st.data(), src=st.sampled_from(ALL), dst=st.sampled_from(ALL))
def test_casts_between_every_pair_match_numpy(device, data, src, dst):
    assume(src is not dst)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    x = _array(data, src, shape)
    if src.is_float and not dst.is_float and dst is not ll.bool:
        # float -> int is undefined in C and numpy for NaN, inf and out of range (PTX gives
        # NaN -> 0 and saturates): only defined values are compared
        info = np.iinfo(NUMPY[dst])
        x = np.where(np.isfinite(x) & (np.abs(x) < info.max / 2), x, x.dtype.type(7))
    t, v = _tensor(data, x, src, device)
    got = t.to(dst)
    assert got.dtype is dst and got.shape == v.shape
    expected = _expected_cast(v, src, dst)
    values = got.to(ll.float32).numpy() if dst is ll.bfloat16 else got.numpy()
    assert_same(values, expected)


def test_float_to_int_where_c_is_undefined_follows_ptx_on_cuda(driver):
    # Documented, not numpy's (which is undefined): cvt.rzi gives NaN -> 0, saturation
    x = ll.tensor([np.nan, np.inf, -np.inf, 3e9, -3e9, -2.7], device="cuda")
    np.testing.assert_array_equal(x.to(ll.int32).numpy(), [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, -2])
    np.testing.assert_array_equal(x.double().to(ll.int64).numpy()[[0, 5]], [0, -2])


def _round_to(dtype, v: np.ndarray) -> np.ndarray:
    """float32 values rounded once to float16 / bfloat16 (nearest even), back as float32."""
    if dtype is ll.float16:
        return v.astype(np.float16).astype(np.float32)
    bits = v.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(v), np.float32(np.nan), rounded)


HALF_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
               "minimum": np.minimum}
HALF_UNARY = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "relu": lambda v: np.where((v > 0) | np.isnan(v), v, np.float32(0)),
              "exp": np.exp, "tanh": np.tanh, "log": np.log, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
HALF_EXACT = {"neg", "abs", "sqrt", "relu"}


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(HALF_BINARY) + sorted(HALF_UNARY)))
def test_half_arithmetic_is_float32_rounded_once(device, data, op):
    """float16 and bfloat16 compute in float32 and round once (as PyTorch): the arithmetic
    and the exact unary ops are numpy's float32 result rounded; the math ops within one ulp."""
    dtype, [(a, x), (b, y)] = _operands(data, device, [ll.float16, ll.bfloat16])
    x, y = x.astype(np.float32), y.astype(np.float32)
    with np.errstate(all="ignore"):
        if op in HALF_BINARY:
            got, want = getattr(ll, op)(a, b), _round_to(dtype, HALF_BINARY[op](x, y).astype(np.float32))
        else:
            got, want = getattr(ll, op)(a), _round_to(dtype, HALF_UNARY[op](x).astype(np.float32))
    assert got.dtype is dtype
    got = got.to(ll.float32).numpy()
    if op in HALF_BINARY or op in HALF_EXACT:
        assert_same(got, want, signed_zeros=op not in ("maximum", "minimum"))
    else:
        assert_same(got, want, rtol=2.0 ** -7 if dtype is ll.bfloat16 else 2.0 ** -10, atol=1e-30)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))

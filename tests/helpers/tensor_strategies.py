"""Hypothesis strategies for the property tests of the tensor layer: shapes (0-sized
dimensions included), values with NaN, inf and -0.0, and layouts (contiguous, transposed,
strided, expanded) of one set of values, so that every op is compared with numpy on views
as well as on fresh tensors.

Values are small (|x| <= 64, or the specials) so that a float32 sum in another order stays
within a tolerance and integer arithmetic never overflows: what is tested is the op, not
the rounding of a long sum.
"""
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

# Few examples and no deadline: the emulated GPU runs each kernel on the CPU. derandomize
# makes every run the same (a failure reproduces as is, with the example printed).
PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=["function_scoped_fixture", "too_slow", "data_too_large"])

SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0]
NUMPY = {ll.float32: np.float32, ll.float64: np.float64, ll.float16: np.float16, ll.int32: np.int32,
         ll.int64: np.int64, ll.bool: np.bool_}

# The dtypes the property tests draw, per op family and device. Both backends now compute the
# same dtypes: the element-wise arithmetic (+ - * maximum minimum neg relu abs) for every
# number dtype (bfloat16 too, drawn by test_properties_dtypes.py, which makes its values),
# the float ops (/ exp sqrt pow and the math ops, reductions, softmax) for the floats.
ELEMENTWISE_DTYPES = {"cpu": [ll.float32, ll.float64, ll.float16, ll.int32, ll.int64],
                      "cuda": [ll.float32, ll.float64, ll.float16, ll.int32, ll.int64]}
FLOATS = {"cpu": [ll.float32, ll.float64], "cuda": [ll.float32, ll.float64]}


def shapes(min_dims=0, max_dims=3, max_side=4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side)


def values(dtype, shape, specials=True):
    """An array of `dtype`'s numpy type: small numbers and, for floats, the specials."""
    kind = NUMPY[dtype]
    if dtype.is_float:
        finite = st.integers(-64, 64).map(float) | st.floats(-64, 64, width=16)
        elements = (finite | st.sampled_from(SPECIALS)) if specials else finite
    elif dtype is ll.bool:
        elements = st.booleans()
    else:
        elements = st.integers(-50, 50)
    return hnp.arrays(kind, shape, elements=elements)


# A layout is how the same values sit in memory: a fresh contiguous tensor, the transpose
# of a tensor of the reversed shape, every other element of one twice as long in its last
# dimension, or (for size-1 dimensions) a stride-0 expand.
LAYOUTS = st.sampled_from(["contiguous", "transposed", "strided", "expanded"])


def as_tensor(array: np.ndarray, dtype, device: str, layout: str):
    """(a tensor laid out as `layout` says, the numpy values it holds): the values are
    `array`'s, except for "expanded", where the first row is repeated along dimension 0."""
    if layout == "transposed" and array.ndim >= 2:
        return ll.tensor(np.ascontiguousarray(array.T), dtype=dtype, device=device).T, array
    if layout == "strided" and array.ndim >= 1:
        wide = np.repeat(array, 2, axis=-1)
        return ll.tensor(wide, dtype=dtype, device=device)[..., ::2], array
    if layout == "expanded" and array.ndim >= 1 and array.shape[0] > 1:
        t = ll.tensor(array[:1], dtype=dtype, device=device).expand(*array.shape)
        return t, np.broadcast_to(array[:1], array.shape).copy()
    return ll.tensor(array, dtype=dtype, device=device), array


def assert_same(got: np.ndarray, expected: np.ndarray, rtol=0.0, atol=0.0, signed_zeros=True):
    """Same shape, dtype, values (NaN where numpy has NaN) and, for exact ops, the sign of
    zero (unless signed_zeros=False: max(-0.0, 0.0) may be either)."""
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype.kind == "f" and rtol == atol == 0:
        np.testing.assert_array_equal(got, expected)
        if signed_zeros:
            np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]),
                                          np.signbit(expected[~np.isnan(expected)]))
    elif got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)

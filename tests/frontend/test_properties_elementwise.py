"""Property tests (hypothesis) of the element-wise ops, comparisons and where, against numpy:
random shapes with 0-sized dimensions, broadcasting, non-contiguous views, every dtype a
device computes in, and NaN, inf and -0.0 among the values. On the CPU backend and on CUDA
(the emulated GPU here; the real one where present)."""
import numpy as np
from helpers.tensor_strategies import (ELEMENTWISE_DTYPES, FLOATS, LAYOUTS, PROPERTY, as_tensor,
                                       assert_same, values)
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}


def _kind(device):
    return "cpu" if device == "cpu" else "cuda"


def _operands(data, device, dtypes, num=2):
    """num tensors of mutually broadcastable shapes, one dtype, random layouts."""
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    shape_set = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=num, min_dims=0, max_dims=3, min_side=0,
                                                            max_side=4), label="shapes")
    pairs = [as_tensor(data.draw(values(dtype, s)), dtype, device, data.draw(LAYOUTS)) for s in shape_set.input_shapes]
    return dtype, pairs


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(BINARY)))
def test_binary_ops_match_numpy(device, data, op):
    dtype, [(a, x), (b, y)] = _operands(data, device, ELEMENTWISE_DTYPES[_kind(device)])
    with np.errstate(all="ignore"):
        expected = BINARY[op](x, y)
    assert_same(getattr(ll, op)(a, b).numpy(), expected)


@PROPERTY
@given(data=st.data())
def test_division_matches_numpy(device, data):
    dtype, [(a, x), (b, y)] = _operands(data, device, FLOATS[_kind(device)])
    with np.errstate(all="ignore"):
        expected = x / y
    # division is correctly rounded on both backends: the same bits, 0/0 NaN, 1/-0.0 -inf
    assert_same((a / b).numpy(), expected)


@PROPERTY
@given(data=st.data(), number=st.sampled_from([2.0, -0.5, 0.0, -0.0, np.inf]),
       op=st.sampled_from(["add", "sub", "mul", "div"]))
def test_a_number_as_either_operand(device, data, number, op):
    dtype, [(a, x)] = _operands(data, device, FLOATS[_kind(device)], num=1)
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    s = x.dtype.type(number)
    with np.errstate(all="ignore"):
        assert_same(getattr(ll, op)(a, number).numpy(), fn(x, s))
        assert_same(getattr(ll, op)(number, a).numpy(), fn(s, x))


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["neg", "relu", "exp"]))
def test_unary_ops_match_numpy(device, data, op):
    dtypes = FLOATS[_kind(device)] if op == "exp" else ELEMENTWISE_DTYPES[_kind(device)]
    dtype, [(a, x)] = _operands(data, device, dtypes, num=1)
    with np.errstate(all="ignore"):
        if op == "relu":
            # PyTorch's relu: NaN stays NaN, -0.0 becomes +0.0 (max(x, 0) picks 0)
            expected = np.where(np.isnan(x), x, np.where(x > 0, x, x.dtype.type(0)))
        else:
            expected = {"neg": np.negative, "exp": np.exp}[op](x)
    got = getattr(a, op)() if op != "neg" else -a
    if op == "exp":
        assert_same(got.numpy(), expected.astype(x.dtype), rtol=2e-6 if dtype is ll.float32 else 1e-14)
    else:
        assert_same(got.numpy(), expected)


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(COMPARE)))
def test_comparisons_match_numpy(device, data, op):
    dtypes = FLOATS[_kind(device)] + ([ll.int32, ll.int64] if device == "cpu" else [])
    dtype, [(a, x), (b, y)] = _operands(data, device, dtypes)
    out = getattr(ll, op)(a, b)
    assert out.dtype is ll.bool
    assert_same(out.numpy(), COMPARE[op](x, y))


@PROPERTY
@given(data=st.data())
def test_where_matches_numpy(device, data):
    dtype, [(a, x), (b, y), (c, z)] = _operands(data, device, FLOATS[_kind(device)], num=3)
    cond = c > 0
    assert_same(ll.where(cond, a, b).numpy(), np.where(z > 0, x, y))

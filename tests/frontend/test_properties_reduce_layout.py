"""Property tests (hypothesis) of reductions, softmax, matmul, views, contiguous, in-place
ops and item assignment, against numpy, on the CPU backend and on CUDA: random shapes with
0-sized dimensions, non-contiguous inputs, NaN, inf and -0.0 among the values."""
import numpy as np
from helpers.tensor_strategies import FLOATS, LAYOUTS, PROPERTY, as_tensor, assert_same, shapes, values
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

# float32 sums in another order than numpy's: |x| <= 64 and at most 64 elements bound the
# difference well inside this
SUM_TOL = {"rtol": 1e-5, "atol": 1e-3}


def _kind(device):
    return "cpu" if device == "cpu" else "cuda"


def _one(data, device, dtypes, min_dims=0, specials=True):
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    shape = data.draw(shapes(min_dims=min_dims), label="shape")
    return as_tensor(data.draw(values(dtype, shape, specials)), dtype, device, data.draw(LAYOUTS))


def _dim(data, ndim):
    return data.draw(st.none() | st.integers(-ndim, ndim - 1) if ndim else st.none(), label="dim")


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["sum", "mean", "max"]), keepdim=st.booleans())
def test_reductions_match_numpy(device, data, op, keepdim):
    t, x = _one(data, device, FLOATS[_kind(device)])
    dim = _dim(data, x.ndim)
    if op == "max":
        assume(x.size and (dim is None or x.shape[dim]))       # an empty max is an error (below)
    with np.errstate(all="ignore"):
        v = x.astype(np.float64)
        total = (np.max if op == "max" else np.sum)(v, axis=dim, keepdims=keepdim)
        count = x.size if dim is None else x.shape[dim]
        expected = (total / np.float64(count) if op == "mean" else total).astype(x.dtype)
    got = getattr(t, op)(dim, keepdim)
    got = (got.values if op == "max" and dim is not None else got).numpy()     # max(dim): (values, indices)
    if op == "max":
        assert_same(got, expected, signed_zeros=False)      # exact, NaN propagates; max(-0.0, 0.0) either
    else:
        assert_same(got, expected, **SUM_TOL)


@PROPERTY
@given(data=st.data())
def test_max_of_an_empty_dimension_is_an_error(device, data):
    t, x = _one(data, device, FLOATS[_kind(device)], min_dims=1)
    dim = data.draw(st.integers(0, x.ndim - 1))
    assume(x.shape[dim] == 0)
    try:
        t.max(dim)
    except IndexError as e:             # PyTorch's error and message
        assert str(e) == f"max(): Expected reduction dim {dim} to have non-zero size."
    else:
        raise AssertionError("max over an empty dimension returned a value")


@PROPERTY
@given(data=st.data())
def test_softmax_matches_numpy(device, data):
    t, x = _one(data, device, FLOATS[_kind(device)], min_dims=1)
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    v = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(v - v.max(axis=dim, keepdims=True)) if v.size else v
        expected = (e / e.sum(axis=dim, keepdims=True)).astype(x.dtype)
    assert_same(t.softmax(dim).numpy(), expected, rtol=1e-5, atol=1e-6)


@PROPERTY
@given(data=st.data(), batch=st.sampled_from([None, 0, 1, 3]), m=st.integers(0, 4), k=st.integers(0, 4),
       n=st.integers(0, 4), layout_a=LAYOUTS, layout_b=LAYOUTS)
def test_matmul_matches_numpy(device, data, batch, m, k, n, layout_a, layout_b):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)]))
    lead = () if batch is None else (batch,)
    x = data.draw(values(dtype, lead + (m, k), specials=False))
    y = data.draw(values(dtype, (k, n) if data.draw(st.booleans()) else lead + (k, n), specials=False))
    a, x = as_tensor(x, dtype, device, layout_a)
    b, y = as_tensor(y, dtype, device, layout_b)
    assert_same((a @ b).numpy(), np.matmul(x.astype(np.float64), y).astype(x.dtype), rtol=1e-5, atol=1e-3)


@PROPERTY
@given(data=st.data())
def test_views_and_contiguous_match_numpy(device, data):
    t, x = _one(data, device, [ll.float32, ll.int32] if device == "cpu" else [ll.float32])
    assert_same(t.numpy(), x)
    c = t.contiguous()
    assert c.is_contiguous()
    assert_same(c.numpy(), x)
    assert_same(t.reshape(-1).numpy(), x.reshape(-1))
    if x.ndim >= 2:
        assert_same(t.transpose(0, -1).numpy(), np.swapaxes(x, 0, -1))
        assert_same(t.T.contiguous().numpy(), x.T)
    index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True).filter(_positive_steps), label="index")
    assert_same(t[index].contiguous().numpy(), x[index])
    lead = data.draw(st.integers(0, 3))
    assert_same(t.expand(lead, *x.shape).numpy(), np.broadcast_to(x, (lead, *x.shape)))


def _positive_steps(index) -> bool:
    index = index if isinstance(index, tuple) else (index,)
    return all(not isinstance(i, slice) or i.step is None or i.step > 0 for i in index)


def _fits(shape):
    """Shapes that broadcast to `shape` exactly (what an in-place op or a write accepts)."""
    return hnp.broadcastable_shapes(shape, max_dims=len(shape), min_side=0).filter(
        lambda s: np.broadcast_shapes(s, shape) == tuple(shape))


INPLACE = {"add_": np.add, "sub_": np.subtract, "mul_": np.multiply, "div_": np.divide}


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(INPLACE)))
def test_inplace_ops_change_the_view_and_its_base(device, data, op):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)]))
    x = data.draw(values(dtype, data.draw(shapes(min_dims=1))))
    base = ll.tensor(x, dtype=dtype, device=device)
    index = data.draw(hnp.basic_indices(x.shape).filter(_positive_steps), label="index")
    view = base[index]
    other_shape = data.draw(_fits(view.shape), label="other shape")
    y = data.draw(values(dtype, other_shape))
    expected = x.copy()
    with np.errstate(all="ignore"):
        expected[index] = INPLACE[op](expected[index], y)
    assert getattr(view, op)(ll.tensor(y, dtype=dtype, device=device)) is view
    assert_same(base.numpy(), expected)


@PROPERTY
@given(data=st.data(), scalar=st.booleans())
def test_setitem_matches_numpy(device, data, scalar):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)] + ([ll.int64] if device == "cpu" else [])))
    x = data.draw(values(dtype, data.draw(shapes(min_dims=1))))
    t = ll.tensor(x, dtype=dtype, device=device)
    index = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True).filter(_positive_steps), label="index")
    target = x[index]
    if scalar:
        value = data.draw(st.sampled_from([-0.0, 1.5, np.nan, np.inf]) if dtype.is_float else st.integers(-9, 9))
        written = value
    else:
        written = data.draw(values(dtype, data.draw(_fits(target.shape))))
        value = ll.tensor(written, dtype=dtype, device=device)
    expected = x.copy()
    expected[index] = written
    t[index] = value
    assert_same(t.numpy(), expected)


@PROPERTY
@given(data=st.data())
def test_fill_zero_and_copy(device, data):
    t, x = _one(data, device, FLOATS[_kind(device)], min_dims=1)
    if any(st_ == 0 and n > 1 for st_, n in zip(t.strides, t.shape)):
        t = t.contiguous()              # an expanded view cannot be written (an error, tested elsewhere)
    src = data.draw(values(t.dtype, x.shape[1:]))
    t.copy_(ll.tensor(src, dtype=t.dtype, device=device))
    assert_same(t.numpy(), np.broadcast_to(src.astype(x.dtype), x.shape))
    t.fill_(-0.0)
    assert_same(t.numpy(), np.full(x.shape, -0.0, x.dtype))
    t.zero_()
    assert_same(t.numpy(), np.zeros(x.shape, x.dtype))

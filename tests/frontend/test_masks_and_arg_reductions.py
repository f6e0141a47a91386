"""all, any, argmax, argmin, boolean mask indexing (t[mask]) and mask assignment
(t[mask] = v) against numpy with hypothesis, on the CPU backend and CUDA, and their errors."""
import numpy as np
import pytest
from helpers.tensor_strategies import FLOATS, LAYOUTS, PROPERTY, as_tensor, assert_same, shapes, values
from hypothesis import assume, given
from hypothesis import strategies as st

import lowlevel as ll


def _kind(device):
    return "cpu" if device == "cpu" else "cuda"


def _one(data, device, dtypes, min_dims=0):
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    return as_tensor(data.draw(values(dtype, data.draw(shapes(min_dims=min_dims)))), dtype, device,
                     data.draw(LAYOUTS))


def _dim(data, ndim):
    return data.draw(st.none() | st.integers(-ndim, ndim - 1) if ndim else st.none(), label="dim")


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["all", "any"]), keepdim=st.booleans(), of_bool=st.booleans())
def test_all_and_any_match_numpy(device, data, op, keepdim, of_bool):
    t, x = _one(data, device, FLOATS[_kind(device)])
    if of_bool:
        t, x = t > 0, x > 0
    dim = _dim(data, x.ndim)
    got = getattr(t, op)(dim, keepdim)
    assert got.dtype is ll.bool
    assert_same(got.numpy(), getattr(np, op)(x != 0, axis=dim, keepdims=keepdim))


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["argmax", "argmin"]), keepdim=st.booleans())
def test_argmax_and_argmin_match_numpy(device, data, op, keepdim):
    # on CUDA by ptx/argreduce.ptx (float16 widened, bool as int32); NaN is the first best
    t, x = _one(data, device, [ll.float32, ll.float64, ll.int32, ll.int64, ll.float16, ll.bool])
    dim = _dim(data, x.ndim)
    assume(x.size and (dim is None or x.shape[dim]))
    expected = getattr(np, op)(x, axis=dim, keepdims=keepdim) if x.ndim else np.asarray(0)
    if dim is None:
        expected = np.asarray(getattr(np, op)(x.reshape(-1))).reshape((1,) * x.ndim if keepdim else ())
    got = getattr(t, op)(dim, keepdim)
    assert got.dtype is ll.int64
    assert_same(got.numpy(), expected)


@PROPERTY
@given(data=st.data(), leading=st.booleans())
def test_mask_indexing_matches_numpy(device, data, leading):
    # on CUDA by ptx/masked.ptx: a device count, one read of it, a one-warp compaction
    t, x = _one(data, device, [ll.float32, ll.int32, ll.int64, ll.float16, ll.bool], min_dims=1)
    m = data.draw(values(ll.bool, x.shape[:1] if leading else x.shape))
    assert_same(t[ll.tensor(m, device=device)].numpy(), x[m])


@PROPERTY
@given(data=st.data(), leading=st.booleans(), scalar=st.booleans())
def test_mask_assignment_matches_numpy(device, data, leading, scalar):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)]))
    x = data.draw(values(dtype, data.draw(shapes(min_dims=1))))
    t = ll.tensor(x, dtype=dtype, device=device)
    m = data.draw(values(ll.bool, x.shape[:1] if leading else x.shape))
    expected = x.copy()
    if scalar:
        value = data.draw(st.sampled_from([-0.0, 2.5, np.nan]))
        expected[m] = value
        t[ll.tensor(m, device=device)] = value
    else:
        row = data.draw(values(dtype, x.shape[1:] if leading else ()))
        expected[m] = row
        t[ll.tensor(m, device=device)] = ll.tensor(row, dtype=dtype, device=device)
    assert_same(t.numpy(), expected)


def test_errors_name_the_op_and_operand(device):
    x = ll.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match=r"argmax: the reduced dimension of \(2, 0\) float32 .* is empty"):
        ll.zeros(2, 0, device=device).argmax(1)
    with pytest.raises(IndexError, match="argmin: dim 2 is out of range"):
        x.argmin(2)
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[ll.zeros(2, device=device)]
    with pytest.raises(IndexError, match=r"the mask of shape \(3,\) does not match .* \(2,\)"):
        x[ll.zeros(3, device=device) > 0]
    with pytest.raises(IndexError, match=r"the mask of shape \(3,\) does not match"):
        x[ll.zeros(3, device=device) > 0] = 1.0
    with pytest.raises(TypeError, match="masked_select: the mask must be a bool tensor, got"):
        ll.masked_select(x, x)
    with pytest.raises(TypeError, match="any: expected a tensor, got list"):
        ll.any([1])


def test_cuda_mask_selection_names_a_mask_on_another_device(driver):
    x = ll.zeros(2, 3, device="cuda")
    with pytest.raises(ValueError, match="masked_select: x is .* on cuda:0, the mask is .* on cpu"):
        ll.masked_select(x, ll.zeros(2, 3) > 0)

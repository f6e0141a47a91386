"""unsqueeze, squeeze, flatten, cat, stack, the *_like constructors, eye, linspace,
from_numpy, half/float/double and float()/int(): against numpy (hypothesis over shapes with
0-sized dimensions and non-contiguous inputs), on every device, and their errors."""
import numpy as np
import pytest
from helpers.tensor_strategies import FLOATS, LAYOUTS, PROPERTY, as_tensor, assert_same, shapes, values
from hypothesis import given
from hypothesis import strategies as st

import lowlevel as ll


def _kind(device):
    return "cpu" if device == "cpu" else "cuda"


@PROPERTY
@given(data=st.data())
def test_unsqueeze_squeeze_flatten_match_numpy(device, data):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)]))
    t, x = as_tensor(data.draw(values(dtype, data.draw(shapes()))), dtype, device, data.draw(LAYOUTS))
    d = data.draw(st.integers(-x.ndim - 1, x.ndim))
    assert_same(t.unsqueeze(d).numpy(), np.expand_dims(x, d))
    assert_same(t.squeeze().numpy(), np.squeeze(x))
    if x.ndim:
        s = data.draw(st.integers(-x.ndim, x.ndim - 1))
        assert_same(ll.squeeze(t, s).numpy(), np.squeeze(x, s) if x.shape[s] == 1 else x)
        start = data.draw(st.integers(0, x.ndim - 1))
        end = data.draw(st.integers(start, x.ndim - 1))
        merged = x.reshape(*x.shape[:start], int(np.prod(x.shape[start:end + 1])), *x.shape[end + 1:])
        assert_same(t.flatten(start, end).numpy(), merged)
    assert_same(ll.flatten(t).numpy(), x.reshape(-1))


@PROPERTY
@given(data=st.data(), count=st.integers(1, 3))
def test_cat_and_stack_match_numpy(device, data, count):
    dtype = data.draw(st.sampled_from(FLOATS[_kind(device)] + ([ll.int64] if device == "cpu" else [])))
    shape = data.draw(shapes(min_dims=1))
    d = data.draw(st.integers(-len(shape), len(shape) - 1))
    pairs = []
    for _ in range(count):
        own = list(shape)
        own[d] = data.draw(st.integers(0, 3))
        pairs.append(as_tensor(data.draw(values(dtype, tuple(own))), dtype, device, data.draw(LAYOUTS)))
    got = ll.cat([t for t, _ in pairs], d)
    assert got.device == pairs[0][0].device and got.dtype is dtype
    assert_same(got.numpy(), np.concatenate([x for _, x in pairs], d))
    same = [as_tensor(data.draw(values(dtype, shape)), dtype, device, "contiguous") for _ in range(count)]
    sd = data.draw(st.integers(-len(shape) - 1, len(shape)))
    assert_same(ll.stack([t for t, _ in same], sd).numpy(), np.stack([x for _, x in same], sd))


def test_cat_and_stack_refuse_what_does_not_join(device):
    a, b = ll.zeros(2, 3, device=device), ll.zeros(2, 4, device=device)
    with pytest.raises(ValueError, match=r"cat: sizes must match except in dimension 0.*\(2, 3\).*\(2, 4\)"):
        ll.cat([a, b])
    # tensors of two dtypes join in their result type, as in PyTorch (float32 and int64: float32)
    assert ll.cat([a, ll.zeros(2, 3, dtype=ll.int64, device=device)], 1).dtype is ll.float32
    with pytest.raises(IndexError, match="cat: dim 2 is out of range"):
        ll.cat([a, a], 2)
    with pytest.raises(ValueError, match="cat: expected a non-empty list"):
        ll.cat([])
    with pytest.raises(TypeError, match="cat: expected a list or tuple of tensors, got Tensor"):
        ll.cat(a)
    with pytest.raises(TypeError, match=r"stack: tensors\[1\] is int"):
        ll.stack([a, 3])
    with pytest.raises(ValueError, match=r"stack: expects each tensor to be equal size.*\(2, 4\) at entry 1"):
        ll.stack([a, b])
    with pytest.raises(ValueError, match="cat: zero-dimensional"):
        ll.cat([ll.zeros((), device=device)])


def test_cat_refuses_tensors_on_different_devices(driver):
    with pytest.raises(ValueError, match=r"cat: tensors\[0\] is .* on cpu, tensors\[1\] is .* on cuda:0"):
        ll.cat([ll.zeros(2), ll.zeros(2, device="cuda")])


def test_view_ops_check_their_dims(device):
    t = ll.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match="unsqueeze: dim 3 is out of range"):
        t.unsqueeze(3)
    with pytest.raises(IndexError, match="squeeze: dim -3 is out of range"):
        t.squeeze(-3)
    with pytest.raises(ValueError, match="flatten: start_dim 1 comes after end_dim 0"):
        t.flatten(1, 0)
    with pytest.raises(TypeError, match="unsqueeze: dim must be an int"):
        t.unsqueeze(1.0)


def test_constructors_match_numpy(device, rng):
    x = ll.randn(2, 0, 3, device=device)
    for fn, fill in ((ll.zeros_like, 0), (ll.ones_like, 1)):
        out = fn(x)
        assert out.shape == x.shape and out.dtype is x.dtype and out.device == x.device
        like = fn(ll.zeros(3, 2, device=device), dtype=ll.int64)
        assert like.dtype is ll.int64 and like.numpy().tolist() == [[fill] * 2] * 3
    assert ll.empty_like(x).shape == (2, 0, 3)
    assert_same(ll.eye(3, device=device).numpy(), np.eye(3, dtype=np.float32))
    assert_same(ll.eye(2, 4, dtype=ll.int64, device=device).numpy(), np.eye(2, 4, dtype=np.int64))
    assert_same(ll.linspace(-1, 2, 7, device=device).numpy(), np.linspace(-1, 2, 7).astype(np.float32))
    assert ll.linspace(0, 1, 0, device=device).shape == (0,)
    with pytest.raises(ValueError, match="eye: n must be a non-negative int"):
        ll.eye(-1)
    with pytest.raises(ValueError, match="linspace: steps must be a non-negative int"):
        ll.linspace(0, 1, 2.5)
    with pytest.raises(TypeError, match="linspace: start must be a number"):
        ll.linspace("0", 1, 3)
    with pytest.raises(TypeError, match="zeros_like: expected a tensor, got list"):
        ll.zeros_like([1, 2])


def test_from_numpy_keeps_dtype_and_values(rng):
    for array in (rng.standard_normal((3, 2)), rng.integers(-5, 5, (4,)).astype(np.int32),
                  rng.standard_normal((2, 3)).astype(np.float32).T):
        t = ll.from_numpy(array)
        assert t.device == ll.Device("cpu") and t.dtype is ll.tensor(array).dtype
        assert_same(t.numpy(), array)
    with pytest.raises(TypeError, match="from_numpy: expected a numpy.ndarray, got list"):
        ll.from_numpy([1.0])


def test_dtype_shorthands_and_python_numbers(device):
    t = ll.tensor([[1.5]], device=device)
    assert t.half().dtype is ll.float16 and t.half().float().dtype is ll.float32
    assert float(t) == 1.5 and int(t) == 1 and isinstance(float(t), float) and isinstance(int(t), int)
    if device == "cpu":
        assert t.double().dtype is ll.float64
    with pytest.raises(ValueError, match=r"float\(\): only a tensor with one element .* has 2"):
        float(ll.zeros(2, device=device))
    with pytest.raises(ValueError, match=r"int\(\): only a tensor with one element .* has 0"):
        int(ll.zeros(0, device=device))

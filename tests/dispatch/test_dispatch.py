"""The dispatcher: key sets, priorities, a backend registered from user code, fallthrough,
include/exclude, redispatch, and explain()."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import dispatch
from lowlevel.frontend.creation import from_numpy_values
from lowlevel.frontend.tensor import Tensor


@pytest.fixture(scope="module")
def mock_backend():
    """A backend defined here: tensors on device "mockdev" keep host storage, and its add
    records every call it receives."""
    key = dispatch.register_backend("MockDevice", "mockdev")
    calls = []

    @dispatch.register_kernel("add", key)
    def mock_add(a, b):
        calls.append((a.shape, b.shape))
        va, vb = a.host_view(), b.host_view()
        return from_numpy_values(np.add(va, vb), a.dtype, a.device)

    @dispatch.register_kernel("to_device", key)
    def to_mock(x, device):
        return from_numpy_values(x.dtype.to_numpy_values(x.host_view()), x.dtype, device)

    @dispatch.register_kernel("to_host", key)
    def from_mock(x):
        return from_numpy_values(x.host_view(), x.dtype, "cpu")
    return key, calls


def test_user_backend_receives_its_ops(mock_backend, rng):
    key, calls = mock_backend
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    a, b = ll.tensor(x, device="mockdev"), ll.tensor(y, device="mockdev")
    assert a.device.type == "mockdev"
    before = len(calls)
    out = a + b
    assert calls[before:] == [((2, 3), (3,))]
    assert out.device.type == "mockdev"
    np.testing.assert_array_equal(out.numpy(), x + y)
    assert dispatch.keyset_for((a, b)).keys == (key,)


def test_missing_kernel_says_which(mock_backend):
    a = ll.zeros(2, device="mockdev")
    with pytest.raises(NotImplementedError, match=r"mul has no kernel for any key in KeySet\(MockDevice\)"):
        a * a


def test_keys_are_tried_by_priority_and_fallthrough_skips():
    low = dispatch.register_backend("LowPriority", "lowdev", priority=11)
    high = dispatch.register_key("Wrapper", 90)
    seen = []
    dispatch.register_kernel("neg", high, lambda x: seen.append("wrapper") or "from wrapper")
    x = ll.zeros(2)
    with dispatch.include(high):
        assert ll.neg(x) == "from wrapper"
        dispatch.register_fallthrough(high, "neg")           # now neg passes through Wrapper
        assert isinstance(ll.neg(x), Tensor)
    assert seen == ["wrapper"]
    with dispatch.include(high), dispatch.exclude(high):
        assert dispatch.keyset_for((x,)).keys == (dispatch.CPU,)
    assert low.priority == 11


def test_redispatch_below_the_current_key():
    key = dispatch.register_key("Doubler", 95)

    def doubling(op, below, args, kwargs):
        # A fallback for every op: run the op below this key, then double the result.
        result = dispatch.redispatch(op, below, *args, **kwargs)
        return from_numpy_values(result.host_view() * 2, result.dtype, result.device)
    dispatch.register_fallback(key, doubling)
    x = ll.tensor([1.0, 2.0])
    with dispatch.include(key):
        assert (x + x).numpy().tolist() == [4.0, 8.0]
    assert (x + x).numpy().tolist() == [2.0, 4.0]


def test_explain_returns_the_route_once(device, capsys):
    a = ll.zeros(2, 2, device=device)
    text = ll.explain("matmul", a, a)
    backend = "CUDA" if device == "cuda" else "CPU"
    assert f"key set KeySet({backend})" in text and "<- chosen" in text and "matmul" in text
    # returned, not also printed: a REPL shows its repr, which is the text itself, once
    assert capsys.readouterr().out == ""
    assert repr(text) == str(text) and isinstance(text, str)
    with ll.profile():
        text = ll.explain("add", a, a)
    assert "Profiler" in text.splitlines()[1] and "redispatches" in text

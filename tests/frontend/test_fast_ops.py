"""The element-wise ops' common cases, checked and dispatched in one frame (frontend/fast_ops.py):
every check still happens (the same errors, word for word), autograd, a trace and a user
backend see every call, and the results are numpy's."""
import re

import numpy as np
import pytest

import lowlevel as ll
from lowlevel import dispatch, trace


def _raises(exc, message, fn):
    """fn() raises `exc` with exactly `message`."""
    with pytest.raises(exc, match=f"^{re.escape(message)}$"):
        fn()


def test_two_tensor_errors_are_word_for_word(device):
    a = ll.zeros(3, device=device)
    _raises(TypeError, f"matmul: operands have different dtypes: a is (3,) float32 on {a.device}, b is (3,) "
            f"float64 on {a.device}; convert one with .to(dtype)", lambda: a @ ll.zeros(3, dtype="float64", device=device))
    _raises(ValueError, "mul: shapes (3,) and (4,) do not broadcast (dimension -1: 3 vs 4)",
            lambda: a * ll.zeros(4, device=device))
    _raises(TypeError, "add: cannot combine a tensor with str", lambda: a + "x")
    _raises(TypeError, "add: cannot combine a tensor with str", lambda: "x" + a)
    _raises(TypeError, "sub: cannot combine a tensor with NoneType", lambda: ll.sub(None, a))
    _raises(TypeError, "maximum: cannot combine a tensor with list", lambda: ll.maximum(a, [1.0]))
    _raises(TypeError, "add: needs at least one tensor, got float and float", lambda: ll.add(1.0, 2.0))
    assert ll.exp(ll.zeros(3, dtype="int64", device=device)).dtype is ll.float32      # promoted, as in PyTorch
    _raises(TypeError, "relu: expected a tensor, got float", lambda: ll.relu(1.0))


def test_operands_on_two_devices_are_refused_by_name(driver):
    a, b = ll.zeros(2), ll.zeros(2, device="cuda")
    _raises(ValueError, "add: operands are on different devices: a is (2,) float32 on cpu, b is (2,) float32 "
            "on cuda:0", lambda: a + b)
    _raises(ValueError, "minimum: operands are on different devices: a is (2,) float32 on cuda:0, b is (2,) "
            "float32 on cpu", lambda: ll.minimum(b, a))


def test_the_fast_cases_give_numpys_values(device, rng):
    x, y = (rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2))
    row = rng.standard_normal(5).astype(np.float32)
    a, b, r = (ll.tensor(v, device=device) for v in (x, y, row))
    with np.errstate(all="ignore"):
        checks = [(a + b, x + y), (a * b, x * y), (ll.maximum(a, b), np.maximum(x, y)),
                  (ll.minimum(a, b), np.minimum(x, y)), (a - b, x - y), (a / b, x / y), (a * 2.0, x * np.float32(2)),
                  (a + 3, x + np.float32(3)), (2.0 * a, np.float32(2) * x), (a + r, x + row),   # broadcast
                  (a + True, x + np.float32(1)), (1 - a, np.float32(1) - x), (2.0 / a, np.float32(2) / x),
                  (True * a, x), (a.relu(), np.maximum(x, 0)), (ll.abs(a), np.abs(x)),
                  (ll.sqrt(ll.abs(a)), np.sqrt(np.abs(x)))]
    for got, expected in checks:
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_sub_and_div_keep_their_own_checks(device):
    mask = ll.zeros(2, dtype="bool", device=device)
    _raises(TypeError, "sub: - with a bool operand is not supported (as in PyTorch); to invert a mask use "
            "ll.eq(mask, False)", lambda: mask - mask)
    ints = ll.ones(2, dtype="int64", device=device)
    assert (ints / ints).dtype is ll.float32            # true division: the default float dtype


def test_requires_grad_set_after_creation_routes_through_autograd(device, rng):
    x = rng.standard_normal(6).astype(np.float32)
    a, b = ll.tensor(x, device=device), ll.tensor(x, device=device)
    assert (a + b).grad_fn is None                    # the fast way, no history
    a.requires_grad_(True)                            # after creation, after a fast call
    assert dispatch.route("add", a, b)[0] == "Autograd"
    out = ((a + b) * 2.0).relu() + a
    assert out.grad_fn is not None
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.where(4 * x > 0, 2.0, 0.0) + 1, rtol=1e-6)


def test_a_trace_records_the_checks_of_the_fast_ops(device):
    a = ll.ones(4, device=device)
    a + a, a * 2.0, a.relu()                          # warm: the fast way, untraced
    with trace.Recorder() as rec:
        a + a, a * 2.0, a.relu(), ll.exp(a)
    assert [op for op, _ in rec.validation] == ["add", "mul", "relu", "exp"]


def test_a_backend_registered_after_its_device_was_made(rng):
    """A Device made before its backend exists is refused by the dispatcher's own words; once
    the backend is registered, its kernels get the calls (the key bit is read then)."""
    device = ll.Device("latedev")
    x = rng.standard_normal(3).astype(np.float32)
    t = ll.Tensor(ll.tensor(x).storage, (3,), (1,), 0, ll.float32)
    t.device = device                                 # host bytes that claim the new device
    _raises(RuntimeError, "no backend is registered for device type 'latedev'", lambda: t + t)
    key = dispatch.register_backend("LateDevice", "latedev")
    seen = []

    @dispatch.register_kernel("add", key)
    def late_add(a, b):
        seen.append(a.device.type)
        return ll.tensor(a.host_view() + b.host_view())
    np.testing.assert_array_equal((t + t).numpy(), x + x)
    assert seen == ["latedev"]


def test_a_cached_number_is_never_written_by_in_place_ops(device, rng):
    """The 0-d tensor of a number is made once per (number, dtype, device, stream) and is
    only ever an operand: in-place ops on results and on the other operand leave it alone."""
    x = rng.standard_normal(5).astype(np.float32)
    a = ll.tensor(x, device=device)
    y = a * 2.0
    y.mul_(3.0)
    y += 2.0
    a.add_(2.0)
    a.sub_(a * 2.0)
    z = ll.zeros(5, device=device)
    np.testing.assert_array_equal((z + 2.0).numpy(), np.full(5, 2.0, np.float32))
    np.testing.assert_array_equal((z * 2.0 + 3.0).numpy(), np.full(5, 3.0, np.float32))
    np.testing.assert_allclose(y.numpy(), x * 6 + 2, rtol=1e-6)
    ints = ll.zeros(5, dtype="int64", device=device)
    assert (ints + 2).numpy().tolist() == [2] * 5 and (z + True).numpy().tolist() == [1.0] * 5
    assert (ll.zeros(5, dtype="float64", device=device) + 2.0).dtype is ll.float64


def test_a_cached_number_in_a_graph_of_autograd(device, rng):
    """A node that saved a number's 0-d tensor (mul) still sees its value after more ops
    with the same number, in place ones included."""
    x = rng.standard_normal(4).astype(np.float32)
    a = ll.tensor(x, device=device, requires_grad=True)
    out = a * 3.0
    b = ll.ones(4, device=device)
    b.mul_(3.0)
    b *= 3.0
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(4, 3.0, np.float32))
    np.testing.assert_array_equal(b.numpy(), np.full(4, 9.0, np.float32))


def test_the_constant_of_a_number_refuses_in_place_writes(device):
    """The one place a number's shared 0-d constant can be reached, what an autograd node
    saved: writing it (or a view of it) in place is refused by name, where it used to
    change the number for every later op (ones * 2.0 gave 5.0 after fill_(5.0))."""
    a = ll.ones(3, device=device, requires_grad=True)
    constant = (a * 2.0).grad_fn.saved()[1]
    assert constant.shape == () and constant.scalar_value == 2.0
    message = ("{op}: the tensor is (a view of) the 0-d constant lowlevel keeps for the number 2.0, which every "
               "op with that number reads; it cannot be written: clone() it first")
    writes = {"copy_": [lambda: constant.fill_(5.0), lambda: constant.copy_(ll.ones((), device=device)),
                        lambda: constant.reshape(1).zero_(), lambda: constant.__setitem__((), 3.0)],
              "add_": [lambda: constant.add_(1.0)], "mul_": [lambda: constant.mul_(2.0)]}
    for op, fns in writes.items():
        for fn in fns:
            _raises(RuntimeError, message.format(op=op), fn)
    np.testing.assert_array_equal((ll.ones(3, device=device) * 2.0).numpy(), np.full(3, 2.0, np.float32))
    copy = constant.clone()
    copy.fill_(7.0)                                   # a clone, and any other 0-d tensor, is writable
    other = ll.tensor(2.0, device=device)
    other.add_(1.0)
    assert (copy.item(), other.item()) == (7.0, 3.0)

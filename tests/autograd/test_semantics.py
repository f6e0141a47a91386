"""Autograd as PyTorch users rely on it: the Autograd dispatch key above the backend's,
leaves and .grad accumulation, no_grad / enable_grad, detach, retain_graph, the errors
PyTorch raises (a freed graph, a non-scalar backward, a tensor modified in place after a
node saved it, in-place on a leaf that requires grad), and in-place ops inside a graph."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel.dispatch import Autograd, route


def test_requires_grad_puts_the_autograd_key_above_the_backend(device):
    a = ll.randn(4, 3, device=device, requires_grad=True)
    b = ll.randn(3, 2, device=device)
    backend = "CPU" if device == "cpu" else "CUDA"
    assert route("matmul", a, b) == ["Autograd", backend]
    assert route("matmul", b.T, b) == [backend]                    # nobody requires grad
    text = ll.explain("matmul", a, b)
    assert "Autograd" in text.splitlines()[0] and "redispatches below Autograd" in text
    with ll.profile() as p:
        (a @ b).sum()
    assert p.records[0]["route"] == ["Profiler", "Autograd", backend]


def test_leaf_attributes_and_accumulation(device, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    a = ll.tensor(x, device=device, requires_grad=True)
    assert a.is_leaf and a.requires_grad and a.grad is None and a.grad_fn is None
    y = (a * a).sum()
    assert not y.is_leaf and y.grad_fn.name == "SumBackward"
    y.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * x, rtol=1e-6)
    (a * 3.0).sum().backward()                                      # accumulates
    np.testing.assert_allclose(a.grad.numpy(), 2 * x + 3, rtol=1e-6)
    b = ll.zeros(2, device=device).requires_grad_()
    assert b.requires_grad and b.is_leaf
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        ll.zeros(2, dtype=ll.int64, requires_grad=True)


def test_backward_with_a_gradient_and_the_scalar_rule(device):
    a = ll.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = a * 2.0
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()
    y.backward(ll.tensor([1.0, 10.0, 100.0], device=device))
    assert a.grad.numpy().tolist() == [2.0, 20.0, 200.0]
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        ll.zeros(1, device=device).backward()


def test_no_grad_enable_grad_and_detach(device):
    a = ll.ones(3, device=device, requires_grad=True)
    with ll.no_grad():
        y = a * 2.0
        assert not ll.is_grad_enabled()
        with ll.enable_grad():
            z = a * 2.0
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None
    d = a.detach()
    assert not d.requires_grad and d.storage is a.storage
    assert not (d * 2.0).requires_grad

    @ll.no_grad()
    def evaluate(t):
        return t * 3.0
    assert not evaluate(a).requires_grad and ll.is_grad_enabled()


def test_backward_twice_needs_retain_graph(device):
    a = ll.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = (a.exp() * a).sum()
    y.backward(retain_graph=True)
    y.backward()
    expect = 2 * (np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))
    np.testing.assert_allclose(a.grad.numpy(), expect, rtol=1e-5)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_inplace_after_save_is_detected(device):
    a = ll.tensor([1.0, 2.0], device=device, requires_grad=True)
    e = a.exp()
    y = (e * 2.0).sum()
    e.add_(1.0)                         # exp saved its output; mul saved e too
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        y.backward()
    b = a * 1.0
    z = (b * b).sum()
    with ll.no_grad():
        b[0] = 5.0                      # item assignment into a view bumps the shared version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_inplace_on_a_leaf_that_requires_grad_is_refused(device):
    w = ll.ones(3, device=device, requires_grad=True)
    for write in (lambda: w.add_(1.0), lambda: w.mul_(2.0), lambda: w.zero_(), lambda: w.copy_(ll.zeros(3, device=device))):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place "
                                               "operation."):
            write()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w += 1.0
    with ll.no_grad():                  # an optimizer step: allowed
        w -= 0.5
    assert w.numpy().tolist() == [0.5, 0.5, 0.5] and w.is_leaf and w.requires_grad


def test_inplace_ops_inside_a_graph(device, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    v = rng.standard_normal(3).astype(np.float32)
    a = ll.tensor(x, device=device, requires_grad=True)
    w = ll.tensor(v, device=device, requires_grad=True)
    h = a * 2.0
    h.mul_(w)                           # h = 2a * w, history rebased onto the mul
    h += a
    assert h.grad_fn is not None and not h.is_leaf
    h.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(2 * v + 1, x.shape), rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), (2 * x).sum(0), rtol=1e-5)
    c = ll.zeros(2, 3, device=device)
    c.copy_(w)                          # c now depends on w, broadcast over the rows
    assert c.requires_grad
    (c * c).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), (2 * x).sum(0) + 2 * 2 * v, rtol=1e-5)


def test_gradient_reaches_the_leaf_through_views_and_devices(device):
    a = ll.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = a.to(device).T[1]                 # CPU -> device copy, a transposed view, a row
    (b * b).sum().backward()
    assert a.grad.numpy().tolist() == [[0.0, 4.0], [0.0, 8.0]]


def test_nothing_records_while_the_autograd_key_is_excluded(device):
    from lowlevel.dispatch import exclude
    a = ll.ones(2, device=device, requires_grad=True)
    with exclude(Autograd):             # as inside the Autograd kernel's redispatch
        assert route("mul", a, a) == ["CPU" if device == "cpu" else "CUDA"]
        assert not (a * 2.0).requires_grad and not a[0].requires_grad

"""In-place ops on views while gradients are recorded (views.py: the base takes a CopySlices
node, stale views are made again from the base's history), checked against central finite
differences of the same computation in float64 numpy, on the CPU backend and CUDA; and the
errors: a view of a leaf, a saved tensor modified through a view."""
import numpy as np
import pytest

import lowlevel as ll


def _numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g



def _numpy_program(a, b, w):
    h = a * 1.5
    h[0] *= b[0]
    h[:, 1] += a[:, 0] ** 2
    h.T[2] = b[1:] * 3
    return float(np.sum(h * h * w))


def _ll_program(a, b, w):
    h = a * 1.5
    h[0].mul_(b[0])                        # a row view, in place, by a broadcast tensor
    col = h[:, 1]
    col += a[:, 0] * a[:, 0]               # a strided column view (+= is in place)
    h.T[2] = b[1:] * 3.0                   # item assignment into a view of a transposed view
    return (h * h * w).sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_inplace_on_views_gives_the_gradients_of_the_computation(device, rng, dtype):
    if device == "cpu" and dtype == "float32":
        pytest.skip("float64 is the finite-difference check on the CPU; float32 is CUDA's")
    if device == "cuda" and dtype == "float64":
        pytest.skip("CUDA is checked in float32")
    a0, b0, w0 = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((3, 4))
    a = ll.tensor(a0, dtype=dtype, device=device, requires_grad=True)
    b = ll.tensor(b0, dtype=dtype, device=device, requires_grad=True)
    _ll_program(a, b, ll.tensor(w0, dtype=dtype, device=device)).backward()
    tol = dict(rtol=1e-6, atol=1e-8) if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a.grad.numpy(), _numeric_grad(lambda x: _numpy_program(x, b0, w0), a0), **tol)
    np.testing.assert_allclose(b.grad.numpy(), _numeric_grad(lambda x: _numpy_program(a0, x, w0), b0), **tol)


def test_a_view_made_before_its_base_changed_in_place_follows_the_base(device):
    a = ll.tensor([[1.0, 2.0], [3.0, 4.0]], device=device, requires_grad=True)
    h = a * 1.0
    row = h[1]                  # made before the in-place op on h
    h.mul_(3.0)
    (row * row).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [[0.0, 0.0], [54.0, 72.0]])    # d (3a)^2 = 18a


def test_writing_a_tensor_that_requires_grad_into_a_view_of_a_plain_tensor(device):
    x = ll.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    z = ll.zeros(2, 3, device=device)
    z[1] = x * 2.0
    assert z.requires_grad and z.grad_fn is not None
    (z * z).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0, 24.0])


def test_inplace_on_a_view_of_a_leaf_is_refused(device):
    a = ll.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation"):
        a[0].mul_(2.0)
    with ll.no_grad():
        a[0].mul_(2.0)              # not recorded: allowed, as in PyTorch
    np.testing.assert_array_equal(a.numpy()[0], [2.0, 2.0, 2.0])


def test_a_saved_tensor_modified_through_a_view_is_detected(device):
    a = ll.ones(2, 3, device=device, requires_grad=True)
    h = a * 2.0
    y = h.exp()                     # exp saves its output y
    y[0].add_(1.0)                  # the view shares y's version counter
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
        y.sum().backward()


def test_an_expanded_view_of_a_base_changed_in_place_is_a_clear_error(device):
    a = ll.ones(1, 3, device=device, requires_grad=True)
    h = a * 1.0
    e = h.expand(4, 3)
    h.mul_(2.0)
    with pytest.raises(NotImplementedError, match="expanded view was modified in place"):
        e.sum()

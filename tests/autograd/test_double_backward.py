"""backward(create_graph=True): the backward's own ops are recorded, so a gradient can be
differentiated again. Checked against finite differences of the first gradient (computed by
lowlevel itself, float64, CPU), and CUDA against the CPU backend."""
import numpy as np
import pytest

import lowlevel as ll

CASES = {
    "cube": lambda x, w: (x * x * x * w.reshape(6)).sum(),
    "exp_matmul": lambda x, w: (x.reshape(2, 3) @ w).exp().sum(),
    "div_tanh_mean": lambda x, w: (x.tanh() / (x * x + 1.0)).mean() + (x.reshape(2, 3) @ w).sum(),
    "softmax_max": lambda x, w: (x.reshape(2, 3).softmax(1) * w.T).sum() + x.max(),
}


def _grad_norm(f, x0, w0, dtype="float64", device="cpu"):
    """(sum of the first gradient squared, its gradient by double backward)."""
    x = ll.tensor(x0, dtype=dtype, device=device, requires_grad=True)
    w = ll.tensor(w0, dtype=dtype, device=device)
    f(x, w).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    x.grad = None
    norm = (g * g).sum()
    norm.backward()
    return norm.item(), x.grad.numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_double_backward_matches_finite_differences(case, rng):
    x0, w0 = rng.standard_normal(6) * 0.7, rng.standard_normal((3, 2))
    _, got = _grad_norm(CASES[case], x0, w0)
    numeric = np.zeros(6)
    for i in range(6):
        up, down = x0.copy(), x0.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        numeric[i] = (_grad_norm(CASES[case], up, w0)[0] - _grad_norm(CASES[case], down, w0)[0]) / 2e-6
    np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", sorted(CASES))
def test_double_backward_on_cuda_matches_the_cpu(driver, case, rng):
    x0, w0 = rng.standard_normal(6) * 0.7, rng.standard_normal((3, 2))
    _, cpu = _grad_norm(CASES[case], x0, w0, "float32")
    _, cuda = _grad_norm(CASES[case], x0, w0, "float32", "cuda")
    np.testing.assert_allclose(cuda, cpu, rtol=1e-4, atol=1e-5)


def test_without_create_graph_the_gradient_has_no_history(device):
    x = ll.tensor([1.0, 2.0], device=device, requires_grad=True)
    (x * x).sum().backward()
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_double_backward_through_an_inplace_view_is_refused(device):
    x = ll.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    h = x * 1.0
    h[1:].mul_(x[:2])
    with pytest.raises(NotImplementedError, match="create_graph=True .* in-place operation on a view"):
        (h * h).sum().backward(create_graph=True)

"""What the property tests (test_properties_*.py) found, each kept as a plain regression
test: the smallest input that went wrong, on every device present."""
import warnings

import numpy as np
import pytest

import lowlevel as ll


def test_minus_zero_as_a_number_is_not_plus_zero(device):
    # Python numbers become cached 0-d tensors; 0.0 == -0.0 made them share one entry.
    a = ll.zeros(3, device=device)
    assert np.signbit((a + 0.0 - a).numpy()).tolist() == [False] * 3      # caches +0.0 first
    assert np.signbit(ll.sub(-0.0, a).numpy()).tolist() == [True] * 3      # -0.0 - 0.0 = -0.0
    assert np.signbit(ll.mul(a, -0.0).numpy()).tolist() == [True] * 3


def test_where_broadcasts_a_bool_condition(device, rng):
    x, y = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    cond = rng.random(3) > 0.5           # broadcast along the rows: a stride-0 bool view on CUDA
    got = ll.where(ll.tensor(cond, device=device), ll.tensor(x, device=device), ll.tensor(y, device=device))
    np.testing.assert_array_equal(got.numpy(), np.where(cond, x, y))


def test_bool_views_are_made_contiguous(device, rng):
    mask = rng.random((3, 4)) > 0.5
    t = ll.tensor(mask, device=device).T.contiguous()
    assert t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), mask.T)


def test_writes_into_empty_tensors_are_allowed(device):
    # A (2, 0) tensor's first stride is 0 but it has no element to overlap with another.
    t = ll.zeros(2, 0, device=device)
    t.fill_(1.0)
    t += 1.0
    t[:, :] = ll.zeros(0, device=device)
    assert t.shape == (2, 0)


def test_softmax_and_reductions_of_empty_tensors(device):
    t = ll.zeros(2, 0, device=device)
    assert t.softmax(-1).shape == (2, 0) and t.softmax(0).shape == (2, 0)
    assert ll.zeros(0, device=device).softmax(0).shape == (0,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no numpy RuntimeWarning reaches the user
        assert np.isnan(t.mean(1).numpy()).all() and t.sum(1).numpy().tolist() == [0.0, 0.0]
        inf = ll.tensor([np.inf, -np.inf], device=device)
        assert np.isnan(inf.sum().item()) and np.isnan(inf.mean().item())


def test_integer_division_is_promoted_not_truncated(device):
    # 3 / 2 was 1 on the CPU backend (numpy's 1.5 cast back to int64); PyTorch gives 1.5.
    a = ll.tensor([3, 4], device="cpu")
    for got, want in ((a / ll.tensor([2, 2]), [1.5, 2.0]), (a / 2, [1.5, 2.0]), (2 / a, [2 / 3, 0.5])):
        assert got.dtype is ll.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        a.div_(2)
    np.testing.assert_array_equal((a.to(ll.float32) / 2).numpy(), [1.5, 2.0])

"""bool tensors as PyTorch and numpy treat them, on both backends: + * maximum minimum are
or / and, relu and abs the identity, sum counts the true elements in int64, max and min are
any and all, and - (binary or unary) is refused with PyTorch's advice."""
import numpy as np
import pytest

import lowlevel as ll


def test_bool_arithmetic_and_reductions_match_numpy(device, rng):
    x = rng.random((3, 5)) < 0.5
    y = rng.random(5) < 0.5
    a, b = ll.tensor(x, device=device), ll.tensor(y, device=device)
    for got, want in [(a + b, x | y), (a * b, x & y), (ll.maximum(a, b), x | y), (ll.minimum(a, b), x & y),
                      (a.relu(), x), (ll.abs(a), x)]:
        assert got.dtype is ll.bool
        np.testing.assert_array_equal(got.numpy(), want)
    # clamp's bounds are Python ints: bool and int promote to int64, as in PyTorch
    clamped = a.clamp(0, 1)
    assert clamped.dtype is ll.int64
    np.testing.assert_array_equal(clamped.numpy(), x.astype(np.int64))
    total = a.sum()
    assert total.dtype is ll.int64 and total.item() == x.sum()
    np.testing.assert_array_equal(a.sum(1, keepdim=True).numpy(), x.sum(1, keepdims=True))
    np.testing.assert_array_equal(a.max(0).values.numpy(), x.max(0))
    np.testing.assert_array_equal(a.min(1).values.numpy(), x.min(1))
    assert a.max().dtype is ll.bool and a.min().item() == x.min()


def test_minus_on_bool_is_refused_by_name(device):
    m = ll.tensor([True, False], device=device)
    with pytest.raises(TypeError, match="sub: - with a bool operand is not supported"):
        m - m
    with pytest.raises(TypeError, match="neg: - on a bool tensor is not supported"):
        -m

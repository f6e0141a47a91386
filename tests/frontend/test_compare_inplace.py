"""Comparisons, truth values, in-place ops and item assignment, on every device present,
against numpy (which PyTorch agrees with here): the tensor layer as a PyTorch user uses it."""
import numpy as np
import pytest

import lowlevel as ll

COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}
OPERATOR = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__"}


def values_with_specials(rng, shape):
    """Random small integers as floats (so ties happen), with NaN, inf and -0.0 sprinkled in."""
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    flat = x.reshape(-1)
    for special in (np.nan, np.inf, -np.inf, -0.0):
        if flat.size:
            flat[rng.integers(0, flat.size)] = special
    return x


@pytest.mark.parametrize("op", list(COMPARE))
def test_comparisons_broadcast_like_numpy(device, rng, op):
    for _ in range(3):
        sa = tuple(int(s) for s in rng.integers(1, 5, size=int(rng.integers(1, 4))))
        sb = tuple(1 if rng.random() < 0.4 else s for s in sa)[int(rng.integers(0, len(sa))):] or (1,)
        x, y = values_with_specials(rng, sa), values_with_specials(rng, sb)
        a, b = ll.tensor(x, device=device), ll.tensor(y, device=device)
        out = getattr(a, OPERATOR[op])(b)
        assert out.dtype is ll.bool and out.device == a.device
        np.testing.assert_array_equal(out.numpy(), COMPARE[op](x, y))
        np.testing.assert_array_equal(getattr(ll, op)(a, 1.0).numpy(), COMPARE[op](x, np.float32(1.0)))
        # A number on the left: Python swaps to the reflected operator (5 > a is a < 5).
        np.testing.assert_array_equal((2.0 > a).numpy(), np.float32(2.0) > x)


def test_equal_tensors_compare_equal_not_by_identity(device):
    a, b = ll.tensor([1.0, 2.0], device=device), ll.tensor([1.0, 2.0], device=device)
    assert (a == b).numpy().tolist() == [True, True]
    assert (a != b).numpy().tolist() == [False, False]
    none = None
    assert (a == none) is False and (a != "x") is True       # as PyTorch answers
    assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2            # hashing stays by identity


def test_compare_on_cpu_int_and_fraction_promotes():
    a = ll.tensor([1, 2, 3])
    assert (a >= 2).numpy().tolist() == [False, True, True]
    # compared in float32, the result type of an int64 tensor and a Python float (as PyTorch)
    assert ll.gt(a, 1.5).numpy().tolist() == [False, True, True]
    assert (a == 2.0).numpy().tolist() == [False, True, False]


def test_bool_comparisons_order_false_below_true(device):
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    ta, tb = ll.tensor(a, device=device), ll.tensor(b, device=device)
    for op, fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                   ("gt", np.greater), ("ge", np.greater_equal)):
        got = getattr(ll, op)(ta, tb)
        assert got.dtype is ll.bool
        np.testing.assert_array_equal(got.numpy(), fn(a, b), err_msg=op)
    np.testing.assert_array_equal((ta[None, :] == tb[:, None]).numpy(), a[None, :] == b[:, None])


def test_where(device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((4,)).astype(np.float32)
    a, b = ll.tensor(x, device=device), ll.tensor(y, device=device)
    out = ll.where(a > b, a, b)
    np.testing.assert_array_equal(out.numpy(), np.where(x > y, x, y))
    np.testing.assert_array_equal(ll.where(a > 0, a, 0.0).numpy(), np.where(x > 0, x, 0))
    with pytest.raises(TypeError, match="cond must be a bool tensor"):
        ll.where(a, a, b)


def test_truth_value(device):
    assert bool(ll.tensor([3.0], device=device)) and not bool(ll.tensor(0.0, device=device))
    assert bool(ll.tensor([1.0], device=device) == ll.tensor([1.0], device=device))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(ll.zeros(2, 2, device=device) == 0)
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        bool(ll.zeros(0, device=device))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "+=", "-=", "*=", "/="])
def test_inplace_arithmetic_changes_the_tensor_and_its_aliases(device, rng, op):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((4,)).astype(np.float32) + 3.0
    np_op = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    name = {"+=": "add", "-=": "sub", "*=": "mul", "/=": "div"}.get(op, op.rstrip("_"))
    t = ll.tensor(x, device=device)
    alias, row = t, t[1]                          # another name, and a view
    other = ll.tensor(y, device=device)
    if op.endswith("_"):
        assert getattr(t, op)(other) is t
    else:
        before = id(t)
        t = {"+=": t.__iadd__, "-=": t.__isub__, "*=": t.__imul__, "/=": t.__itruediv__}[op](other)
        assert id(t) == before
    expect = np_op[name](x, y)
    np.testing.assert_allclose(alias.numpy(), expect, rtol=1e-6)
    np.testing.assert_allclose(row.numpy(), expect[1], rtol=1e-6)


def test_augmented_assignment_statement_keeps_aliases(device):
    y = ll.tensor([1.0, 2.0], device=device)
    alias = y
    y += 1
    y *= 3
    assert y is alias and alias.numpy().tolist() == [6.0, 9.0]


def test_inplace_into_views_with_steps(device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = ll.tensor(x, device=device)
    t[:, 1::2].mul_(10.0)
    t.T[0].add_(ll.tensor(np.arange(4, dtype=np.float32), device=device))
    x[:, 1::2] *= 10.0
    x.T[0] += np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(t.numpy(), x, rtol=1e-6)


def test_fill_zero_copy(device, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    t = ll.tensor(x, device=device)
    assert t[1].fill_(2.5) is not None and t[:, 0].zero_() is not None
    x[1] = 2.5
    x[:, 0] = 0
    np.testing.assert_array_equal(t.numpy(), x)
    src = rng.standard_normal((5,)).astype(np.float32)
    t.copy_(ll.tensor(src, device=device))                    # broadcast over the rows
    np.testing.assert_array_equal(t.numpy(), np.broadcast_to(src, (3, 5)))
    t.copy_(ll.tensor(x.T.copy(), device=device).T)           # from a transposed view
    np.testing.assert_array_equal(t.numpy(), x)
    t.copy_(t[0:])                                            # from itself (aliasing)
    np.testing.assert_array_equal(t.numpy(), x)
    t.copy_(ll.tensor(np.ones((3, 5)), dtype=ll.float64))     # another dtype and device
    assert (t.numpy() == 1).all()


def test_copy_from_an_overlapping_view_of_itself(device):
    t = ll.tensor(np.arange(6, dtype=np.float32), device=device)
    t[1:].copy_(t[:-1])                     # numpy semantics: as if the source were copied first
    assert t.numpy().tolist() == [0, 0, 1, 2, 3, 4]


INDEXES = [
    (1,), (slice(None), 2), (slice(1, None, 2),), (slice(None), slice(None, None, 3)), (Ellipsis, 0),
    (None, 1), (0, Ellipsis, slice(1, 3)), (-1, -2), (slice(None, None, 2), None, slice(1, 4, 2)),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_setitem_like_numpy(device, rng, index):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    t = ll.tensor(x, device=device)
    target_shape = x[index].shape
    value = rng.standard_normal(target_shape[1:] if len(target_shape) > 1 else target_shape).astype(np.float32)
    t[index] = ll.tensor(value, device=device)                # a tensor, broadcast over the view
    x[index] = value
    np.testing.assert_array_equal(t.numpy(), x)
    t[index] = -7.0                                           # a number
    x[index] = -7.0
    np.testing.assert_array_equal(t.numpy(), x)


def test_write_errors(device):
    t = ll.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"output with shape \[2, 3\] doesn't match the broadcast shape \[4, 2, 3\]"):
        t.add_(ll.zeros(4, 2, 3, device=device))
    with pytest.raises(ValueError, match="do not broadcast"):
        t[0] = ll.zeros(2, device=device)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        ll.zeros(1, 3, device=device).expand(2, 3).fill_(1.0)
    with pytest.raises(TypeError, match="cannot write str"):
        t[0] = "x"
    before = t.storage.version
    t[0, 0] = 1.0
    assert t.storage.version == before + 1 and t[0].storage.version == t.storage.version


def test_bool_item_assignment_copy_fill_and_cat(device):
    want = np.zeros((3, 4), bool)
    m = ll.zeros(3, 4, dtype=ll.bool, device=device)
    m[1:, ::2] = True
    want[1:, ::2] = True
    m.T[0].copy_(ll.tensor([True, False, True], device=device))
    want.T[0] = [True, False, True]
    np.testing.assert_array_equal(m.numpy(), want)
    np.testing.assert_array_equal(ll.cat([m, m[:1]]).numpy(), np.concatenate([want, want[:1]]))
    m[0] = m[2]
    want[0] = want[2]
    np.testing.assert_array_equal(m.numpy(), want)
    assert m.fill_(True).numpy().all()

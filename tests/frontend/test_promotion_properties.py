"""Property tests (hypothesis) of type promotion against numpy, on the CPU backend and on
CUDA: every pair of the dtypes lowlevel has, with tensors, 0-d tensors and Python numbers
(bool, int, float) on either side, through + - * / // % and the comparisons, the in-place
forms (refused where the tensor cannot hold the result type), where and cat.

The expected dtype comes from PyTorch's rule written out here on its own (not by calling
lowlevel.frontend.promotion): the promote_types table below, and "a lower-priority operand
(0-d tensor under a tensor, number under both) decides only where its category is higher".
The expected values are numpy's, computed in float64 (or int64) from the operands as the
result type holds them, then rounded to it.
"""
import operator

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from helpers.tensor_strategies import PROPERTY

import lowlevel as ll

NAMES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"]
CATEGORY = {"bool": 0, "int32": 1, "int64": 1, "float16": 2, "bfloat16": 2, "float32": 2, "float64": 2}
# torch.promote_types, row by row (columns in the order of NAMES)
_ROWS = {
    "float16":  ["float16", "float32", "float32", "float64", "float16", "float16", "float16"],
    "bfloat16": ["float32", "bfloat16", "float32", "float64", "bfloat16", "bfloat16", "bfloat16"],
    "float32":  ["float32", "float32", "float32", "float64", "float32", "float32", "float32"],
    "float64":  ["float64", "float64", "float64", "float64", "float64", "float64", "float64"],
    "int32":    ["float16", "bfloat16", "float32", "float64", "int32", "int64", "int32"],
    "int64":    ["float16", "bfloat16", "float32", "float64", "int64", "int64", "int64"],
    "bool":     ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"],
}
PROMOTE = {(a, b): row[i] for a, row in _ROWS.items() for i, b in enumerate(NAMES)}
NUMBER_DTYPE = {bool: "bool", int: "int64", float: "float32"}      # what a Python number stands for
PRIORITY = {"tensor": 0, "0-d": 1, "number": 2}

ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "//": operator.floordiv, "%": operator.mod}
COMPARISONS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
               ">=": operator.ge}
NUMPY_OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "//": np.floor_divide,
             "%": np.remainder, "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
             ">": np.greater, ">=": np.greater_equal}


def expected_dtype(op: str, a: tuple, b: tuple) -> str:
    """The result type of (kind, dtype) a OP (kind, dtype) b by PyTorch's rule."""
    (ka, da), (kb, db) = a, b
    if PRIORITY[ka] == PRIORITY[kb]:
        found = PROMOTE[da, db]
    else:
        (_, high), (_, low) = sorted([a, b], key=lambda o: PRIORITY[o[0]])
        found = low if CATEGORY[low] > CATEGORY[high] else high
    if op == "/" and CATEGORY[found] < 2:
        found = "float32"               # true division of integers: the default float dtype
    return found


def _bfloat16(x: np.ndarray) -> np.ndarray:
    """float64 values rounded to bfloat16 (through float32, nearest even), as float64."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isnan(x), np.nan, out)


def held_as(x, name: str) -> np.ndarray:
    """The values x as a `name` tensor holds them, in float64 (floats) or int64 (integers, bool)."""
    x = np.asarray(x)
    if name == "bool":
        return (x != 0).astype(np.int64)
    if name in ("int32", "int64"):
        return x.astype(np.int64).astype(name).astype(np.int64)        # int32 wraps as a cast does
    if name == "bfloat16":
        return _bfloat16(x.astype(np.float64))
    return x.astype(name).astype(np.float64)


def _value(data, name: str):
    if name == "bool":
        return data.draw(st.booleans())
    if CATEGORY[name] == 1:
        return data.draw(st.integers(-100, 100))
    # quarters up to 64: exact in every float dtype (bfloat16 holds 8 significant bits)
    return data.draw(st.integers(-256, 256)) / 4


def _operand(data, device, kind: str):
    """(the operand, (kind, its dtype name), its values as a numpy array)."""
    if kind == "number":
        python_type = data.draw(st.sampled_from([bool, int, float]), label="number type")
        name = NUMBER_DTYPE[python_type]
        x = python_type(_value(data, name))
        return x, (kind, name), np.asarray(float(x) if python_type is float else int(x))
    name = data.draw(st.sampled_from(NAMES), label="dtype")
    values = np.array([_value(data, name) for _ in range(3 if kind == "tensor" else 1)])
    values = values.reshape(() if kind == "0-d" else (3,))
    t = ll.tensor(values, device=device).to(getattr(ll, "bool" if name == "bool" else name))
    return t, (kind, name), held_as(values, name)


def _draw_pair(data, device):
    kinds = data.draw(st.sampled_from([(p, q) for p in PRIORITY for q in PRIORITY if (p, q) != ("number", "number")]),
                      label="kinds")
    return [_operand(data, device, k) for k in kinds]


def _check(op: str, fn, a, b, got):
    (_, ta, xa), (_, tb, xb) = a, b
    name = expected_dtype(op, ta, tb)
    assert got.dtype is getattr(ll, name), (op, ta, tb, got.dtype, name)
    with np.errstate(all="ignore"):
        values = NUMPY_OPS[op](held_as(xa, name), held_as(xb, name))
    want = held_as(values, name) if op in ARITHMETIC else values
    np.testing.assert_array_equal(np.asarray(got.numpy(), np.float64), np.asarray(want, np.float64),
                                  err_msg=f"{ta} {op} {tb} -> {name}")


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(ARITHMETIC)))
def test_arithmetic_promotes_as_pytorch_and_computes_as_numpy(device, data, op):
    a, b = _draw_pair(data, device)
    name = expected_dtype(op, a[1], b[1])
    if (name == "bool" and op in ("//", "%")) or (op == "-" and "bool" in (a[1][1], b[1][1])):
        with pytest.raises(RuntimeError, match="bool"):          # refused, as in PyTorch
            ARITHMETIC[op](a[0], b[0])
        return
    if op in ("//", "%") and CATEGORY[name] < 2:
        assume(np.all(held_as(b[2], name) != 0))                   # integer division by zero: refused on the CPU
    _check(op, ARITHMETIC[op], a, b, ARITHMETIC[op](a[0], b[0]))


@PROPERTY
@given(data=st.data(), op=st.sampled_from(sorted(COMPARISONS)))
def test_comparisons_compare_in_the_result_type(device, data, op):
    a, b = _draw_pair(data, device)
    got = COMPARISONS[op](a[0], b[0])
    assert got.dtype is ll.bool
    name = expected_dtype(op, a[1], b[1])
    with np.errstate(all="ignore"):
        want = NUMPY_OPS[op](held_as(a[2], name), held_as(b[2], name))
    np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{a[1]} {op} {b[1]} compared as {name}")


@PROPERTY
@given(data=st.data(), op=st.sampled_from(["+=", "-=", "*=", "/="]))
def test_inplace_ops_refuse_a_result_their_tensor_cannot_hold(device, data, op):
    (t, (_, name), x), b = _operand(data, device, "tensor"), _operand(data, device, data.draw(
        st.sampled_from(list(PRIORITY))))
    result = expected_dtype(op[0], ("tensor", name), b[1])
    if CATEGORY[result] > CATEGORY[name] or (op == "-=" and "bool" in (name, b[1][1])):
        with pytest.raises(RuntimeError):
            _inplace(op, t, b[0])
        return
    _inplace(op, t, b[0])
    assert t.dtype is getattr(ll, name)
    with np.errstate(all="ignore"):
        values = NUMPY_OPS[op[0]](held_as(x, result), held_as(b[2], result))
    np.testing.assert_array_equal(np.asarray(t.numpy(), np.float64), held_as(held_as(values, result), name))


def _inplace(op, t, other):
    method = {"+=": "__iadd__", "-=": "__isub__", "*=": "__imul__", "/=": "__itruediv__"}[op]
    return getattr(t, method)(other)


@PROPERTY
@given(data=st.data())
def test_where_and_cat_join_in_the_result_type(device, data):
    a, b = _draw_pair(data, device)
    name = expected_dtype("where", a[1], b[1])
    cond = np.array(data.draw(st.lists(st.booleans(), min_size=3, max_size=3)))
    got = ll.where(ll.tensor(cond, device=device), a[0], b[0])
    assert got.dtype is getattr(ll, name), (a[1], b[1], got.dtype, name)
    want = np.where(cond, held_as(a[2], name), held_as(b[2], name))
    np.testing.assert_array_equal(np.asarray(got.numpy(), np.float64), np.asarray(want, np.float64))
    (x, (_, da), vx), (y, (_, db), vy) = (_operand(data, device, "tensor") for _ in range(2))
    joined = ll.cat([x, y])
    assert joined.dtype is getattr(ll, PROMOTE[da, db])
    want = np.concatenate([held_as(vx, PROMOTE[da, db]), held_as(vy, PROMOTE[da, db])])
    np.testing.assert_array_equal(np.asarray(joined.numpy(), np.float64), np.asarray(want, np.float64))

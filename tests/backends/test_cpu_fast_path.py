"""The CPU backend's direct ufunc path: results made as np.empty(shape, dtype) (an
ArrayStorage, whose bytes are a view made when asked for) and numpy run with its warnings
off in the thread's quiet context, nested calls included."""
import warnings

import numpy as np
import pytest

import lowlevel as ll
from lowlevel.backends.cpu import ufunc_into
from lowlevel.frontend.tensor import ArrayStorage


@pytest.mark.parametrize("shape", [(4, 6), (3,), (5,), ()], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int64"])
def test_results_are_numpys_in_any_size_and_dtype(rng, shape, dtype):
    """A whole number of 8-byte words is an ArrayStorage; other sizes (3 float32, 5 float16,
    a 0-d tensor) the padded bytes of Storage: both give numpy's values."""
    x, y = ((rng.standard_normal(shape) * 50).astype(dtype) for _ in range(2))
    a, b = ll.tensor(x), ll.tensor(y)
    out = a + b
    np.testing.assert_array_equal(out.numpy(), x + y)
    assert isinstance(out.storage, ArrayStorage) == (x.nbytes >= 8 and x.nbytes % 8 == 0)
    assert out.storage.host.nbytes >= x.nbytes and out.storage.host.nbytes % 8 == 0


def test_the_bytes_of_a_result_are_its_elements(rng):
    """Views of a result (which read the storage's bytes), a write into one of them, and a
    DLPack export all see the same memory as the result."""
    x, y = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    out = ll.tensor(x) * ll.tensor(y)
    assert isinstance(out.storage, ArrayStorage)
    np.testing.assert_array_equal(out.T.numpy(), (x * y).T)
    np.testing.assert_array_equal(out.reshape(24)[5:9].numpy(), (x * y).reshape(24)[5:9])
    out[1].copy_(ll.zeros(6))
    expected = x * y
    expected[1] = 0
    np.testing.assert_array_equal(out.numpy(), expected)
    shared = np.from_dlpack(out)
    assert shared.ctypes.data == out.storage.host.ctypes.data == out.host_view().ctypes.data
    np.testing.assert_array_equal(shared, expected)


def test_ufunc_into_gives_ieee_results_without_warnings():
    x = np.array([3e38, -3e38, 1.0, 0.0], np.float32)
    out = np.empty(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ufunc_into(np.multiply, out, x, np.full(4, 10, np.float32))
        np.testing.assert_array_equal(out, [np.inf, -np.inf, 10.0, 0.0])


def test_a_nested_ufunc_into_takes_the_decorators_way():
    """A call made while the thread's quiet context is entered (a function run inside it
    calls ufunc_into again): Context.run refuses to enter it twice, and the call is made
    with np.errstate instead, still without warnings."""
    inner_out = np.empty(2, np.float32)

    def outer(x, out):
        ufunc_into(np.divide, inner_out, np.ones(2, np.float32), np.zeros(2, np.float32))    # nested
        np.negative(x, out=out)
    out = np.empty(2, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ufunc_into(outer, out, np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(inner_out, [np.inf, np.inf])
    np.testing.assert_array_equal(out, [-1.0, 2.0])


def test_a_runtime_error_of_the_function_itself_is_raised():
    def failing(x, out):
        raise RuntimeError("the function's own error")
    with pytest.raises(RuntimeError, match="the function's own error"):
        ufunc_into(failing, np.empty(1), np.ones(1))


def test_an_in_place_write_into_a_result_is_seen_by_autograd():
    """A result's ArrayStorage counts the in-place writes as a Storage does: a saved result
    written in place refuses the backward, with autograd's message."""
    a = ll.tensor(np.ones(4, np.float32), requires_grad=True)
    y = a + a
    assert isinstance(y.storage, ArrayStorage) and y.storage.version == 0
    z = y * y
    y.add_(1.0)
    assert y.storage.version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
        z.sum().backward()


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int32", "int64", "bfloat16", "bool"])
def test_a_number_operand_on_either_side_gives_numpys_values(rng, dtype):
    """x OP number and number OP x: the number's 0-d constant broadcast by numpy straight
    into the result (an ArrayStorage where the dtype allows), numpy's values with the
    number in the tensor's dtype."""
    from lowlevel.frontend import dtypes
    dt = getattr(dtypes, "bool_" if dtype == "bool" else dtype)
    x = (rng.standard_normal(16) * 50).astype(np.float32)
    t = ll.tensor(x, dtype=dt)
    v = t.numpy()                                     # the values as the tensor holds them
    number = 3 if not dt.is_float else 2.5
    ops = {"mul": (lambda s, n: s * n, np.multiply), "add": (lambda s, n: s + n, np.add),
           "maximum": (ll.maximum, np.maximum), "minimum": (ll.minimum, np.minimum)}
    if dt.is_float:
        ops["div"] = (lambda s, n: s / n, np.divide)
    if dtype != "bool":
        ops["sub"] = (lambda s, n: s - n, np.subtract)
    kind = np.float32 if dtype == "bfloat16" else np.dtype(dt.storage)

    def stored(values):                               # rounded to the dtype as a tensor holds it
        return ll.tensor(values.astype(kind), dtype=dt).numpy()
    with np.errstate(all="ignore"):
        for name, (op, reference) in ops.items():
            n = True if dtype == "bool" else number
            got = op(t, n)
            assert got.dtype is dt, name
            np.testing.assert_array_equal(got.numpy(), stored(reference(v, np.asarray(n, kind))), err_msg=name)
            if name in ("mul", "add", "sub"):
                swapped = {"mul": lambda: n * t, "add": lambda: n + t, "sub": lambda: n - t}[name]()
                np.testing.assert_array_equal(swapped.numpy(), stored(reference(np.asarray(n, kind), v)))
    direct = t * (True if dtype == "bool" else number)        # bool * 3 is int64 (promotion)
    assert isinstance(direct.storage, ArrayStorage) == (dtype not in ("bfloat16", "bool"))

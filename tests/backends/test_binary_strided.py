"""ptx/binary_strided.ptx and the element-wise ops that use it: a broadcast operand (a bias
row, a number's 0-d tensor) or a strided view is read through its strides, so the op is one
kernel and one allocation (its output), and its result is numpy's, bit for bit."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.tensor_strategies import PROPERTY
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll
from lowlevel import cuda, kernels, trace
from lowlevel.backends.cuda import broadcast

OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
       "maximum": np.maximum, "minimum": np.minimum}
LL_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "maximum": ll.maximum, "minimum": ll.minimum}
DTYPES = {"float32": (ll.float32, np.float32), "float16": (ll.float16, np.float16)}


def _reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return OPS[op](a, b)


def _values(rng, shape, kind):
    x = (rng.standard_normal(shape) * 4).astype(kind)
    flat = x.reshape(-1)
    if flat.size >= 4:                    # the specials, where they fit
        flat[:4] = [0.0, -0.0, np.inf, np.nan][: flat.size]
    return x


def _operand(rng, shape, kind, layout, dtype):
    """(a CUDA tensor of `shape` laid out as `layout` says, the numpy values it holds)."""
    x = _values(rng, shape, kind)
    if layout == "transposed" and x.ndim >= 2:
        return ll.tensor(np.ascontiguousarray(x.T), dtype=dtype, device="cuda").T, x
    if layout == "strided" and x.ndim >= 1:
        return ll.tensor(np.repeat(x, 2, axis=-1), dtype=dtype, device="cuda")[..., ::2], x
    return ll.tensor(x, dtype=dtype, device="cuda"), x


@PROPERTY
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3),
       layouts=st.tuples(*[st.sampled_from(["contiguous", "transposed", "strided"])] * 2),
       op=st.sampled_from(sorted(OPS)), dtype=st.sampled_from(sorted(DTYPES)), seed=st.integers(0, 2**32 - 1))
def test_broadcast_and_strided_operands_match_numpy(shapes, layouts, op, dtype, seed):
    ll_dtype, kind = DTYPES[dtype]
    rng = np.random.default_rng(seed)
    (ta, a), (tb, b) = (_operand(rng, s, kind, lay, ll_dtype) for s, lay in zip(shapes.input_shapes, layouts))
    got = LL_OPS[op](ta, tb).numpy()
    expected = _reference(op, a, b)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    if op not in ("maximum", "minimum"):           # max(-0.0, 0.0) may be either zero
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def _allocations(monkeypatch):
    """A list that gets one entry per block the current device's caching allocator hands out."""
    made = []
    allocator = cuda.allocator.get_allocator()
    allocate_on = allocator.allocate_on

    def counting(nbytes, handle):
        made.append(nbytes)
        return allocate_on(nbytes, handle)
    monkeypatch.setattr(allocator, "allocate_on", counting)
    return made


@pytest.mark.parametrize(("what", "a_shape", "b_shape", "kernel"), [
    ("bias row + matrix", (6, 9), (9,), "binary_strided_f32"),
    ("column * matrix", (6, 1), (6, 9), "binary_strided_f32"),
    ("matrix - its transpose", (9, 9), "T", "binary_strided_f32"),
])
def test_a_broadcast_op_is_one_kernel_and_one_allocation(driver, rng, monkeypatch, what, a_shape, b_shape, kernel):
    """Before: a strided copy into a full-size temporary, then the contiguous kernel."""
    a = rng.standard_normal(a_shape).astype(np.float32)
    ta = ll.tensor(a, device="cuda")
    b, tb = (a.T, ta.T) if b_shape == "T" else (rng.standard_normal(b_shape).astype(np.float32), None)
    tb = tb if tb is not None else ll.tensor(b, device="cuda")
    fn = (lambda x, y: x - y) if b_shape == "T" else ((lambda x, y: x + y) if b_shape == (9,) else lambda x, y: x * y)
    fn(ta, tb)                                                      # warm: the kernel loaded, the plan made
    made = _allocations(monkeypatch)
    with trace.Recorder() as rec:
        out = fn(ta, tb)
    assert [k["kernel"] for k in rec.launches] == [kernel], what
    assert [c["symbol"] for c in rec.calls] == ["cuLaunchKernel"], what
    assert made == [out.numel() * 4], what                          # the output, nothing else
    np.testing.assert_array_equal(out.numpy(), fn(a, b))


def test_float16_times_a_number_reads_the_number_in_place(driver, rng, monkeypatch):
    """x * 2.0 in float16: the number's 0-d tensor is read with stride 0, not broadcast first."""
    x = rng.standard_normal((5, 7)).astype(np.float16)
    t = ll.tensor(x, device="cuda")
    t * 2.0
    made = _allocations(monkeypatch)
    with trace.Recorder() as rec:
        out = t * 2.0
    assert [k["kernel"] for k in rec.launches] == ["binary_strided_f16"]
    assert made == [x.nbytes]
    np.testing.assert_array_equal(out.numpy(), x * np.float16(2.0))


def test_a_layout_of_more_than_four_dimensions_is_materialised(driver, rng):
    """Five dimensions that do not merge: the operand is copied first (as before), still right."""
    a = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
    order = (4, 2, 0, 3, 1)
    ta = ll.tensor(np.ascontiguousarray(a.transpose(order)), device="cuda").permute(np.argsort(order).tolist())
    assert broadcast.strided_args("add", a.shape, ta, ll.tensor(b, device="cuda")) is None
    with trace.Recorder() as rec:
        got = (ta + ll.tensor(b, device="cuda")).numpy()
    assert "binary_strided_f32" not in [k["kernel"] for k in rec.launches]
    np.testing.assert_array_equal(got, a + b)


def test_merged_dims_drop_size_one_and_merge_contiguous_neighbours():
    # a (4, 5, 6) contiguous operand plus a (6,) row broadcast: the two outer dims merge
    assert broadcast.merged_dims((4, 5, 6), (30, 6, 1), (0, 0, 1)) == [(20, 6, 0), (6, 1, 1)]
    assert broadcast.merged_dims((1, 7, 1), (7, 1, 1), (0, 1, 0)) == [(7, 1, 1)]
    assert broadcast.merged_dims((3, 4), (1, 3), (4, 1)) == [(3, 1, 4), (4, 3, 1)]   # a transpose


# --- the kernel itself, launched by hand ---------------------------------------------------------

def _launch(a_host, a_offset, a_strides, b_host, b_offset, b_strides, shape, op, kind=np.float32):
    """binary_strided over a 4-d `shape`, the operands at element offsets of uploaded arrays."""
    n = int(np.prod(shape))
    out = device_poisoned(max(1, n * np.dtype(kind).itemsize))
    da, db = upload(a_host), upload(b_host)
    f = kernels.module("binary_strided").get_function(f"binary_strided_{'f32' if kind == np.float32 else 'f16'}")
    item = np.dtype(kind).itemsize
    f.launch(3, 64, (out, da.ptr + a_offset * item, db.ptr + b_offset * item, n, op, *shape[1:],
                     *a_strides, *b_strides))
    return download(out, shape, kind)


def test_kernel_negative_strides_read_a_reversed_view(driver, rng):
    """Signed strides: a[::-1, ::-1] OP b[:, ::-1] (numpy's views, passed as offsets and strides)."""
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    for op, name in enumerate(["add", "sub", "mul", "div", "maximum", "minimum"]):
        got = _launch(a, 14, (0, 0, -5, -1), b, 4, (0, 0, 5, -1), (1, 1, 3, 5), op)
        np.testing.assert_array_equal(got.reshape(3, 5), _reference(name, a[::-1, ::-1], b[:, ::-1]), err_msg=name)


def test_kernel_writes_nan_for_an_unknown_op(driver, rng):
    a = rng.standard_normal(8).astype(np.float32)
    got = _launch(a, 0, (0, 0, 0, 1), a, 0, (0, 0, 0, 1), (1, 1, 1, 8), 6)
    assert np.isnan(got).all()


def test_kernel_four_dimensions_and_float16_overflow(driver, rng):
    """All four dimensions in use, a broadcast along two of them; float16 rounds once, to inf past 65504."""
    a = (rng.standard_normal((2, 3, 4, 5)) * 300).astype(np.float16)
    b = (rng.standard_normal((3, 1, 5)) * 300).astype(np.float16)
    got = _launch(a, 0, (60, 20, 5, 1), b, 0, (0, 5, 0, 1), (2, 3, 4, 5), 2, np.float16)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, a * b)
    assert np.isinf(got).any()

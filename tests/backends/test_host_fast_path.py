"""The CUDA backend's host fast path: a number as a kernel argument (ptx/scalar_f32.ptx),
and the plans cached per (op, dtypes, shapes, strides), checked against numpy."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda, trace

SCALAR_OPS = {
    "x + s": (lambda x, s: x + s, "add_scalar_f32"),
    "s + x": (lambda x, s: s + x, "add_scalar_f32"),
    "x - s": (lambda x, s: x - s, "sub_scalar_f32"),
    "s - x": (lambda x, s: s - x, "rsub_scalar_f32"),
    "x * s": (lambda x, s: x * s, "mul_scalar_f32"),
    "s * x": (lambda x, s: s * x, "mul_scalar_f32"),
    "x / s": (lambda x, s: x / s, "div_scalar_f32"),
    "s / x": (lambda x, s: s / x, "rdiv_scalar_f32"),
}


def _float32_reference(fn, x: np.ndarray, s) -> np.ndarray:
    with np.errstate(all="ignore"):
        return fn(x, np.float32(s)).astype(np.float32)


@pytest.mark.parametrize("name", SCALAR_OPS)
def test_a_number_operand_gives_numpys_float32_result(driver, rng, name):
    fn, _ = SCALAR_OPS[name]
    x = rng.standard_normal((5, 7)).astype(np.float32)
    x[0, :3] = [0.0, np.inf, np.nan]
    s = float(rng.standard_normal())
    got = fn(ll.tensor(x, device="cuda"), s).numpy()
    np.testing.assert_array_equal(got, _float32_reference(fn, x, s))


@pytest.mark.parametrize("name", SCALAR_OPS)
def test_a_number_operand_is_a_kernel_argument_not_a_copy(driver, rng, name):
    """One launch of the scalar kernel, and no copy of the number to the device or
    broadcast of it (before: a host-to-device copy, a strided copy, then the tensor op)."""
    fn, kernel = SCALAR_OPS[name]
    x = ll.tensor(rng.standard_normal(300).astype(np.float32), device="cuda")
    fn(x, 2.5)                                        # warm: kernels loaded, the constant made
    with trace.Recorder() as rec:
        out = fn(x, 2.5)
    assert [k["kernel"] for k in rec.launches] == [kernel]
    assert [c["symbol"] for c in rec.calls] == ["cuLaunchKernel"]
    np.testing.assert_array_equal(out.numpy(), _float32_reference(fn, x.numpy(), 2.5))


def test_a_number_that_overflows_float32_is_inf_as_in_numpy(driver, rng):
    x = rng.standard_normal(64).astype(np.float32)
    got = (ll.tensor(x, device="cuda") * 1e39).numpy()
    np.testing.assert_array_equal(got, _float32_reference(lambda a, s: a * s, x, 1e39))


def test_a_strided_operand_of_a_scalar_op(driver, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = ll.tensor(x, device="cuda")
    np.testing.assert_array_equal((t * 3.0).numpy(), x * np.float32(3.0))
    np.testing.assert_array_equal((t.T * 3.0).numpy(), x.T * np.float32(3.0))   # same shape class, new strides


def test_float16_and_integer_numbers_still_broadcast(driver, rng):
    x = rng.standard_normal(50).astype(np.float16)
    np.testing.assert_array_equal((ll.tensor(x, device="cuda") * 2).numpy(), x * np.float16(2))


def test_a_number_on_two_streams(driver, rng):
    """The number's 0-d tensor is made on the stream that uses it, so its bytes are there in
    that stream's order on every stream."""
    x = rng.standard_normal(1000).astype(np.float32)
    t = ll.tensor(x, device="cuda")
    cuda.synchronize()
    for s in (cuda.Stream(), cuda.Stream(non_blocking=True), None):
        with cuda.stream(s):
            y = (t - 0.25) * 4.0
            got = y.numpy()
        np.testing.assert_array_equal(got, (x - np.float32(0.25)) * np.float32(4.0))


def test_the_plan_of_a_binary_op_follows_the_strides(driver, rng):
    """The same shapes with other strides (a transposed view, a broadcast row) are other
    plans: each result is numpy's."""
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    row = rng.standard_normal(8).astype(np.float32)
    ta, tb, trow = (ll.tensor(v, device="cuda") for v in (a, b, row))
    for _ in range(2):                                   # the second round reads cached plans
        np.testing.assert_array_equal((ta + tb).numpy(), a + b)
        np.testing.assert_array_equal((ta + tb.T).numpy(), a + b.T)
        np.testing.assert_array_equal((ta + trow).numpy(), a + row)
        np.testing.assert_array_equal((ta.T + tb).numpy(), a.T + b)
        np.testing.assert_array_equal(ta.T.relu().numpy(), np.maximum(a.T, 0))


def test_reductions_and_softmax_on_cached_plans(driver, rng):
    m = rng.standard_normal((6, 9)).astype(np.float32)
    t = ll.tensor(m, device="cuda")
    for _ in range(2):
        np.testing.assert_allclose(t.sum(1).numpy(), m.sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(t.T.sum(1).numpy(), m.T.sum(1), rtol=1e-5, atol=1e-5)
        e = np.exp(m - m.max(1, keepdims=True))
        np.testing.assert_allclose(t.softmax(1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_sum_over_an_empty_last_dimension_is_zeros(driver):
    for _ in range(2):
        got = ll.empty(3, 0, device="cuda").sum(1)
        np.testing.assert_array_equal(got.numpy(), np.zeros(3, np.float32))
        assert ll.empty(3, 0, device="cuda").softmax(1).shape == (3, 0)

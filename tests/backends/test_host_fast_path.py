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


@pytest.mark.parametrize("s", [1e39, -1e39, 3.4028235677973366e38, -3.4028235677973366e38, float("nan"),
                               float("inf")])
def test_a_number_that_overflows_float32_is_inf_as_in_numpy(driver, rng, s):
    """(2 - 2**-24) * 2**127 is the float64 midpoint between float32's largest value and 2**128:
    from it up a float64 rounds to inf."""
    x = rng.standard_normal(64).astype(np.float32)
    with np.errstate(over="ignore"):
        want = _float32_reference(lambda a, v: a * v, x, s)
    np.testing.assert_array_equal((ll.tensor(x, device="cuda") * s).numpy(), want)
    np.testing.assert_array_equal((ll.tensor(x, device="cuda") * np.nextafter(s, 0)).numpy(),
                                  _float32_reference(lambda a, v: a * v, x, np.nextafter(s, 0)))


NUMBER_OVERLOADS = {"x + s": lambda x, s: x + s, "s + x": lambda x, s: s + x, "x - s": lambda x, s: x - s,
                    "x * s": lambda x, s: x * s, "s * x": lambda x, s: s * x, "x / s": lambda x, s: x / s}


@pytest.mark.parametrize("name", NUMBER_OVERLOADS)
def test_a_new_float_makes_no_0d_tensor_even_the_first_time(driver, rng, name):
    """tensor OP float (and float + or * tensor) dispatches the op's `.Scalar` overload,
    whose float32 kernel takes the number as an argument: no 0-d tensor is made for a number
    never seen before (before: a host-to-device copy of it, at its first use)."""
    fn = NUMBER_OVERLOADS[name]
    x = ll.tensor(rng.standard_normal(100).astype(np.float32), device="cuda")
    fn(x, 2.5)                                        # warm: the kernel loaded
    s = float(rng.uniform(1, 2))
    with trace.Recorder() as rec:
        out = fn(x, s)
    assert [c["symbol"] for c in rec.calls] == ["cuLaunchKernel"]
    np.testing.assert_array_equal(out.numpy(), _float32_reference(fn, x.numpy(), s))


def test_the_number_overload_elsewhere_is_the_0d_tensor_op(driver, rng):
    """Where no kernel takes `mul.Scalar` (float16, the CPU) or a fallback acts first
    (Autograd, the Profiler), the decomposition runs the tensor op on the number's 0-d
    tensor: the values, the gradient and the recorded op are those of `mul`."""
    h = rng.standard_normal(40).astype(np.float16)
    np.testing.assert_array_equal((ll.tensor(h, device="cuda") * 2.5).numpy(), h * np.float16(2.5))
    c = rng.standard_normal(40).astype(np.float32)
    np.testing.assert_array_equal((ll.tensor(c) * 2.5).numpy(), c * np.float32(2.5))
    assert "decomposition" in ll.dispatch.explain("mul.Scalar", ll.tensor(h, device="cuda"), 2.5)
    g = ll.tensor(c, device="cuda", requires_grad=True)
    y = g * 3.0
    assert type(y.grad_fn).__name__ == "Node" and y.grad_fn.name == "MulBackward"
    y.sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.full(40, 3.0, np.float32))
    x = ll.tensor(c, device="cuda")
    with ll.profile() as prof:
        x * 2.0
        2.0 * x
    assert [r["op"] for r in prof.records] == ["mul", "mul"]


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


# ---- the plans never serve a stale answer ------------------------------------------------------
def _float32(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _softmax(m: np.ndarray) -> np.ndarray:
    e = np.exp(m - m.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _check_every_planned_op(rng, shape=(6, 10)):
    """a + b, relu, x * 2.0, sum(1), softmax(1) and matmul on new tensors: numpy's results."""
    a, b, m = _float32(rng, *shape), _float32(rng, *shape), _float32(rng, shape[1], shape[0])
    ta, tb, tm = (ll.tensor(v, device="cuda") for v in (a, b, m))
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal(ta.relu().numpy(), np.maximum(a, 0))
    np.testing.assert_array_equal((ta * 2.0).numpy(), a * np.float32(2.0))
    np.testing.assert_allclose(ta.sum(1).numpy(), a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ta.softmax(1).numpy(), _softmax(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((ta @ tm).numpy(), a @ m, rtol=1e-4, atol=1e-4)


def test_plans_after_a_context_reset(driver, rng):
    """The plans were bound in the old context (its allocator, its prepared kernels, cuBLAS
    handle): after a reset they bind again, and a tensor from before is refused as before."""
    _check_every_planned_op(rng)
    old = ll.tensor(_float32(rng, 6, 10), device="cuda")
    cuda.reset_device()
    _check_every_planned_op(rng)
    fresh = ll.tensor(_float32(rng, 6, 10), device="cuda")
    for op in (lambda: old + fresh, lambda: old.relu(), lambda: old * 2.0, lambda: old.sum(1),
               lambda: old.softmax(1), lambda: fresh @ old.T):
        with pytest.raises(cuda.ContextResetError, match="belongs to a context that was reset"):
            op()


def test_a_new_tensor_at_another_address_after_a_free(driver, rng):
    """Plans hold no addresses: a tensor freed and a new one of the same shape and strides
    elsewhere gives the new one's result."""
    a, b = _float32(rng, 4, 8), _float32(rng, 4, 8)
    ta, tb = ll.tensor(a, device="cuda"), ll.tensor(b, device="cuda")
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_allclose((ta @ tb.T).numpy(), a @ b.T, rtol=1e-4, atol=1e-4)
    address = ta.data_ptr
    del ta
    filler = ll.empty(4, 8, device="cuda")              # takes the freed block
    a2 = _float32(rng, 4, 8)
    ta2 = ll.tensor(a2, device="cuda")
    assert ta2.data_ptr != address and filler.data_ptr != ta2.data_ptr
    np.testing.assert_array_equal((ta2 + tb).numpy(), a2 + b)
    np.testing.assert_array_equal(ta2.relu().numpy(), np.maximum(a2, 0))
    np.testing.assert_allclose((ta2 @ tb.T).numpy(), a2 @ b.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ta2.sum(1).numpy(), a2.sum(1), rtol=1e-5, atol=1e-5)


def test_plans_follow_dtype_strides_and_layout(driver, rng):
    """Same shapes, other dtypes or strides (a transposed view, a strided slice, a broadcast
    row), one after the other: each is its own plan, or the general path."""
    a, b = _float32(rng, 8, 8), _float32(rng, 8, 8)
    ta, tb = ll.tensor(a, device="cuda"), ll.tensor(b, device="cuda")
    wide = _float32(rng, 8, 16)
    tw = ll.tensor(wide, device="cuda")
    half_a, half_b = a.astype(np.float16), b.astype(np.float16)
    for _ in range(2):
        np.testing.assert_array_equal((ta + tb).numpy(), a + b)
        np.testing.assert_array_equal((ll.tensor(half_a, device="cuda") + ll.tensor(half_b, device="cuda")).numpy(),
                                      half_a + half_b)
        np.testing.assert_array_equal((tw[:, ::2] + tb).numpy(), wide[:, ::2] + b)      # not contiguous
        np.testing.assert_array_equal((tw[:, ::2] * 2.0).numpy(), wide[:, ::2] * np.float32(2.0))
        np.testing.assert_array_equal(tw[:, ::2].relu().numpy(), np.maximum(wide[:, ::2], 0))
        np.testing.assert_allclose(tw[:, ::2].sum(1).numpy(), wide[:, ::2].sum(1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tw[:, ::2].softmax(1).numpy(), _softmax(wide[:, ::2]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose((ta @ tb).numpy(), a @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((ta.T @ tb).numpy(), a.T @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((tw[:, ::2] @ tb).numpy(), wide[:, ::2] @ b, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((ta.double() @ tb.double()).numpy(), a.astype(np.float64) @ b, rtol=1e-10)


def test_the_route_follows_requires_grad(driver, rng):
    """The dispatcher's remembered route is per key set: the same tensors with requires_grad
    set go through Autograd (a grad_fn), and back without it."""
    a = ll.tensor(_float32(rng, 5), device="cuda")
    b = ll.tensor(_float32(rng, 5), device="cuda")
    assert (a + b).grad_fn is None
    a.requires_grad_(True)
    assert (a + b).grad_fn is not None
    with ll.no_grad():
        assert (a + b).grad_fn is None


def _error(fn) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


BAD_SAME_SHAPE = {
    "dtypes differ": (lambda t, other: t @ other.half().T, TypeError, "matmul: operands have different dtypes"),
    "devices differ": (lambda t, other: t + other.cpu(), ValueError, "add: operands are on different devices"),
    "no kernel for the dtype": (lambda t, other: t.to(ll.int32) @ other.to(ll.int32).T, NotImplementedError,
                                "matmul has no CUDA kernel for dtype int32"),
    "not a number": (lambda t, other: t * "2", TypeError, "mul: cannot combine a tensor with str"),
    "reduction dim": (lambda t, other: t.sum(2), IndexError, "sum: dim 2 is out of range"),
    "softmax dim": (lambda t, other: t.softmax(-3), IndexError, "softmax: dim -3 is out of range"),
    "matmul sizes": (lambda t, other: t @ other, ValueError, "inner dimensions 11 and 7 differ"),
}


@pytest.mark.parametrize("case", BAD_SAME_SHAPE)
def test_an_error_on_a_warm_plan_is_the_cold_error(driver, rng, case):
    """A bad call of the same shape after good ones raises what it raises on a cold start."""
    from lowlevel.dispatch import table
    bad, kind, text = BAD_SAME_SHAPE[case]
    t, other = (ll.tensor(_float32(rng, 7, 11), device="cuda") for _ in range(2))
    table.resolved.clear()                               # nothing remembered by the dispatcher
    cold = _error(lambda: bad(t, other))
    for good in (lambda: t + other, lambda: t.relu(), lambda: t * 2.0, lambda: t.sum(1), lambda: t.softmax(1),
                 lambda: t @ other.T):
        good()
        good()
    warm = _error(lambda: bad(t, other))
    assert warm == cold and issubclass(cold[0], kind) and text in cold[1]


# ---- the CPU backend writes a ufunc's answer straight into the new tensor ------------------------
CPU_DTYPES = [ll.float16, ll.float32, ll.float64, ll.bfloat16, ll.int32, ll.int64]


@pytest.mark.parametrize("dtype", CPU_DTYPES, ids=lambda d: d.name)
def test_cpu_elementwise_ops_give_numpys_values_in_every_dtype(rng, dtype):
    import warnings
    x = rng.standard_normal((3, 5)) * 100
    y = rng.standard_normal((3, 5)) * 100
    if dtype.is_float:
        x[0, :3] = [np.inf, -np.inf, np.nan]
        y[0, :3] = [-np.inf, np.inf, 1.0]
    a, b = ll.tensor(x, dtype=dtype), ll.tensor(y, dtype=dtype)
    va, vb = a.numpy(), b.numpy()
    ops = {"add": (lambda s, t: s + t, np.add), "mul": (lambda s, t: s * t, np.multiply),
           "maximum": (ll.maximum, np.maximum), "neg": (lambda s, t: -s, lambda u, v: -u)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # inf - inf: NaN, without a RuntimeWarning
        for name, (op, reference) in ops.items():
            for _ in range(2):
                got = op(a, b)
                with np.errstate(all="ignore"):
                    expected = ll.tensor(reference(va, vb), dtype=dtype).numpy()
                assert got.dtype is dtype and got.shape == a.shape, name
                np.testing.assert_array_equal(got.numpy(), expected, err_msg=name)


def test_cpu_results_are_new_tensors_that_follow_in_place_writes(rng):
    x = rng.standard_normal(6).astype(np.float32)
    a = ll.tensor(x)
    first = a + a
    a.add_(1.0)                                          # through the view a's ops read
    np.testing.assert_array_equal((a + a).numpy(), (x + 1) + (x + 1))
    np.testing.assert_array_equal(first.numpy(), x + x)  # an earlier result is its own storage
    view = a[::2]
    np.testing.assert_array_equal((view + view).numpy(), (x[::2] + 1) * 2)


def test_threads_on_their_own_streams_share_the_plans(driver, rng):
    """Two threads running the same planned ops on streams of their own: each gets its own
    results (the prepared argument buffer and the allocator are shared by both)."""
    import threading
    inputs = [(_float32(rng, 33), _float32(rng, 33)) for _ in range(2)]
    results, errors = {}, []

    def work(i):
        try:
            # made on the thread's own stream: a non-blocking stream does not wait for the
            # legacy stream's copies (made before, the test raced them under load)
            with cuda.stream(cuda.Stream(non_blocking=True)):
                a, b = (ll.tensor(v, device="cuda") for v in inputs[i])
                outs = [((a + b) * 2.0).relu() for _ in range(10)]
                results[i] = [o.numpy() for o in outs]
        except Exception as e:          # reported below, in the test's thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, (a, b) in enumerate(inputs):
        expected = np.maximum((a + b) * np.float32(2.0), 0)
        for got in results[i]:
            np.testing.assert_array_equal(got, expected)


def test_cpu_ops_give_ieee_specials_without_warnings_on_every_thread(recwarn):
    """The CPU backend's direct ufunc path runs numpy with its warnings off (a context of
    the thread's made once under np.errstate), on each thread, and a warning set by the
    caller's own np.errstate is not changed by it."""
    import threading
    x = np.array([3e38, 1.0, np.inf, 0.0], np.float32)
    a, zero = ll.tensor(x), ll.tensor(np.zeros(4, np.float32))
    results = []

    def work():
        results.append(((a + a).numpy(), (a - a).numpy(), (a / zero).numpy()))
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work()
    with np.errstate(all="ignore"):
        expected = (x + x, x - x, x / np.zeros(4, np.float32))
    assert len(results) == 4
    for got in results:
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        np.float32(3e38) * np.float32(10)                     # the caller's state is its own


def test_a_float_in_a_captured_op_is_an_argument_of_the_captured_launch(driver, rng):
    """x * s inside a capture: one kernel node whose argument is s (no memset of a 0-d
    tensor); each replay computes with the number it was captured with."""
    x = ll.tensor(rng.standard_normal(64).astype(np.float32), device="cuda")
    x * 2.0                                             # warm: the kernel loaded
    s = float(rng.uniform(1, 2))                        # a number never used before
    with cuda.graph() as g:
        y = x * s
    assert g.nodes() == ["kernel"]
    for _ in range(2):
        values = rng.standard_normal(64).astype(np.float32)
        x.copy_(ll.tensor(values, device="cuda"))
        g.replay()
        np.testing.assert_array_equal(y.numpy(), values * np.float32(s))

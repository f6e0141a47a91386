"""zeros, ones, full, zeros_like and ones_like on CUDA write the value's bits on the device
(memsets, or fill_u16 / fill_u64 of ptx/fill.ptx) with no copy from host memory: the same
bytes as the CPU backend for every dtype, and allowed inside a CUDA graph capture, where a
captured sequence that makes a zeros tensor and accumulates into it replays correctly, and
so does autograd's backward (its seed gradient is ones_like)."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda, trace

DTYPES = [ll.float32, ll.float64, ll.float16, ll.bfloat16, ll.int32, ll.int64, ll.bool]
VALUES = [0, 1, -1, 2.5, -0.0, float("nan"), float("inf"), 7]


def _bytes(t):
    return np.ascontiguousarray(t.numpy()).view(np.uint8)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_full_on_cuda_has_the_cpu_bytes_and_copies_nothing_from_the_host(driver, dtype):
    ll.full((2, 3), 1, dtype=dtype, device="cuda")          # modules load outside the trace
    for value in VALUES if dtype.is_float else [0, 1, -1, 7]:
        if dtype is ll.bool and value not in (0, 1):
            continue
        with trace.Recorder() as r:
            got = ll.full((5, 7), value, dtype=dtype, device="cuda")
        assert not [c["symbol"] for c in r.calls if c["symbol"].startswith("cuMemcpy")], (dtype, value)
        np.testing.assert_array_equal(_bytes(got), _bytes(ll.full((5, 7), value, dtype=dtype)), err_msg=str(value))


def test_which_patterns_take_a_memset_and_which_a_kernel(driver):
    cases = [(ll.float32, 1.0, []), (ll.float64, 0.0, []), (ll.int64, -1, []), (ll.float16, 0.0, []),
             (ll.float64, 1.0, ["fill_u64"]), (ll.float16, 1.0, ["fill_u16"]), (ll.bfloat16, 1.0, ["fill_u16"])]
    for dtype, value, kernels in cases:
        ll.full(3, value, dtype=dtype, device="cuda")
        with trace.Recorder() as r:
            ll.full(1000, value, dtype=dtype, device="cuda")
        assert [launch["kernel"] for launch in r.launches] == kernels, (dtype, value)
        assert bool(kernels) != any(c["symbol"].startswith("cuMemset") for c in r.calls), (dtype, value)
    assert ll.zeros(0, 4, device="cuda").shape == (0, 4)


def test_a_captured_zeros_and_accumulate_replays_like_numpy(driver, rng):
    xs = [ll.tensor(rng.standard_normal((4, 3)), dtype=ll.float64, device="cuda") for _ in range(3)]

    def sequence():
        acc = ll.zeros(4, 3, dtype=ll.float64, device="cuda")
        for x in xs:
            acc += x * x
        return acc, ll.ones_like(acc), ll.full((2,), -3, dtype=ll.int32, device="cuda")

    sequence()
    with cuda.graph() as g:
        acc, ones, threes = sequence()
    assert "memset" in g.nodes()
    for _ in range(2):
        for x in xs:
            x.copy_(ll.tensor(rng.standard_normal((4, 3)), dtype=ll.float64, device="cuda"))
        acc.fill_(float("nan"))
        ones.fill_(float("nan"))
        threes.fill_(0)
        g.replay()
        np.testing.assert_allclose(acc.numpy(), sum(x.numpy() ** 2 for x in xs), rtol=1e-15)
        np.testing.assert_array_equal(ones.numpy(), np.ones((4, 3)))
        np.testing.assert_array_equal(threes.numpy(), [-3, -3])


def test_backward_runs_inside_a_capture(driver, rng):
    w = ll.tensor(rng.standard_normal(3).astype(np.float32), device="cuda", requires_grad=True)
    x = ll.tensor(rng.standard_normal((4, 3)).astype(np.float32), device="cuda")
    (x * w).sum().backward()                                # warm-up
    w.grad = None
    with cuda.graph() as g:
        (x * w).sum().backward()                            # the seed gradient: ones_like
    grad = w.grad
    new = rng.standard_normal((4, 3)).astype(np.float32)
    x.copy_(ll.tensor(new, device="cuda"))
    grad.fill_(float("nan"))
    g.replay()
    np.testing.assert_allclose(grad.numpy(), new.sum(0), rtol=1e-5)


def test_a_two_layer_backward_with_where_of_a_number_captures(driver, rng):
    """matmul, relu, softmax, mean, where(cond, x, 0.0) (its number is a captured constant,
    not a host copy) and their gradients, captured and replayed: the eager gradients."""
    w1 = ll.tensor(rng.standard_normal((5, 8)).astype(np.float32), device="cuda", requires_grad=True)
    w2 = ll.tensor(rng.standard_normal((8, 3)).astype(np.float32), device="cuda", requires_grad=True)
    x = ll.tensor(rng.standard_normal((4, 5)).astype(np.float32), device="cuda")

    def step():
        h = (x @ w1).relu()
        p = (h @ w2).softmax(1)
        ((p * p).mean() + ll.where(h > 0.5, h, 0.0).sum() * 0.1).backward()

    step()
    want = [w1.grad.numpy().copy(), w2.grad.numpy().copy()]
    w1.grad = w2.grad = None
    with cuda.graph() as g:
        step()
    grads = [w1.grad, w2.grad]
    for t in grads:
        t.fill_(float("nan"))
    g.replay()
    for t, w in zip(grads, want):
        np.testing.assert_allclose(t.numpy(), w, rtol=1e-5, atol=1e-7)

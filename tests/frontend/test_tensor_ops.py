"""Tensors and ops on every device present (cpu, and cuda on each driver) against numpy,
on fresh random shapes and values: broadcasting, reductions, softmax, matmul with
transposed views and batches."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda


def rand_shape(rng, ndim):
    return tuple(int(s) for s in rng.integers(1, 7, size=ndim))


def close(t: ll.Tensor, expect: np.ndarray, rtol=1e-5, atol=1e-6):
    got = t.numpy()
    assert got.shape == np.shape(expect), (got.shape, np.shape(expect))
    np.testing.assert_allclose(got, expect, rtol=rtol, atol=atol)


def broadcast_pair(rng):
    """Two shapes that broadcast: random dims of the second set to 1 or dropped."""
    a = rand_shape(rng, int(rng.integers(1, 4)))
    b = [1 if rng.random() < 0.4 else s for s in a]
    b = tuple(b[int(rng.integers(0, len(b))):]) or (1,)
    return (a, b) if rng.random() < 0.5 else (b, a)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_broadcast_arithmetic(device, rng, op):
    fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    for _ in range(4):
        sa, sb = broadcast_pair(rng)
        x = rng.standard_normal(sa).astype(np.float32)
        y = rng.standard_normal(sb).astype(np.float32) + (3 if op == "div" else 0)
        out = getattr(ll, op)(ll.tensor(x, device=device), ll.tensor(y, device=device))
        close(out, fn(x.astype(np.float64), y).astype(np.float32))


def test_python_operators_and_scalars(device, rng):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    t = ll.tensor(x, device=device)
    close(2.0 * t + 1 - t / 4, (2.0 * x + 1 - x / 4).astype(np.float32))
    close(-t, -x)
    close(1.0 - t, 1.0 - x)
    close(t.relu(), np.maximum(x, 0))
    close(t.exp(), np.exp(x.astype(np.float64)), rtol=2e-6)


def test_views_feed_ops(device, rng):
    x = rng.standard_normal((6, 8)).astype(np.float32)
    t = ll.tensor(x, device=device)
    close(t[1:5:2, ::3] * 2, x[1:5:2, ::3] * 2)                    # strided slice
    close(t.T + t.T, 2 * x.T)                                     # transposed view
    close(t[:, None, :2].expand(6, 4, 2) + 0, np.broadcast_to(x[:, None, :2], (6, 4, 2)))
    close(t.reshape(4, 12).sum(1), x.reshape(4, 12).sum(1, dtype=np.float64))
    assert t.T.contiguous().is_contiguous() and not t.T.is_contiguous()


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reductions(device, rng, op):
    ref = {"sum": np.sum, "mean": np.mean, "max": np.max}[op]
    for ndim in (1, 2, 3):
        x = rng.standard_normal(rand_shape(rng, ndim)).astype(np.float32)
        t = ll.tensor(x, device=device)
        close(getattr(t, op)(), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
        for dim in range(-ndim, ndim):
            for keepdim in (False, True):
                got = getattr(ll, op)(t, dim, keepdim)
                close(got.values if op == "max" else got, ref(x.astype(np.float64), axis=dim, keepdims=keepdim),
                      rtol=1e-5, atol=1e-5)


def test_reduction_of_a_large_vector(device, rng):
    x = rng.standard_normal(70_001).astype(np.float32)
    t = ll.tensor(x, device=device)
    exact = np.sum(x.astype(np.float64))
    assert abs(t.sum().item() - exact) <= 1e-6 * len(x) * np.abs(x).max()
    assert t.max().item() == x.max()


def test_softmax(device, rng):
    for shape in [(7,), (3, 33), (2, 5, 40)]:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        t = ll.tensor(x, device=device)
        for dim in range(len(shape)):
            v = x.astype(np.float64)
            e = np.exp(v - v.max(axis=dim, keepdims=True))
            # ex2.approx in the kernel: a few float32 ulps relative
            close(t.softmax(dim), e / e.sum(axis=dim, keepdims=True), rtol=2e-5, atol=1e-7)


def matmul_cases(rng):
    m, k, n, b = (int(v) for v in rng.integers(1, 40, size=4))
    yield (k,), (k,)
    yield (m, k), (k,)
    yield (k,), (k, n)
    yield (m, k), (k, n)
    yield (b, m, k), (b, k, n)
    yield (b, m, k), (k, n)          # a 2-D operand broadcasts over the batch
    yield (m, k), (b, k, n)


def test_matmul_shapes(device, rng):
    for sa, sb in matmul_cases(rng):
        x = rng.standard_normal(sa).astype(np.float32)
        y = rng.standard_normal(sb).astype(np.float32)
        close(ll.tensor(x, device=device) @ ll.tensor(y, device=device), x.astype(np.float64) @ y,
              rtol=1e-4, atol=1e-4)


def test_matmul_transposed_views_without_copies(device, rng):
    m, k, n = 17, 29, 13
    x = rng.standard_normal((k, m)).astype(np.float32)
    y = rng.standard_normal((n, k)).astype(np.float32)
    a, b = ll.tensor(x, device=device), ll.tensor(y, device=device)
    close(a.T @ b.T, x.T.astype(np.float64) @ y.T, rtol=1e-4, atol=1e-4)
    close(a.T @ a, x.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)
    if device == "cuda":
        from lowlevel import trace
        with trace.Recorder() as r:
            a.T @ b.T
        assert not [l for l in r.launches if "copy" in l["kernel"]], "a transposed view was copied"
        gemm = [c for c in r.calls if c["symbol"] == "cublasSgemm_v2"]
        assert len(gemm) == 1 and gemm[0]["args"].split(", ")[1:3] == ["1", "1"]    # both transposed


def test_matmul_half_precision_on_cuda(driver, rng):
    x = rng.standard_normal((9, 20)).astype(np.float16)
    y = rng.standard_normal((20, 11)).astype(np.float16)
    out = ll.tensor(x, device="cuda") @ ll.tensor(y, device="cuda")
    assert out.dtype is ll.float16
    ref = x.astype(np.float64) @ y
    bound = np.finfo(np.float16).eps * np.abs(ref) + 22 * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(y)) + 1e-3
    assert (np.abs(out.numpy() - ref) <= bound).all()


def test_float16_elementwise_on_cuda(driver, rng):
    x = rng.standard_normal(300).astype(np.float16)
    y = rng.standard_normal(300).astype(np.float16)
    out = ll.tensor(x, device="cuda") * ll.tensor(y, device="cuda") + ll.tensor(x, device="cuda")
    np.testing.assert_array_equal(out.numpy(), (x * y) + x)


def test_validation_errors_name_both_operands_and_call_no_driver(driver):
    from lowlevel import trace
    a32 = ll.zeros(3, 4, device="cuda")
    a16 = ll.zeros(3, 4, dtype=ll.float16, device="cuda")
    cpu = ll.zeros(3, 4)
    five = ll.zeros(5, device="cuda")
    ints = ll.zeros(3, dtype=ll.int64)
    cuda.synchronize()
    cases = [
        (lambda: a32 + five, ValueError, r"add: shapes \(3, 4\) and \(5,\) do not broadcast"),
        (lambda: a32 - cpu, ValueError, r"sub: operands are on different devices: a is \(3, 4\) float32 on cuda:0, "
                                        r"b is \(3, 4\) float32 on cpu"),
        (lambda: a32 @ a16, TypeError, r"matmul: operands have different dtypes: a is .*float32.*, b is .*float16"),
        (lambda: a32 @ a32, ValueError, r"matmul: a is \(3, 4\) and b is \(3, 4\): inner dimensions 4 and 3 differ"),
        (lambda: a32.sum(2), IndexError, r"sum: dim 2 is out of range"),
        (lambda: ints.mean(), TypeError, r"mean\(\): could not infer output dtype. Input dtype must be either a floating"),
    ]
    for make, error, pattern in cases:
        with trace.Recorder() as r:
            with pytest.raises(error, match=pattern):
                make()
        assert r.calls == [], f"a driver call was made before the error: {r.calls}"


def test_creation_and_conversion(device, rng):
    assert ll.zeros(2, 3, device=device).numpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert ll.ones((2,), device=device).numpy().tolist() == [1, 1]
    assert ll.full((2, 2), 7.5, device=device).numpy().tolist() == [[7.5, 7.5], [7.5, 7.5]]
    assert ll.arange(5, device=device).numpy().tolist() == [0, 1, 2, 3, 4]
    assert ll.arange(5, device=device).dtype is ll.int64
    ll.manual_seed(3)
    first = ll.randn(4, device=device).numpy()
    ll.manual_seed(3)
    np.testing.assert_array_equal(ll.randn(4, device=device).numpy(), first)
    assert (0 <= ll.rand(100, device=device).numpy()).all()
    t = ll.tensor([[1.5, 2.5]], device=device)
    assert t.dtype is ll.float32 and t.shape == (1, 2) and t.item if True else None
    assert ll.tensor([[3.25]], device=device).item() == 3.25
    assert t.to("float64").dtype is ll.float64 if device == "cpu" else True
    with pytest.raises(ValueError, match="item"):
        t.item()
    back = t.to("cpu") if device == "cuda" else t.to("cuda") if cuda.device_count() else t
    assert back.numpy().tolist() == [[1.5, 2.5]]
    assert repr(t) == ("tensor([[1.5000, 2.5000]])" if device == "cpu" else
                       "tensor([[1.5000, 2.5000]], device='cuda:0')")         # as PyTorch prints it


def test_bfloat16_round_trip(device):
    t = ll.tensor([1.0, 3.140625, -2.5], dtype=ll.bfloat16, device=device)
    assert t.numpy().tolist() == [1.0, 3.140625, -2.5]
    assert ll.tensor([1.00390625], dtype=ll.bfloat16).numpy().tolist() == [1.0]     # ties to even


def test_ops_on_a_busy_stream_return_before_it_is_idle(driver, rng):
    import threading
    s = cuda.Stream(non_blocking=True)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    with cuda.stream(s):
        a = ll.tensor(x, device="cuda")
        (a @ a + a).softmax(1).sum(0).numpy()       # warm: kernels loaded, memory cached, handle made
        gate = threading.Event()
        s.add_callback(lambda: gate.wait(20))
        c = (a @ a + a).softmax(1).sum(0)           # all queued behind the gate
        assert s.query() is False                   # returned while the stream is busy
        gate.set()
        got = c.numpy()                             # the one place that waits
    v = x.astype(np.float64)
    p = v @ v + v
    e = np.exp(p - p.max(1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(1, keepdims=True)).sum(0), rtol=1e-4, atol=1e-5)


def test_memory_read_on_another_stream_is_not_reused_too_early(driver):
    """x is made on the legacy stream and read by an op queued on a held stream; dropping x
    must not let the legacy stream overwrite its memory before that op has run."""
    import threading
    s = cuda.Stream(non_blocking=True)
    n = 12_345                            # an odd size: no other free block of it in the pool
    x = ll.ones(n, device="cuda")
    with cuda.stream(s):
        two = ll.full((n,), 2.0, device="cuda")
        (x * two).numpy()                 # warm: the kernel loaded, memory cached on s
    cuda.synchronize()
    gate = threading.Event()
    s.add_callback(lambda: gate.wait(20))
    with cuda.stream(s):
        y = x * two                       # queued behind the gate: reads x later
    del x
    z = ll.full((n,), 5.0, device="cuda")         # the legacy stream allocates and writes now
    gate.set()
    s.synchronize()
    assert (y.numpy() == 2.0).all()
    assert (z.numpy() == 5.0).all()


def test_empty_inner_dimension_zeroes_every_output_element(device):
    for dtype in (ll.float32, ll.float16):
        if dtype is ll.float16 and device == "cpu":
            continue
        junk = ll.full((3,), 7.0, dtype=dtype, device=device)   # leaves 7s in freed memory
        del junk
        out = ll.zeros(1, 0, dtype=dtype, device=device) @ ll.zeros(0, 3, dtype=dtype, device=device)
        assert out.shape == (1, 3) and (out.numpy() == 0).all()


def test_truth_value_and_copies(device):
    from lowlevel import trace
    assert bool(ll.tensor([0.0], device=device)) is False
    assert bool(ll.tensor([[2.0]], device=device)) is True
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ll.zeros(2, device=device))
    t = ll.tensor([1.0, 2.0], device=device)
    with trace.Recorder() as r:
        u = ll.tensor(t, device=device)           # a copy on the same device, no round trip
    assert u.storage is not t.storage and u.numpy().tolist() == [1.0, 2.0]
    assert not [c for c in r.calls if "DtoH" in c["symbol"]]


def test_contiguous_is_a_view_when_it_can_be_and_clone_always_copies(device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = ll.tensor(x, device=device)
    assert t.contiguous() is t
    transposed = t.T.contiguous()
    assert transposed.storage is not t.storage and transposed.is_contiguous()
    np.testing.assert_array_equal(transposed.numpy(), x.T)
    copy = t.clone()
    assert copy.storage is not t.storage and copy.device == t.device
    np.testing.assert_array_equal(copy.numpy(), x)

"""`with lowlevel.cuda.graph() as g:` on tensors: capture, replay with new inputs, the
graph's private memory pool, and the ops that cannot be captured.

Every op is run once before its capture (a warm-up: kernels loaded, cuBLAS's handle made),
as with torch.cuda.graph. Outputs are poisoned (NaN) before each replay, so a replay that
did not write them fails.
"""
import ctypes
import gc
import pathlib
import re
import threading
import time

import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda
from lowlevel.capi.constants import STREAM_CAPTURE_MODE
from lowlevel.cuda import allocator

ROWS, COLS, OUT = 6, 16, 5
GATE_TIMEOUT = 20


def sequence(x, b, w):
    """Ten tensor ops: broadcasting element-wise ops, a scalar, reductions, cuBLAS, softmax."""
    h = (x + b) * 0.5                      # (ROWS, COLS) + (COLS,), then a Python number
    h = ll.maximum(h - x.mean(1, keepdim=True), x)
    h = h.relu().exp() / 4.0
    logits = h @ w                         # cuBLAS
    probs = logits.softmax(1)
    return probs, logits.sum(0)


def reference(x, b, w):
    x, b, w = (v.astype(np.float64) for v in (x, b, w))
    h = (x + b) * 0.5
    h = np.maximum(h - x.mean(1, keepdims=True), x)
    h = np.exp(np.maximum(h, 0)) / 4.0
    logits = h @ w
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True), logits.sum(0)


def inputs(rng):
    return (rng.standard_normal((ROWS, COLS)).astype(np.float32), rng.standard_normal(COLS).astype(np.float32),
            (rng.standard_normal((COLS, OUT)) / 4).astype(np.float32))


def poison(*tensors):
    for t in tensors:
        t.fill_(float("nan"))


def test_a_captured_sequence_replays_with_new_input_values(driver, rng):
    values = inputs(rng)
    x, b, w = (ll.tensor(v, device="cuda") for v in values)
    sequence(x, b, w)                                        # warm-up
    with cuda.graph() as g:
        probs, sums = sequence(x, b, w)
    assert "kernel" in g.nodes() and len(g.nodes()) >= 10
    for _ in range(3):
        values = inputs(rng)
        for t, v in zip((x, b, w), values):
            t.copy_(ll.tensor(v, device="cuda"))              # new contents, same addresses
        b.mul_(0.5)                                          # and an in-place op between replays
        values = (values[0], values[1] * np.float32(0.5), values[2])
        poison(probs, sums)
        g.replay()
        want_probs, want_sums = reference(*values)
        np.testing.assert_allclose(probs.numpy(), want_probs, rtol=1e-5, atol=1e-6)
        # a sum of terms of either sign: float32's error is relative to the terms, not the sum
        np.testing.assert_allclose(sums.numpy(), want_sums, rtol=1e-5, atol=1e-5 * ROWS * 10)


def test_replay_runs_on_the_current_stream_after_its_earlier_work(driver, rng):
    x = ll.tensor(rng.standard_normal(64).astype(np.float32), device="cuda")
    (x * 3.0).relu()
    with cuda.graph() as g:
        y = (x * 3.0).relu()
    poison(y)
    cuda.synchronize()
    s, gate = cuda.Stream(non_blocking=True), threading.Event()
    with cuda.stream(s):
        s.add_callback(lambda: gate.wait(GATE_TIMEOUT))      # s is held: nothing after it runs yet
        new = rng.standard_normal(64).astype(np.float32)
        x.copy_(ll.tensor(new, device="cuda"))               # queued on s, before the replay
        g.replay()
        time.sleep(0.05)
        gate.set()
        np.testing.assert_array_equal(y.numpy(), np.maximum(new * np.float32(3.0), 0))


def pool_blocks(tensors):
    return [(t.storage.block.ptr, t.storage.block.size) for t in tensors]


def overlaps(ptr, size, ranges):
    return any(ptr < start + length and start < ptr + size for start, length in ranges)


def test_the_private_pool_is_not_reused_by_eager_allocations(driver, rng):
    """The graph's outputs and its temporaries (dropped after the capture, still written by
    every replay) are never handed out to eager work while the graph lives."""
    n = 256
    x = ll.tensor(rng.standard_normal(n).astype(np.float32), device="cuda")
    ((x + 1.0) * x).relu()
    with cuda.graph() as g:
        temporary = x + 1.0
        y = (temporary * x).relu()
        kept = pool_blocks([temporary, y])
        del temporary
    gc.collect()
    eager = [ll.zeros(n, device="cuda") + 7.0 for _ in range(24)]     # same sizes as the graph's
    eager += [ll.zeros(s, device="cuda") for s in (1, 100, 5000)]
    assert not [t for t in eager if overlaps(t.storage.block.ptr, t.storage.block.size, kept)]
    g.replay()
    assert (eager[0].numpy() == 7.0).all()                  # the replay wrote none of them
    np.testing.assert_array_equal(y.numpy(), np.maximum((x.numpy() + np.float32(1.0)) * x.numpy(), 0))


def test_the_private_pool_goes_back_to_the_driver_with_the_graph(driver, rng):
    x = ll.tensor(rng.standard_normal(512).astype(np.float32), device="cuda")
    x.exp()
    alloc = allocator.get_allocator()
    before = alloc.stats()["graph_reserved"]
    with cuda.graph() as g:
        y = x.exp()
    g.replay()
    assert alloc.stats()["graph_reserved"] > before
    del g
    gc.collect()
    y.numpy()                                              # a safe point: the graph is released
    assert alloc.stats()["graph_reserved"] > before         # y still lives in the pool
    del y
    gc.collect()
    x.sum()                                                # a safe point: y's block frees the segment
    assert alloc.stats()["graph_reserved"] == before


def refusals(x, mask):
    return {
        "item()": lambda: x.sum().item(),
        "numpy()": lambda: x.numpy(),
        "tolist()": lambda: x.tolist(),
        "repr() (print)": lambda: print(x),
        "bool()": lambda: bool(x.sum() > 0),
        "float()": lambda: float(x.sum()),
        "t[mask]": lambda: x[mask],
        "to('cpu')": lambda: x.to("cpu"),
        "a copy of a numpy array": lambda: ll.tensor(np.ones(3, np.float32), device="cuda"),
    }


@pytest.mark.parametrize("op", list(refusals(None, None)))
def test_an_op_that_would_synchronise_is_refused_before_the_driver_sees_it(driver, rng, op):
    x = ll.tensor(rng.standard_normal(32).astype(np.float32), device="cuda")
    mask = x > 0
    (x * 2.0).relu().sum()
    with cuda.graph() as g:
        y = (x * 2.0).relu().sum()                    # a sum of positive terms: no cancellation
        with pytest.raises(RuntimeError, match="capturing a CUDA graph") as error:
            refusals(x, mask)[op]()
        assert str(error.value).startswith(op) or op in str(error.value)
    poison(y)
    g.replay()                          # the capture was not invalidated: it still replays
    assert y.numpy() == pytest.approx(float(np.maximum(x.numpy().astype(np.float64) * 2, 0).sum()), rel=1e-5)


def test_a_synchronisation_the_driver_refuses_names_the_capture_error(driver, rng):
    x = ll.tensor(rng.standard_normal(8).astype(np.float32), device="cuda")
    x + 1.0
    with pytest.raises(cuda.CudaError) as error:
        with cuda.graph():
            x + 1.0
            cuda.synchronize()
    assert error.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert error.value.function == "cuCtxSynchronize"
    x + 1.0                             # eager work goes on after the failed capture


def test_a_graph_replays_only_after_its_capture(driver):
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="nothing has been captured"):
        g.replay()
    with pytest.raises(TypeError, match="CUDAGraph"):
        cuda.graph(object())
    with pytest.raises(TypeError, match="legacy"):
        cuda.graph(stream=cuda.Stream.legacy())
    with pytest.raises(ValueError, match="mode"):
        with cuda.graph(mode="everything"):
            pass
    x = ll.ones(4, device="cuda")
    x + 1.0
    with cuda.graph(g):
        x + 1.0
    with pytest.raises(RuntimeError, match="captured already"):
        with cuda.graph(g):
            pass


def test_a_relaxed_thread_may_allocate_inside_a_global_capture(driver):
    """cuThreadExchangeStreamCaptureMode: cuMemAlloc, refused to a thread in the default
    (global) interaction mode during a global capture, is allowed in the relaxed mode, and
    the capture stays valid (what the allocator does for a graph's pool)."""
    stream = cuda.Stream(non_blocking=True)
    relaxed = STREAM_CAPTURE_MODE["CU_STREAM_CAPTURE_MODE_RELAXED"]
    ptr = ctypes.c_uint64()
    with pytest.raises(cuda.CudaError, match="INVALIDATED"):
        with cuda.capture(stream):
            code = driver.cuMemAlloc.unchecked(ctypes.byref(ptr), 512)   # refused: invalidates
    assert driver.error(code, "cuMemAlloc").name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    mode = ctypes.c_int(relaxed)
    with cuda.capture(stream) as graph:
        driver.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
        try:
            driver.cuMemAlloc(ctypes.byref(ptr), 512)
        finally:
            driver.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))
    assert mode.value == relaxed and graph.nodes() == []
    driver.cuMemFree(ptr.value)


def test_the_readme_graph_example_runs_verbatim(driver, capsys):
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "tensors.md").read_text()
    section = page[page.index("## CUDA graphs"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "docs/tensors.md (CUDA graphs)", "exec"), {})      # its asserts compare with numpy
    assert "kernel" in capsys.readouterr().out


def allocate_on_another_thread(driver, mode):
    """cuMemAlloc from a new thread whose interaction mode is `mode` (None: the default):
    the CUresult name it got."""
    result = []

    def body():
        if mode is not None:
            value = ctypes.c_int(STREAM_CAPTURE_MODE[f"CU_STREAM_CAPTURE_MODE_{mode}"])
            driver.cuThreadExchangeStreamCaptureMode(ctypes.byref(value))
        try:
            cuda.mem_alloc(512).free()
            result.append("CUDA_SUCCESS")
        except cuda.CudaError as e:
            result.append(e.name)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join(GATE_TIMEOUT)
    return result[0]


def test_another_thread_s_mode_decides_whether_a_global_capture_forbids_it_to_allocate(driver):
    stream = cuda.Stream(non_blocking=True)
    with cuda.capture(stream) as graph:                     # global: forbids every default-mode thread
        assert allocate_on_another_thread(driver, "THREAD_LOCAL") == "CUDA_SUCCESS"
    assert graph.nodes() == []                              # still valid: it ended
    with pytest.raises(cuda.CudaError, match="INVALIDATED"):
        with cuda.capture(stream):
            assert allocate_on_another_thread(driver, None) == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"

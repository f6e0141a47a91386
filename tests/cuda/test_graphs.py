"""CUDA graphs: stream capture, replay and update, and what the driver forbids in a capture.

Host buffers of captured copies are pinned (a captured copy reads them when the graph runs).
A host callback that waits on a gate holds a stream, so "has not run yet" is provable.
"""
import ctypes
import threading
import time
import weakref

import numpy as np
import pytest
from helpers.memory import device_poisoned

from lowlevel import cuda, kernels
from lowlevel.cuda import context
from lowlevel.capi.constants import CURESULT, STREAM_CAPTURE_MODE, STREAM_CAPTURE_STATUS

GATE_TIMEOUT = 20
GLOBAL, THREAD_LOCAL, RELAXED = (STREAM_CAPTURE_MODE[f"CU_STREAM_CAPTURE_MODE_{m}"]
                                 for m in ("GLOBAL", "THREAD_LOCAL", "RELAXED"))
INVALIDATED = CURESULT["CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"]
UNSUPPORTED = CURESULT["CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"]


def hold(stream):
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE_TIMEOUT))
    return gate


def pinned(values):
    out = cuda.pinned_empty(values.shape, values.dtype)
    out[...] = values
    return out


def saxpy():
    return kernels.module("saxpy").get_function("saxpy")        # y = alpha * x + y


def expected_saxpy(alpha, x, y):
    return (np.float64(alpha) * x + y).astype(np.float32)


def capture_saxpy_pipeline(stream, n, alpha, calls):
    """x in (copy), y = 2.0 (memset), y = alpha x + y (kernel), a host call, y out (copy)."""
    hx, hy = pinned(np.zeros(n, np.float32)), pinned(np.full(n, np.nan, np.float32))
    dx, dy = device_poisoned(4 * n), device_poisoned(4 * n)
    cuda.synchronize()             # the poison (legacy stream) before a non-blocking stream's work
    with cuda.capture(stream) as graph:
        cuda.memcpy_htod_async(dx, hx, stream)
        cuda.memset_d32(dy, int(np.float32(2.0).view(np.uint32)), n, stream)
        saxpy().launch((n + 127) // 128, 128, (alpha, dx, dy, n), stream=stream)
        stream.add_callback(lambda: calls.append("host"))
        cuda.memcpy_dtoh_async(hy, dy, stream)
    return graph, hx, hy, (dx, dy)


def test_capture_records_and_replay_runs_what_eager_would(driver, rng):
    stream, n, alpha = cuda.Stream(non_blocking=True), 1000, np.float32(rng.standard_normal())
    calls = []
    graph, hx, hy, _ = capture_saxpy_pipeline(stream, n, alpha, calls)
    stream.synchronize()
    assert calls == [] and np.isnan(hy).all()                   # captured, nothing ran
    assert graph.nodes() == ["memcpy", "memset", "kernel", "host", "memcpy"]
    assert "digraph" in graph.to_dot()
    replay = graph.instantiate()
    for _ in range(2):                                          # new inputs, same graph
        x = rng.standard_normal(n).astype(np.float32)
        hx[...] = x
        hy[...] = np.nan
        replay.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(hy, expected_saxpy(alpha, x, np.float32(2.0)))
    assert calls == ["host", "host"]


def test_replay_runs_after_earlier_work_on_its_stream(driver):
    stream, order = cuda.Stream(non_blocking=True), []
    with cuda.capture(stream) as graph:
        stream.add_callback(lambda: order.append("graph"))
    replay = graph.instantiate()
    gate = hold(stream)
    stream.add_callback(lambda: order.append("before"))
    replay.launch(stream)
    stream.add_callback(lambda: order.append("after"))
    time.sleep(0.05)
    assert order == []
    gate.set()
    stream.synchronize()
    assert order == ["before", "graph", "after"]


def test_two_launches_of_one_graph_run_in_launch_order(driver):
    first, second = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    order, count = [], iter(range(10))
    with cuda.capture(first) as graph:
        first.add_callback(lambda: order.append(next(count)))
    replay = graph.instantiate()
    gate = hold(first)
    replay.launch(first)
    replay.launch(second)              # a free stream: still after the launch on `first`
    time.sleep(0.05)
    assert order == []
    gate.set()
    second.synchronize()
    assert order == [0, 1]


def test_cross_stream_capture_forks_and_joins_by_events(driver, rng):
    main, side = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    n, alpha, beta = 512, np.float32(1.5), np.float32(-0.25)
    x = pinned(rng.standard_normal(n).astype(np.float32))
    ha, hb = pinned(np.full(n, np.nan, np.float32)), pinned(np.full(n, np.nan, np.float32))
    dx, da, db = device_poisoned(4 * n), device_poisoned(4 * n), device_poisoned(4 * n)
    fork, join = cuda.Event(timing=False), cuda.Event(timing=False)
    cuda.synchronize()             # the poison (legacy stream) before a non-blocking stream's work
    with cuda.capture(main) as graph:
        cuda.memcpy_htod_async(dx, x, main)
        cuda.memset_d32(da, 0, n, main)
        cuda.memset_d32(db, 0, n, main)
        fork.record(main)
        side.wait(fork)                                        # side joins the capture
        saxpy().launch(4, 128, (beta, dx, db, n), stream=side)
        cuda.memcpy_dtoh_async(hb, db, side)
        saxpy().launch(4, 128, (alpha, dx, da, n), stream=main)
        join.record(side)
        main.wait(join)                                        # and is joined back
        cuda.memcpy_dtoh_async(ha, da, main)
    assert sorted(graph.nodes()) == sorted(["memcpy", "memset", "memset", "kernel", "memcpy", "kernel", "memcpy"])
    replay = graph.instantiate()
    replay.launch(main)
    main.synchronize()
    np.testing.assert_array_equal(ha, expected_saxpy(alpha, x, np.float32(0)))
    np.testing.assert_array_equal(hb, expected_saxpy(beta, x, np.float32(0)))


def test_update_takes_the_pointers_of_a_recapture(driver, rng):
    stream, n = cuda.Stream(non_blocking=True), 256
    outs = [device_poisoned(4 * n), device_poisoned(4 * n)]
    cuda.synchronize()
    graphs = []
    for out in outs:
        with cuda.capture(stream) as g:
            cuda.memset_d32(out, 7, n, stream)
        graphs.append(g)
    replay = graphs[0].instantiate()
    replay.update(graphs[1])
    replay.launch(stream)
    back = [np.zeros(n, np.uint32), np.zeros(n, np.uint32)]
    stream.synchronize()
    for b, out in zip(back, outs):
        cuda.memcpy_dtoh(b, out)
    assert (back[1] == 7).all() and (back[0] == 0xFFFFFFFF).all()
    with cuda.capture(stream) as other:                        # another shape: two nodes
        cuda.memset_d32(outs[0], 1, n, stream)
        cuda.memset_d32(outs[1], 1, n, stream)
    with pytest.raises(cuda.CudaError, match="TOPOLOGY_CHANGED") as e:
        replay.update(other)
    assert e.value.name == "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"


# ---- what a capture forbids -----------------------------------------------------------------
def raw_capture(driver, stream, mode, call):
    """Begin a capture of `mode` on `stream`, make `call()` (a CUresult), end the capture:
    (that result, the capture status just after it, cuStreamEndCapture's result)."""
    cuda.synchronize()              # a safe point: garbage of earlier tests released before
    driver.cuStreamBeginCapture(stream.handle, mode)
    code = call()
    status = ctypes.c_int()
    driver.cuStreamIsCapturing(stream.handle, ctypes.byref(status))
    graph = ctypes.c_void_p()
    end = driver.cuStreamEndCapture.unchecked(stream.handle, ctypes.byref(graph))
    if end == 0:
        driver.cuGraphDestroy(graph)
    return code, status.value, end


def name(code):
    return next(k for k, v in CURESULT.items() if v == code)


def test_synchronising_or_querying_a_capturing_stream_invalidates_it(driver):
    stream = cuda.Stream(non_blocking=True)
    bad = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_INVALIDATED"]
    for call in (driver.cuStreamSynchronize, driver.cuStreamQuery):
        assert raw_capture(driver, stream, RELAXED, lambda: call.unchecked(stream.handle)) == \
            (UNSUPPORTED, bad, INVALIDATED), call.name
    with pytest.raises(cuda.CudaError) as e:                   # the error inside the block is raised
        with cuda.capture(stream):
            stream.synchronize()
    assert e.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert stream.capture_status()[0] == "none"                # the capture ended anyway


def _alloc(driver, out):
    ptr = ctypes.c_uint64()
    code = driver.cuMemAlloc.unchecked(ctypes.byref(ptr), 256)
    if code == 0:
        out.append(ptr.value)
    return code


def _in_thread(fn):
    result = []
    t = threading.Thread(target=lambda: result.append(fn()))
    t.start()
    t.join()
    return result[0]


def test_unsafe_calls_follow_the_capture_modes(driver):
    stream, got = cuda.Stream(non_blocking=True), []
    cuda.synchronize()                               # this thread's context is current
    ctx = ctypes.c_void_p()
    driver.cuCtxGetCurrent(ctypes.byref(ctx))

    def alloc_on_another_thread():
        driver.cuCtxSetCurrent(ctx)
        return _alloc(driver, got)
    active = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_ACTIVE"]
    bad = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_INVALIDATED"]
    assert raw_capture(driver, stream, GLOBAL, lambda: _alloc(driver, got)) == (UNSUPPORTED, bad, INVALIDATED)
    assert raw_capture(driver, stream, GLOBAL, lambda: driver.cuCtxSynchronize.unchecked()) == \
        (UNSUPPORTED, bad, INVALIDATED)
    assert raw_capture(driver, stream, GLOBAL, lambda: _in_thread(alloc_on_another_thread)) == \
        (UNSUPPORTED, bad, INVALIDATED)
    assert raw_capture(driver, stream, THREAD_LOCAL, lambda: _alloc(driver, got)) == (UNSUPPORTED, bad, INVALIDATED)
    assert raw_capture(driver, stream, THREAD_LOCAL, lambda: _in_thread(alloc_on_another_thread)) == (0, active, 0)
    assert raw_capture(driver, stream, RELAXED, lambda: _alloc(driver, got)) == (0, active, 0)
    assert len(got) == 2
    for ptr in got:
        driver.cuMemFree(ptr)


def test_the_legacy_stream_may_not_touch_a_capturing_blocking_stream(driver):
    blocking, free = cuda.Stream(), cuda.Stream(non_blocking=True)
    d = cuda.mem_alloc(64)
    legacy_memset = lambda: driver.cuMemsetD8.unchecked(int(d), 0, 64)       # noqa: E731
    bad = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_INVALIDATED"]
    assert raw_capture(driver, blocking, RELAXED, legacy_memset) == \
        (CURESULT["CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"], bad, INVALIDATED)
    active = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_ACTIVE"]
    assert raw_capture(driver, free, RELAXED, legacy_memset) == (0, active, 0)


def test_ending_a_capture_where_it_did_not_begin_or_unjoined(driver):
    main, side = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    fork = cuda.Event(timing=False)
    graph, d = ctypes.c_void_p(), device_poisoned(16)
    cuda.synchronize()
    # Relaxed: lowlevel's calls below may release earlier garbage (cuMemFree), which a
    # global capture that lowlevel does not know of would refuse.
    driver.cuStreamBeginCapture(main.handle, RELAXED)
    fork.record(main)
    side.wait(fork)
    cuda.memset_d8(d, 0, 16, side)                             # forked work, never joined
    assert name(driver.cuStreamEndCapture.unchecked(side.handle, ctypes.byref(graph))) == \
        "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"
    assert name(driver.cuStreamEndCapture.unchecked(main.handle, ctypes.byref(graph))) == \
        "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"
    assert main.capture_status()[0] == side.capture_status()[0] == "none"
    assert name(driver.cuStreamEndCapture.unchecked(main.handle, ctypes.byref(graph))) == \
        "CUDA_ERROR_ILLEGAL_STATE"


@pytest.mark.parametrize("mode, ok", [(GLOBAL, False), (THREAD_LOCAL, False), (RELAXED, True)])
def test_ending_a_capture_on_another_thread(driver, mode, ok):
    stream = cuda.Stream(non_blocking=True)
    cuda.synchronize()
    ctx = ctypes.c_void_p()
    driver.cuCtxGetCurrent(ctypes.byref(ctx))
    driver.cuStreamBeginCapture(stream.handle, mode)
    graph = ctypes.c_void_p()

    def end():
        driver.cuCtxSetCurrent(ctx)
        return driver.cuStreamEndCapture.unchecked(stream.handle, ctypes.byref(graph))
    code = _in_thread(end)
    if ok:
        assert code == 0 and graph.value
        driver.cuGraphDestroy(graph)
    else:
        assert name(code) == "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"
        driver.cuStreamEndCapture(stream.handle, ctypes.byref(graph))     # the right thread may
        driver.cuGraphDestroy(graph)


def test_events_and_captures_do_not_mix(driver):
    stream, other = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    captured, outside = cuda.Event(timing=False), cuda.Event(timing=False).record(other)
    other.synchronize()
    bad = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_INVALIDATED"]
    assert raw_capture(driver, stream, RELAXED,
                       lambda: driver.cuStreamWaitEvent.unchecked(stream.handle, outside.handle, 0)) == \
        (CURESULT["CUDA_ERROR_STREAM_CAPTURE_ISOLATION"], bad, INVALIDATED)
    query = lambda: driver.cuEventQuery.unchecked(outside.handle)      # noqa: E731
    assert raw_capture(driver, stream, GLOBAL, query) == (UNSUPPORTED, bad, INVALIDATED)
    active = STREAM_CAPTURE_STATUS["CU_STREAM_CAPTURE_STATUS_ACTIVE"]
    assert raw_capture(driver, stream, RELAXED, query) == (0, active, 0)
    code = raw_capture(driver, stream, RELAXED, lambda: (captured.record(stream),
                                                         driver.cuEventQuery.unchecked(captured.handle))[1])
    assert name(code[0]) == "CUDA_ERROR_CAPTURED_EVENT"


def test_capture_arguments_are_checked(driver):
    with pytest.raises(ValueError, match="mode"):
        cuda.capture(cuda.Stream(), mode="everything")
    with pytest.raises(TypeError, match="legacy"):
        cuda.capture(cuda.Stream.legacy())
    with cuda.capture(cuda.Stream(non_blocking=True)) as graph:
        with pytest.raises(RuntimeError, match="has not ended"):
            graph.nodes()


def test_a_kernel_node_of_an_instantiated_graph_takes_new_arguments(driver):
    stream, n = cuda.Stream(non_blocking=True), 300
    out = device_poisoned(4 * n)
    cuda.synchronize()
    fill = kernels.module("fill").get_function("fill_f32")
    with cuda.capture(stream) as graph:
        fill.launch(1, 128, (out, 1.5, n), stream=stream)
    replay = graph.instantiate()
    node, count = ctypes.c_void_p(), ctypes.c_size_t(1)
    driver.cuGraphGetNodes(graph.handle, ctypes.byref(node), ctypes.byref(count))
    packed = fill.pack((out, -4.0, n))
    # CUDA_KERNEL_NODE_PARAMS: func, grid x y z, block x y z, shared, (pad), kernelParams, extra, kern, ctx
    params = (ctypes.c_uint64 * 9)()
    params[0] = fill.handle
    dims = (ctypes.c_uint * 8).from_buffer(params, 8)
    dims[:7] = [(n + 127) // 128, 1, 1, 128, 1, 1, 0]          # enough blocks for all n this time
    params[5] = ctypes.cast(packed.kernel_params, ctypes.c_void_p).value
    driver.cuGraphExecKernelNodeSetParams(replay.handle, node, params)
    replay.launch(stream)
    stream.synchronize()
    back = np.zeros(n, np.float32)
    cuda.memcpy_dtoh(back, out)
    assert (back == -4.0).all()


def test_a_captured_launch_keeps_the_argument_values_it_was_given(driver):
    """cuLaunchKernel copies the parameter values at capture: changing the caller's memory
    afterwards changes no replay."""
    stream, n = cuda.Stream(non_blocking=True), 128
    out = device_poisoned(4 * n)
    cuda.synchronize()
    fill = kernels.module("fill").get_function("fill_f32")
    values = (ctypes.c_uint64(int(out)), ctypes.c_float(2.5), ctypes.c_uint64(n))
    pointers = (ctypes.c_void_p * 3)(*[ctypes.addressof(v) for v in values])
    with cuda.capture(stream) as graph:
        driver.cuLaunchKernel(fill.handle, 1, 1, 1, n, 1, 1, 0, stream.handle, pointers, None)
    values[1].value = -1.0                                     # after the capture: not seen
    graph.instantiate().launch(stream)
    stream.synchronize()
    back = np.zeros(n, np.float32)
    cuda.memcpy_dtoh(back, out)
    assert (back == 2.5).all()


def test_garbage_released_during_a_capture_waits_for_its_end(driver):
    """A finalizer's cuMemFree would be refused inside a global capture and invalidate it:
    lowlevel carries it out after the capture instead."""
    stream, n = cuda.Stream(non_blocking=True), 64
    out = device_poisoned(4 * n)
    cuda.synchronize()
    garbage = cuda.mem_alloc(256)
    pending = weakref.ref(garbage)          # alive while its release is queued, gone once done
    with cuda.capture(stream) as graph:
        del garbage                                            # queued for the next safe point
        assert context.pending_releases() >= 1
        cuda.memset_d32(out, 3, n, stream)                    # a safe point: the release waits
        assert pending() is not None
    graph.instantiate().launch(stream)
    stream.synchronize()
    back = np.zeros(n, np.uint32)
    cuda.memcpy_dtoh(back, out)                                # a safe point outside: released now
    assert (back == 3).all() and pending() is None

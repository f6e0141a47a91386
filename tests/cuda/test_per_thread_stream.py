"""The per-thread default stream, CU_STREAM_PER_THREAD (handle 0x2): each host thread has
its own; as the driver documents it is not a non-blocking stream: it synchronises with the
legacy default stream (both ways), and with no other stream."""
import threading

import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import cuda

GATE_TIMEOUT = 20       # a callback never blocks a stream forever, even if a test fails


def hold(stream):
    """Block `stream` behind a host callback until the returned gate is set."""
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE_TIMEOUT))
    return gate


def test_per_thread_stream_runs_work_in_order(driver, rng):
    stream = cuda.Stream.per_thread()
    assert stream.flags == 0                            # a blocking stream
    order = []
    gate = hold(stream)
    for i in range(4):
        stream.add_callback(lambda i=i: order.append(i))
    assert stream.query() is False
    gate.set()
    stream.synchronize()
    assert stream.query() is True and order == [0, 1, 2, 3]
    host = rng.random(512, dtype=np.float32)
    dev = cuda.mem_alloc(host.nbytes)
    cuda.memcpy_htod_async(dev, host, stream)
    back = poisoned(512)
    cuda.memcpy_dtoh_async(back, dev, stream)
    stream.synchronize()
    np.testing.assert_array_equal(back, host)


def test_per_thread_stream_waits_for_the_legacy_stream(driver):
    gate = hold(cuda.Stream.legacy())
    per_thread = cuda.Stream.per_thread()
    per_thread.add_callback(lambda: None)
    assert per_thread.query() is False                  # queued behind the legacy stream's work
    gate.set()
    per_thread.synchronize()
    assert per_thread.query() is True


def test_legacy_stream_waits_for_the_per_thread_stream(driver):
    per_thread, legacy = cuda.Stream.per_thread(), cuda.Stream.legacy()
    gate = hold(per_thread)
    legacy.add_callback(lambda: None)
    assert legacy.query() is False                      # queued behind the per-thread work
    gate.set()
    legacy.synchronize()
    assert legacy.query() is True and per_thread.query() is True


def test_per_thread_stream_does_not_wait_for_other_streams(driver):
    """Neither a blocking nor a non-blocking stream orders against the per-thread one."""
    per_thread = cuda.Stream.per_thread()
    blocking, non_blocking = cuda.Stream(), cuda.Stream(non_blocking=True)
    gates = [hold(blocking), hold(non_blocking)]
    try:
        per_thread.add_callback(lambda: None)
        per_thread.synchronize()                        # must not wait for either gate
        gate = hold(per_thread)
        blocking.add_callback(lambda: None)
        non_blocking.add_callback(lambda: None)
        for g in gates:
            g.set()
        blocking.synchronize()                          # must not wait for the per-thread gate
        non_blocking.synchronize()
        assert per_thread.query() is False
        gate.set()
        per_thread.synchronize()
    finally:
        for g in gates:
            g.set()


def test_each_host_thread_has_its_own_per_thread_stream(driver):
    """Another thread's per-thread stream does not wait for this thread's; synchronising
    the context waits for both."""
    gate = hold(cuda.Stream.per_thread())
    seen = {}

    def other():
        stream = cuda.Stream.per_thread()
        stream.add_callback(lambda: None)
        stream.synchronize()                            # must not wait for the gate
        seen["query"] = stream.query()

    worker = threading.Thread(target=other)
    worker.start()
    worker.join(GATE_TIMEOUT)
    assert not worker.is_alive() and seen == {"query": True}
    assert cuda.Stream.per_thread().query() is False
    gate.set()
    cuda.synchronize()
    assert cuda.Stream.per_thread().query() is True


def test_per_thread_stream_can_be_captured(driver):
    """A capture of the per-thread stream records its work (run at each launch of the
    graph, not at capture); the legacy stream, which would synchronise with it, is refused
    meanwhile (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), which invalidates the capture."""
    per_thread = cuda.Stream.per_thread()
    ran = []
    with cuda.capture(per_thread, mode="relaxed") as graph:
        per_thread.add_callback(lambda: ran.append(1))
    assert ran == []
    runnable = graph.instantiate()
    runnable.launch(per_thread)
    runnable.launch(per_thread)
    per_thread.synchronize()
    assert ran == [1, 1]
    with pytest.raises(cuda.CudaError) as info:
        with cuda.capture(per_thread, mode="relaxed"):
            cuda.Stream.legacy().add_callback(lambda: None)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    with cuda.capture(per_thread, mode="relaxed"):       # asking the legacy stream, too
        with pytest.raises(cuda.CudaError) as info:
            cuda.Stream.legacy().capture_status()
        assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"

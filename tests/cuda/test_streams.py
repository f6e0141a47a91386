"""Streams, events and host callbacks behave as the driver documents.

A host callback that waits on a gate holds a stream: everything queued behind it is
provably pending until the gate opens, with no timing guesswork.
"""
import threading
import time

import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import cuda, trace
from lowlevel.cuda import context

GATE_TIMEOUT = 20       # a callback never blocks a stream forever, even if a test fails


def hold(stream):
    """Block `stream` behind a host callback until the returned gate is set."""
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE_TIMEOUT))
    return gate


def test_query_is_false_while_work_is_pending(driver):
    stream = cuda.Stream(non_blocking=True)
    assert stream.query() is True                       # nothing queued yet
    gate = hold(stream)
    done = []
    stream.add_callback(lambda: done.append(time.perf_counter()))
    assert stream.query() is False and done == []       # returned before the work ran
    gate.set()
    stream.synchronize()
    assert stream.query() is True and len(done) == 1


def test_work_on_one_stream_runs_in_order(driver):
    stream = cuda.Stream(non_blocking=True)
    order = []
    gate = hold(stream)
    for i in range(5):
        stream.add_callback(lambda i=i: order.append(i))
    gate.set()
    stream.synchronize()
    assert order == [0, 1, 2, 3, 4]


def test_events_query_synchronize_and_time(driver):
    stream = cuda.Stream(non_blocking=True)
    start, end = cuda.Event(), cuda.Event()
    assert end.query() is True                          # never recorded: complete, per the docs
    start.record(stream)
    gate = hold(stream)
    end.record(stream)
    assert end.query() is False
    time.sleep(0.02)
    gate.set()
    end.synchronize()
    assert end.query() is True
    ms = start.elapsed_ms(end)
    assert ms >= 15.0, f"the stream was held 20 ms, events measured {ms} ms"


def test_elapsed_time_errors(driver):
    a, b = cuda.Event(), cuda.Event()
    with pytest.raises(cuda.CudaError) as info:
        a.elapsed_ms(b)                                  # neither recorded
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    untimed = cuda.Event(timing=False).record()
    a.record()
    cuda.synchronize()
    with pytest.raises(cuda.CudaError) as info:
        a.elapsed_ms(untimed)
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"


def test_stream_waits_for_event_on_another_stream(driver, rng):
    producer, consumer = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    # Pinned, so the copy queues behind the gate (from pageable memory a driver may wait
    # for the stream to stage the bytes).
    host = cuda.pinned_empty(1024, np.float32)
    host[:] = rng.random(1024, dtype=np.float32)
    src, dst = cuda.mem_alloc(host.nbytes), cuda.mem_alloc(host.nbytes)
    gate = hold(producer)
    cuda.memcpy_htod_async(src, host, producer)
    ready = cuda.Event().record(producer)
    consumer.wait(ready)
    cuda.memcpy_dtod_async(dst, src, host.nbytes, consumer)
    assert consumer.query() is False                    # waiting for the producer's event
    gate.set()
    consumer.synchronize()
    back = poisoned(1024)
    cuda.memcpy_dtoh(back, dst)
    np.testing.assert_array_equal(back, host)


def test_legacy_default_stream_semantics(driver):
    """A blocking stream waits for work queued earlier on the legacy default stream; a
    non-blocking stream does not."""
    legacy = cuda.Stream.legacy()
    blocking, non_blocking = cuda.Stream(), cuda.Stream(non_blocking=True)
    a, b = cuda.mem_alloc(256), cuda.mem_alloc(256)
    gate = hold(legacy)
    cuda.memcpy_dtod_async(b, a, 256, blocking)
    cuda.memcpy_dtod_async(b, a, 256, non_blocking)
    non_blocking.synchronize()                          # must not wait for the gate
    assert blocking.query() is False                    # queued behind the legacy stream's work
    gate.set()
    blocking.synchronize()
    assert blocking.query() is True


def test_callback_exceptions_do_not_break_the_stream(driver, capfd):
    stream = cuda.Stream(non_blocking=True)
    ran = []
    stream.add_callback(lambda: 1 / 0)
    stream.add_callback(lambda: ran.append(True))
    stream.synchronize()
    assert ran == [True]
    assert "ZeroDivisionError" in capfd.readouterr().err


def test_objects_dropped_inside_a_host_callback_are_released_later(driver):
    """A host function must make no CUDA call: memory whose last reference dies inside one
    is freed by the next call into the driver from an ordinary thread."""
    stream = cuda.Stream(non_blocking=True)
    box = [cuda.mem_alloc(1 << 20)]
    calls = []

    def drop():
        with trace.Recorder() as r:
            box.pop()                       # garbage collected here, on the driver's thread
        calls.extend(r.calls)
    stream.add_callback(drop)
    stream.synchronize()
    assert calls == [] and context.pending_releases() == 1
    with trace.Recorder() as r:
        cuda.mem_get_info()                 # the next entry into the driver frees it
    assert [c["symbol"] for c in r.calls if "Free" in c["symbol"]] == ["cuMemFree_v2"]
    assert context.pending_releases() == 0

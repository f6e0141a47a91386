"""Streams and events of the emulated driver: work queued on a destroyed stream is not
forgotten, and a superseded event record does not change the event's time.

Tests that take the `driver` fixture state what the real driver documents (they run on
the GPU too where there is one).
"""
import threading
import time

from lowlevel import cuda

GATE = 20           # a host callback never holds a stream longer, even if a test fails


def hold(stream):
    """Block `stream` behind a host callback until the returned gate is set."""
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE))
    return gate


# --- work on a destroyed stream is not forgotten -----------------------------------------

def test_ctx_synchronize_waits_for_the_work_of_a_destroyed_stream(driver):
    stream = cuda.Stream()
    gate = hold(stream)
    done = []
    stream.add_callback(lambda: done.append("stream"))
    stream.destroy()                    # returns at once; the queued work still runs
    threading.Timer(0.2, gate.set).start()
    cuda.synchronize()
    assert done == ["stream"]


def test_legacy_stream_orders_after_a_destroyed_blocking_stream(driver):
    stream = cuda.Stream()              # blocking: ordered against the legacy stream
    gate = hold(stream)
    order = []
    stream.add_callback(lambda: order.append("stream"))
    stream.destroy()
    legacy = cuda.Stream.legacy()
    legacy.add_callback(lambda: order.append("legacy"))
    time.sleep(0.05)
    gate.set()
    legacy.synchronize()
    assert order == ["stream", "legacy"]


# --- re-recording an event ---------------------------------------------------------------

def test_a_superseded_record_does_not_change_the_events_time(driver):
    a, b = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    start, ev = cuda.Event(), cuda.Event()
    start.record(b)
    start.synchronize()
    gate = hold(a)
    ev.record(a)                    # pending behind the gate
    ev.record(b)                    # supersedes it; b is idle
    ev.synchronize()
    first = start.elapsed_ms(ev)
    time.sleep(0.1)
    gate.set()
    a.synchronize()
    assert start.elapsed_ms(ev) == first

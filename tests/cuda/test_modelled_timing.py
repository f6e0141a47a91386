"""Device times under the H200 time model (LOWLEVEL_EMU_TIMING=model): events report the
modelled device timeline, with the concurrency of the device. On a real GPU the same tests
measure, and compare the measurement with the model within a generous factor.

Each test holds its streams behind a gate (a host function that sleeps, and an event
recorded after it that the streams wait for), so that everything is queued before the
device may start: the timings then do not depend on how fast the host submits.
"""
import threading
import time

import numpy as np
import pytest

from lowlevel import cuda, emu
from lowlevel.cuda.cublas import Handle
from lowlevel.cuda.gemm import gemm_rowmajor
from lowlevel.emu.tools import timemodel
from lowlevel.emu.tools.devicetime import ENV
from lowlevel.emu.tools.h200 import DESCRIPTION, H200

GATE_S = 0.05
MB = 1 << 20
FACTOR = 3.0        # a real H200 against the model: within this factor either way

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 x, .param .u32 n) {
  .reg .u32 %r<5>; .reg .u64 %rd<4>; .reg .f32 %f<3>; .reg .pred %p;
  ld.param.u64 %rd1, [x]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
  mad.lo.u32 %r2, %r2, %r3, %r4;
  setp.ge.u32 %p, %r2, %r1; @%p bra DONE;
  mul.wide.u32 %rd2, %r2, 4; add.u64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3]; mul.f32 %f2, %f1, 0f40000000; st.global.f32 [%rd3], %f2;
DONE: ret;
}
"""


@pytest.fixture
def modelled(driver, monkeypatch):
    """The driver, with the time model on for the emulated GPU (a fresh context reads it)."""
    if driver.emulated:
        monkeypatch.setenv(ENV, "model")
        cuda.reset_device()
        assert driver.timing == DESCRIPTION
    yield driver
    if driver.emulated:
        cuda.synchronize()
        monkeypatch.delenv(ENV)
        cuda.reset_device()                 # the next tests get the emulator's own times
        assert driver.timing == "emulator CPU time"


def gate() -> cuda.Event:
    """An event that completes GATE_S after now: the streams that wait for it start together."""
    stream = cuda.Stream(non_blocking=True)
    stream.add_callback(lambda: time.sleep(GATE_S))
    return cuda.Event().record(stream)


def gated_stream(opened: cuda.Event, priority=None) -> cuda.Stream:
    s = cuda.Stream(non_blocking=True, priority=priority)
    s.wait(opened)
    return s


def span(opened: cuda.Event, stream: cuda.Stream, enqueue) -> tuple[cuda.Event, cuda.Event]:
    """Events recorded on `stream` before and after what `enqueue()` queues on it."""
    before = cuda.Event().record(stream)
    enqueue()
    return before, cuda.Event().record(stream)


def times(opened, events) -> tuple[float, float]:
    """(before, after) in ms after the gate opened."""
    before, after = events
    return opened.elapsed_ms(before), opened.elapsed_ms(after)


def scale_kernel():
    return cuda.Module.from_ptx(PTX).get_function("scale")


def launch(f, x, n: int, stream) -> None:
    f.launch(-(-n // 256), 256, (x, np.uint32(n)), stream=stream)


def test_device_to_device_copy_runs_near_hbm_bandwidth(modelled):
    nbytes = 64 * MB                          # beyond the 50 MB L2
    src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
    opened = gate()
    s = gated_stream(opened)
    ev = span(opened, s, lambda: cuda.memcpy_dtod_async(dst, src, nbytes, s))
    cuda.synchronize()
    t0, t1 = times(opened, ev)
    bandwidth = 2 * nbytes / ((t1 - t0) / 1e3)            # bytes read and written
    model = 2 * nbytes / timemodel.copy_segment("DtoD", nbytes, True).seconds
    assert model / FACTOR <= bandwidth <= model * FACTOR, f"{bandwidth / 1e12:.2f} TB/s"
    if modelled.kind == "emu":
        assert 0.8 * 4.8e12 <= bandwidth <= 4.8e12


def test_pinned_copies_are_faster_than_pageable(modelled):
    nbytes = 16 * MB
    dst = cuda.mem_alloc(nbytes)
    pinned = cuda.pinned_empty(nbytes, np.uint8)
    pageable = np.zeros(nbytes, np.uint8)
    opened = gate()
    s = gated_stream(opened)
    fast = span(opened, s, lambda: cuda.memcpy_htod_async(dst, pinned, s))
    slow = span(opened, s, lambda: cuda.memcpy_htod_async(dst, pageable, s))
    cuda.synchronize()
    fast_ms, slow_ms = (b - a for a, b in (times(opened, fast), times(opened, slow)))
    assert slow_ms > 1.3 * fast_ms, (fast_ms, slow_ms)
    model_ms = timemodel.copy_segment("HtoD", nbytes, pinned=True).seconds * 1e3
    assert model_ms / FACTOR <= fast_ms <= model_ms * FACTOR


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_copy_and_a_kernel_on_two_streams_overlap(modelled):
    f, n = scale_kernel(), 1 << 16
    x, dst = cuda.mem_alloc(4 * n), cuda.mem_alloc(8 * MB)
    host = cuda.pinned_empty(8 * MB, np.uint8)
    opened = gate()
    copies, kernels = gated_stream(opened), gated_stream(opened)
    copy = span(opened, copies, lambda: cuda.memcpy_htod_async(dst, host, copies))
    kernel = span(opened, kernels, lambda: launch(f, x, n, kernels))
    cuda.synchronize()
    assert _overlap(times(opened, copy), times(opened, kernel))


def test_two_copies_in_one_direction_share_one_engine(modelled):
    nbytes = 8 * MB
    dst = [cuda.mem_alloc(nbytes) for _ in range(3)]
    host = [cuda.pinned_empty(nbytes, np.uint8) for _ in range(3)]
    opened = gate()
    a, b = gated_stream(opened), gated_stream(opened)
    first = span(opened, a, lambda: cuda.memcpy_htod_async(dst[0], host[0], a))
    second = span(opened, b, lambda: cuda.memcpy_htod_async(dst[1], host[1], b))
    cuda.synchronize()
    alone_opened = gate()
    c = gated_stream(alone_opened)
    alone = span(alone_opened, c, lambda: cuda.memcpy_htod_async(dst[2], host[2], c))
    cuda.synchronize()
    one = times(alone_opened, alone)
    both = times(opened, first), times(opened, second)
    total = max(t[1] for t in both) - min(t[0] for t in both)
    assert total >= 1.5 * (one[1] - one[0]), (both, one)     # the bandwidth is not doubled
    if modelled.kind == "emu":
        assert total >= 1.95 * (one[1] - one[0])            # the model: one after the other


def test_a_sync_after_every_launch_costs_more_than_one_at_the_end(modelled):
    f, n = scale_kernel(), 1024
    x = cuda.mem_alloc(4 * n)
    s = cuda.Stream(non_blocking=True)
    launch(f, x, n, s)
    s.synchronize()                                 # warm: the first launch does more

    def run(sync_each: bool) -> float:
        start = cuda.Event().record(s)
        for _ in range(6):
            launch(f, x, n, s)
            if sync_each:
                s.synchronize()
        end = cuda.Event().record(s)
        s.synchronize()
        return start.elapsed_ms(end)
    # each the least of three: a host stall (a GC pause, the other core busy) lengthens one run
    # of either kind, since the device cannot start work before it is launched
    assert min(run(sync_each=True) for _ in range(3)) > min(run(sync_each=False) for _ in range(3))


def test_the_high_priority_kernel_finishes_first(modelled):
    least, greatest = cuda.stream_priority_range()
    if least == greatest:
        pytest.skip("the device has a single stream priority")
    f = scale_kernel()
    n = 1 << 17 if modelled.kind == "emu" else 1 << 26        # enough to fill the SMs
    x, y = cuda.mem_alloc(4 * n), cuda.mem_alloc(4 * n)
    opened = gate()
    low, high = gated_stream(opened, least), gated_stream(opened, greatest)
    slow = span(opened, low, lambda: launch(f, x, n, low))           # queued first
    urgent = span(opened, high, lambda: launch(f, y, n, high))
    cuda.synchronize()
    assert times(opened, urgent)[1] < times(opened, slow)[1]


def test_a_host_function_takes_its_real_time(modelled):
    s = cuda.Stream(non_blocking=True)
    start = cuda.Event().record(s)
    s.add_callback(lambda: time.sleep(0.02))
    end = cuda.Event().record(s)
    end.synchronize()
    assert start.elapsed_ms(end) >= 19.5


def test_a_host_function_released_at_once_still_holds_the_stream(modelled):
    """A host function waits for the host, which queues a kernel behind it between two events
    and releases it at once (no sleep): the events read the device's time, the kernel's, not
    when the host submitted them, as the host function returned after they were all queued."""
    f, n = scale_kernel(), 4096
    x = cuda.mem_alloc(4 * n)
    launch(f, x, n, None)                   # loaded and warm; its modelled time, on the emulator
    cuda.synchronize()
    kernel_us = emu.last_launch_stats().modelled_us if modelled.kind == "emu" else None
    for _ in range(3):
        s, release = cuda.Stream(non_blocking=True), threading.Event()
        s.add_callback(release.wait)
        around = span(None, s, lambda: launch(f, x, n, s))
        release.set()
        s.synchronize()
        elapsed_us = around[0].elapsed_ms(around[1]) * 1e3
        if kernel_us is not None:
            step_us = H200.event_resolution_s * 1e6
            assert elapsed_us == pytest.approx(kernel_us, abs=2 * step_us), f"{elapsed_us:.1f} us"
        else:
            assert elapsed_us < 50, f"{elapsed_us:.1f} us around a kernel of {n} threads"


def test_sgemm_time_against_the_model(modelled):
    n = 512
    a, b = (cuda.mem_alloc(4 * n * n) for _ in range(2))
    c = cuda.mem_alloc(4 * n * n)
    opened = gate()
    s = gated_stream(opened)
    handle = Handle(s)
    gemm_rowmajor(handle, a, b, c, n, n, n, dtype=np.float32, lda=n, ldb=n, ldc=n)    # warm
    ev = span(opened, s, lambda: gemm_rowmajor(handle, a, b, c, n, n, n, dtype=np.float32, lda=n, ldb=n, ldc=n))
    cuda.synchronize()
    t0, t1 = times(opened, ev)
    model_ms = timemodel.gemm_segment(n, n, n, 1, "fp32", 4, 4, reads_c=False).seconds * 1e3
    assert model_ms / FACTOR <= t1 - t0 <= model_ms * FACTOR * 2     # small GEMMs fall short of peak


def test_launch_stats_keep_cpu_time_beside_the_modelled_time(modelled):
    if modelled.kind != "emu":
        pytest.skip("the emulator's launch statistics")
    f, n = scale_kernel(), 4096
    x = cuda.mem_alloc(4 * n)
    launch(f, x, n, None)
    cuda.synchronize()
    stats = emu.last_launch_stats()
    assert stats.cpu_s > 0
    assert stats.modelled_us == pytest.approx(H200.kernel_min_s * 1e6)


def test_timing_says_what_device_times_are(driver):
    if not driver.emulated:
        assert driver.timing == "measured on the GPU"
    else:
        assert driver.timing == "emulator CPU time"          # without LOWLEVEL_EMU_TIMING
        assert cuda.driver_info()["timing"] == driver.timing


def test_the_legacy_stream_waits_for_blocking_streams_only(modelled):
    f, n = scale_kernel(), 1024
    x = cuda.mem_alloc(4 * n)
    blocking, free = cuda.Stream(), cuda.Stream(non_blocking=True)
    begin = cuda.Event().record(blocking)
    blocking.add_callback(lambda: time.sleep(GATE_S))
    launch(f, x, n, None)                                   # the legacy stream: after the sleep
    after_legacy = cuda.Event().record(None)
    launch(f, x, n, free)                                   # a non-blocking stream: at once
    after_free = cuda.Event().record(free)
    cuda.synchronize()
    assert begin.elapsed_ms(after_legacy) >= GATE_S * 1e3 * 0.95
    assert begin.elapsed_ms(after_free) < GATE_S * 1e3 * 0.95


def test_a_graph_replay_runs_its_nodes_one_after_another(modelled):
    f, n = scale_kernel(), 1 << 17
    x = cuda.mem_alloc(4 * n)
    s = cuda.Stream(non_blocking=True)
    with cuda.capture(s) as graph:
        for _ in range(3):
            launch(f, x, n, s)
    replay = graph.instantiate()
    opened = gate()
    s.wait(opened)
    ev = span(opened, s, lambda: replay.launch(s))
    cuda.synchronize()
    t0, t1 = times(opened, ev)
    minimum = 3 * H200.kernel_min_s * 1e3
    assert t1 - t0 >= minimum / FACTOR
    if modelled.kind == "emu":
        assert t1 - t0 == pytest.approx(minimum + 2 * H200.graph_node_s * 1e3, abs=1e-3)

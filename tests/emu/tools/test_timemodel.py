"""The H200 time model's figures against NVIDIA's published H200 SXM numbers, and its
timeline (resources, dependencies, priorities) on made-up operations. The driver-level
behaviour (events report modelled times) is in tests/cuda/test_modelled_timing.py."""
import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch

from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.tools import devicetime, timemodel
from lowlevel.emu.tools.h200 import H200
from lowlevel.emu.tools.timemodel import Segment

GB = 10**9
HBM = 4.8e12                  # H200 datasheet: 4.8 TB/s HBM3e
FP32_PEAK = 67e12             # 67 TFLOP/s FP32
FP16_TENSOR_PEAK = 989e12     # dense FP16/BF16 tensor


def test_published_peaks():
    assert H200.sms == 132
    assert timemodel.peak_flops("fp32") == pytest.approx(FP32_PEAK, rel=0.01)
    assert timemodel.peak_flops("fp64") == pytest.approx(34e12, rel=0.02)
    assert timemodel.peak_flops("fp16") == FP16_TENSOR_PEAK
    assert timemodel.peak_flops("tf32") == pytest.approx(494e12, rel=0.01)


def test_one_gigabyte_device_copy_runs_near_hbm_bandwidth():
    seg = timemodel.copy_segment("DtoD", GB, pinned=True)
    bandwidth = 2 * GB / seg.seconds          # a copy reads and writes every byte
    assert 0.85 * HBM <= bandwidth <= H200.hbm_efficiency * HBM
    assert seg.resource == "sm"


def test_sgemm_4096_runs_near_fp32_peak_times_efficiency():
    n = 4096
    seg = timemodel.gemm_segment(n, n, n, 1, "fp32", 4, 4, reads_c=False)
    flops = 2 * n**3 / seg.seconds
    assert 0.95 * H200.compute_efficiency * FP32_PEAK <= flops <= H200.compute_efficiency * FP32_PEAK
    half = timemodel.gemm_segment(n, n, n, 1, "fp16", 2, 2, reads_c=False)
    assert 0.9 * H200.tensor_efficiency * FP16_TENSOR_PEAK <= 2 * n**3 / half.seconds <= FP16_TENSOR_PEAK


def test_small_gemm_is_memory_or_overhead_bound():
    seg = timemodel.gemm_segment(64, 64, 64, 1, "fp32", 4, 4, reads_c=True)
    assert seg.seconds == pytest.approx(max(H200.kernel_min_s, H200.kernel_overhead_s), rel=0.5)


def test_pinned_copies_are_about_twice_as_fast_as_pageable():
    pinned = timemodel.copy_segment("HtoD", 64 << 20, pinned=True)
    pageable = timemodel.copy_segment("HtoD", 64 << 20, pinned=False)
    assert 2.0 <= pageable.seconds / pinned.seconds <= 3.0
    assert (64 << 20) / pinned.seconds <= 64e9            # below PCIe Gen5 x16's raw 64 GB/s
    assert timemodel.copy_segment("DtoH", 1, pinned=True).resource == "d2h"
    assert pinned.resource == "h2d"


SCALE_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry scale(.param .u64 x) {
  .reg .u32 %r<3>; .reg .u64 %rd<4>; .reg .f32 %f<3>;
  ld.param.u64 %rd1, [x];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4; add.u64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3]; mul.f32 %f2, %f1, 0f40000000; st.global.f32 [%rd3], %f2;
  ret;
}
"""


def _mix(ptx: str):
    """What one thread of the (branch-free) kernel does, and its instruction count."""
    ck = load_ptx(ptx).kernels["scale"].compiled
    instructions = [i for b in ck.blocks for i in b.instructions]
    return timemodel.instruction_mix(instructions), len(instructions)


def test_instruction_mix_counts_global_bytes_and_fp32():
    mix, _ = _mix(SCALE_PTX)
    assert mix.global_bytes == 8                              # one 4-byte load, one 4-byte store
    assert mix.fp32 == 1                                      # the mul.f32
    assert mix.tensor_flops == 0 and mix.fp64 == 0


def test_a_large_streaming_kernel_is_memory_bound_at_hbm_bandwidth():
    mix, n_ins = _mix(SCALE_PTX)
    threads = 1 << 26
    seg = timemodel.kernel_segment(timemodel.executed_mix([mix], [threads]), threads * n_ins, threads, 256)
    assert seg.share == 1.0
    assert 8 * threads / seg.seconds == pytest.approx(H200.hbm_efficiency * HBM, rel=0.02)


def test_a_tiny_kernel_takes_the_minimum_and_a_small_share_of_the_sms():
    mix, n_ins = _mix(SCALE_PTX)
    seg = timemodel.kernel_segment(timemodel.executed_mix([mix], [32]), 32 * n_ins, 32, 32)
    assert seg.seconds == H200.kernel_min_s
    assert seg.share == pytest.approx(1 / (H200.sms * H200.saturating_warps_per_sm))


LOOP_PTX = HEADER + r"""
.visible .entry sum_loop(.param .u64 x, .param .u64 out, .param .u32 n) {
  .reg .u32 %r<4>; .reg .u64 %rd<5>; .reg .f32 %f<3>; .reg .pred %p;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd4, [out]; ld.param.u32 %r1, [n];
  mov.u32 %r2, 0; mov.f32 %f1, 0f00000000;
LOOP:
  mul.wide.u32 %rd2, %r2, 4; add.u64 %rd3, %rd1, %rd2;
  ld.global.f32 %f2, [%rd3]; add.f32 %f1, %f1, %f2;
  add.u32 %r2, %r2, 1; setp.lt.u32 %p, %r2, %r1; @%p bra LOOP;
  mov.u32 %r3, %tid.x; mul.wide.u32 %rd2, %r3, 4; add.u64 %rd4, %rd4, %rd2;
  st.global.f32 [%rd4], %f1;
  ret;
}
"""


def test_a_loop_counts_as_often_as_it_runs(mem, rng):
    n, threads = 50, 64
    x = Buf(mem, rng.standard_normal(n).astype(np.float32))
    out = Buf(mem, n=threads, dtype=np.float32)
    mod = load_ptx(LOOP_PTX)
    stats = launch(mod, "sum_loop", 1, threads, x, out, n, mem=mem)
    np.testing.assert_allclose(out.read(), np.full(threads, x.read().sum()), rtol=1e-5)
    ck = mod.kernels["sum_loop"].compiled
    mix = timemodel.executed_mix([timemodel.instruction_mix(b.instructions) for b in ck.blocks], stats.block_lanes)
    assert mix.global_bytes == threads * (4 * n + 4)         # n loads of 4 bytes, one store
    assert mix.fp32 == threads * n                           # the add.f32 of each iteration
    assert sum(stats.block_lanes[b.index] * b.n_instructions for b in ck.blocks) == stats.thread_instructions


# ---- the timeline ----------------------------------------------------------------------------
def _op(tl, segments, after=(), priority=0, submit_ns=0):
    op = tl.new_op("op", priority, list(after))
    op.submit_ns = submit_ns
    op.segments.extend(segments)
    tl.completed(op)
    return op


def _overlap(a, b) -> bool:
    return a.start_ns < b.end_ns and b.start_ns < a.end_ns


US = 1e-6
LATENCY_NS = int(H200.launch_latency_s * 1e9)


def test_copy_engines_one_per_direction():
    tl = devicetime.DeviceTimeline()
    h2d_a, h2d_b = (_op(tl, [Segment("h2d", 100 * US)]) for _ in range(2))
    d2h = _op(tl, [Segment("d2h", 100 * US)])
    kernel = _op(tl, [Segment("sm", 100 * US, 1.0)])
    for op in (h2d_a, h2d_b, d2h, kernel):
        tl.times(op)
    assert not _overlap(h2d_a, h2d_b)                  # two H2D copies serialise
    assert _overlap(h2d_a, d2h) and _overlap(h2d_a, kernel) and _overlap(d2h, kernel)
    assert h2d_a.start_ns == LATENCY_NS                # submission + launch latency


def test_kernels_share_the_sms_by_their_share():
    tl = devicetime.DeviceTimeline()
    small = [_op(tl, [Segment("sm", 50 * US, 0.1)]) for _ in range(2)]
    big = [_op(tl, [Segment("sm", 50 * US, 1.0)]) for _ in range(2)]
    for op in small + big:
        tl.times(op)
    assert _overlap(*small)
    assert not _overlap(*big)
    assert min(b.start_ns for b in big) >= max(s.end_ns for s in small)    # no room beside them


def test_an_op_follows_its_dependencies_and_its_submission():
    tl = devicetime.DeviceTimeline()
    first = _op(tl, [Segment("host", 1e-3)])
    second = _op(tl, [Segment("h2d", 10 * US)], after=[first], submit_ns=5)
    late = _op(tl, [], submit_ns=10**7)
    assert tl.times(second) == (first.end_ns, first.end_ns + 10_000)
    assert tl.times(late) == (10**7 + LATENCY_NS, 10**7 + LATENCY_NS)


def test_the_higher_priority_kernel_goes_first_when_both_wait_for_the_sms():
    tl = devicetime.DeviceTimeline()
    gate = _op(tl, [Segment("host", 1e-3)])
    low = _op(tl, [Segment("sm", 100 * US, 1.0)], after=[gate], priority=0)
    high = _op(tl, [Segment("sm", 100 * US, 1.0)], after=[gate], priority=-5)
    tl.times(low)
    assert high.start_ns == gate.end_ns and high.end_ns <= low.start_ns


def test_priority_holds_behind_event_records_of_each_stream():
    tl = devicetime.DeviceTimeline()
    gate = _op(tl, [Segment("host", 1e-3)])
    low_mark = _op(tl, [], after=[gate], priority=0)                 # queued in this order
    low = _op(tl, [Segment("sm", 100 * US, 1.0)], after=[low_mark], priority=0)
    high_mark = _op(tl, [], after=[gate], priority=-5)
    high = _op(tl, [Segment("sm", 100 * US, 1.0)], after=[high_mark], priority=-5)
    tl.times(low)
    assert high.end_ns <= low.start_ns


def test_graph_nodes_run_one_after_another():
    tl = devicetime.DeviceTimeline()
    replay = _op(tl, [Segment("sm", 10 * US, 1.0)] * 3)
    start, end = tl.times(replay)
    assert end - start == 30_000 + 2 * int(H200.graph_node_s * 1e9)


def test_event_times_have_the_event_resolution():
    tl = devicetime.DeviceTimeline()
    op = _op(tl, [Segment("sm", 1.2345 * US, 1.0)])
    assert tl.event_time_ns(op) % 500 == 0 and tl.event_time_ns(op) >= op.end_ns


def test_timing_mode_from_the_environment(monkeypatch):
    monkeypatch.delenv(devicetime.ENV, raising=False)
    assert devicetime.mode_from_env() == "cpu" and devicetime.timeline_from_env() is None
    monkeypatch.setenv(devicetime.ENV, "model")
    assert isinstance(devicetime.timeline_from_env(), devicetime.DeviceTimeline)
    monkeypatch.setenv(devicetime.ENV, "fast")
    with pytest.raises(ValueError, match="LOWLEVEL_EMU_TIMING='fast'"):
        devicetime.mode_from_env()


def test_ops_of_another_device_are_not_waited_for_in_the_model():
    mine, other = devicetime.DeviceTimeline(), devicetime.DeviceTimeline()
    theirs = other.new_op("copy", 0, [])                 # never completed on its timeline
    op = _op(mine, [Segment("sm", 10 * US, 1.0)], after=[theirs])
    assert mine.times(op) == (LATENCY_NS, LATENCY_NS + 10_000)

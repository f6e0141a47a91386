"""The H200 time model counts a wgmma.mma_async as 2*M*N*K FLOPs per warpgroup (each of its
128 threads a 128th) at the tensor-core peak of its input type: FP16/BF16 989, TF32 494,
FP8 1979 TFLOP/s, INT8 1979 TOPS (h200.py); wgmma.fence/commit/wait count none."""
import pytest

from lowlevel.emu.ptx.parser import parse_ptx
from lowlevel.emu.tools import timemodel
from lowlevel.emu.tools.h200 import H200

PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k() {
  .reg .b32 %d<128>; .reg .b64 %rd<2>;
  wgmma.fence.sync.aligned;
  INSTRUCTION
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  ret;
}
"""


def mix_of(instruction):
    body = parse_ptx(PTX.replace("INSTRUCTION", instruction)).kernels["k"].body
    return timemodel.instruction_mix([i for i in body if not isinstance(i, str)])


@pytest.mark.parametrize("types, n, k, regs, rate", [
    ("f32.f16.f16", 256, 16, 128, H200.tensor_fp16_flops),
    ("f32.bf16.bf16", 64, 16, 32, H200.tensor_fp16_flops),
    ("f32.tf32.tf32", 64, 8, 32, H200.tensor_tf32_flops),
    ("f16.e4m3.e5m2", 128, 32, 32, H200.tensor_fp8_flops),
    ("s32.s8.s8", 64, 32, 32, H200.tensor_int8_ops),
])
def test_wgmma_flops_at_the_peak_of_their_type(types, n, k, regs, rate):
    d = "{" + ", ".join(f"%d{i}" for i in range(regs)) + "}"
    mix = mix_of(f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{types} {d}, %rd0, %rd1, 1;")
    per_thread = 2.0 * 64 * n * k / 128
    assert mix.tensor_flops == per_thread
    assert mix.tensor_seconds == pytest.approx(per_thread / rate)
    # a grid that fills the device: 2*64*N*K per warpgroup over the peak, at tensor efficiency
    threads = H200.sms * H200.saturating_warps_per_sm * 32 * 64
    seg = timemodel.kernel_segment(timemodel.executed_mix([mix], [threads]), threads, threads, 128)
    flops = 2.0 * 64 * n * k * threads / 128
    assert seg.seconds == pytest.approx(flops / (rate * H200.tensor_efficiency) + H200.kernel_overhead_s)

"""The figures of the modelled device (LOWLEVEL_EMU_TIMING=model): an NVIDIA H200 SXM, in
one table. timemodel.py turns what an operation did into a duration with these.

Sources: the NVIDIA H200 Tensor Core GPU datasheet (SXM: FP64 34 TFLOP/s, FP64 tensor 67,
FP32 67, TF32 tensor 494 dense (989 with sparsity), BF16/FP16 tensor 989 dense (1979
sparse), FP8 tensor 1979 dense (3958 sparse), INT8 tensor 1979 TOPS dense, 141 GB HBM3e at 4.8 TB/s, PCIe Gen5 x16 128 GB/s both directions together),
and the Hopper architecture whitepaper (132 SMs on the SXM part, 128 FP32 and 64 FP64
lanes per SM and clock, 4 schedulers per SM, 16 special-function lanes, 64 resident warps,
50 MB L2, boost clock 1.98 GHz: 132 x 128 x 2 x 1.98e9 = 66.9 TFLOP/s FP32).

ESTIMATES (not in the datasheet; typical measured values, a real H200 differs by a few
tens of percent): the efficiencies, the effective PCIe bandwidths, the launch latency,
the minimum kernel duration, the copy overhead, the graph-node overhead, and the warps per
SM a kernel needs to reach full throughput.

PCIe: Gen5 x16 is 64 GB/s per direction raw; pinned (page-locked) copies reach ~55 GB/s
(bandwidthTest on Gen5 hosts). Pageable copies are staged by the driver through a pinned
buffer: the CPU memcpy into the staging buffer and the DMA alternate in chunks, so they
reach roughly half or less; 24 GB/s is used (0.44 of pinned), a figure that depends on the
host's memory bandwidth more than on the GPU.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceFigures:
    name: str = "NVIDIA H200 SXM (modelled)"
    sms: int = 132
    clock_hz: float = 1.98e9                 # boost clock
    # per SM and clock, in thread-operations (one lane of one instruction)
    fp32_lanes: int = 128                    # FP32 FMA counts 2 FLOPs: 67 TFLOP/s
    fp64_lanes: int = 64                     # 34 TFLOP/s (67 with the FP64 tensor path, unmodelled)
    int_lanes: int = 64                      # INT32
    sfu_lanes: int = 16                      # ex2, lg2, sin, cos, rsqrt, rcp.approx, sqrt.approx
    issue_lanes: int = 128                   # 4 schedulers x 32 lanes: the bound on any mix
    tensor_fp16_flops: float = 989e12        # FP16/BF16 dense tensor (mma, wgmma)
    tensor_tf32_flops: float = 494e12        # TF32 dense tensor
    tensor_fp64_flops: float = 67e12
    tensor_fp8_flops: float = 1979e12        # FP8 (e4m3, e5m2) dense tensor
    tensor_int8_ops: float = 1979e12         # INT8 dense tensor; ESTIMATE: s4/u4/b1 at this rate too
    hbm_bytes_per_s: float = 4.8e12          # HBM3e
    l2_bytes: int = 50 * 2**20               # documented; not modelled (every byte goes to HBM)
    resident_warps_per_sm: int = 64
    saturating_warps_per_sm: int = 16        # ESTIMATE: warps per SM to hide latency (full rate)
    nvlink_bytes_per_s: float = 450e9        # NVLink 4: 900 GB/s both directions (peer copies)
    pcie_pinned_bytes_per_s: float = 55e9    # ESTIMATE, effective, per direction
    pcie_pageable_bytes_per_s: float = 24e9  # ESTIMATE: staged through a pinned buffer
    compute_efficiency: float = 0.80         # ESTIMATE: of peak, for kernels and cuBLAS FP32
    tensor_efficiency: float = 0.70          # ESTIMATE: cuBLAS tensor-core GEMMs of peak
    hbm_efficiency: float = 0.90             # ESTIMATE: a streaming copy of peak HBM bandwidth
    launch_latency_s: float = 4e-6           # ESTIMATE: submission to start on an idle GPU (3-5 us)
    kernel_min_s: float = 2.5e-6             # ESTIMATE: the shortest kernel (an empty one, 2-3 us)
    kernel_overhead_s: float = 1.0e-6        # ESTIMATE: ramp-up and drain added to every kernel
    copy_overhead_s: float = 1.5e-6          # ESTIMATE: DMA set-up per copy or memset
    graph_node_s: float = 1.0e-6             # ESTIMATE: a graph node's launch inside a replay
    event_resolution_s: float = 0.5e-6       # cuEventElapsedTime: "around 0.5 microseconds"


H200 = DeviceFigures()

# What Driver.timing says of modelled times.
DESCRIPTION = "modelled (H200 time model)"

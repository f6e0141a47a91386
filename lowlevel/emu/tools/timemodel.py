"""The H200 time model (LOWLEVEL_EMU_TIMING=model): how long a device operation would take
on the modelled device (h200.py's figures), from what the emulator saw it do.

A duration is a Segment: seconds on one resource, using a share of it.

    kernel    roofline: max(compute time, memory time) + a fixed overhead, at least the
              minimum kernel duration. Compute time is the slowest pipe: thread-operations
              of each class (FP32, FP64, integer, SFU, tensor FLOPs, and all of them on the
              issue slots) over that pipe's rate (tensor FLOPs at the peak of their input
              type: FP16/BF16, TF32, FP8, INT8, FP64; an mma/wmma counts 2mnk per warp, a
              wgmma 2mnk per warpgroup); memory time is the global bytes loaded and
              stored over HBM bandwidth (no cache: L2 hits are not modelled). A grid with
              fewer warps than the device needs to reach full rate (SMs x saturating warps)
              runs at that fraction, and uses that share of the SMs (timeline.py lets
              kernels whose shares fit run side by side).
    gemm      cuBLAS: 2mnk FLOPs per matrix over the FP32, TF32, FP16/BF16 tensor or FP64
              rate, times the efficiency, against reading A and B and writing C (and reading
              C when beta != 0) at HBM bandwidth.
    copy      host<->device at the PCIe rate for pinned or pageable host memory, each
              direction its own copy engine; device-to-device reads and writes every byte
              (2N bytes of HBM traffic); memsets write N bytes.
    host      a host function (cuLaunchHostFunc): the real time it took.

Counting a kernel's instructions by class (the pipe each family declares for its opcodes in
isa/registry.py; TYPED ones by their type): the engine counts, per basic block, the lanes
that executed it (LaunchStats.block_lanes); each block's classes and global bytes come from
its PTX, once per kernel. Bytes are counted per thread (as if coalesced, with no reuse).
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from ..isa.registry import INTEGER, MEMORY, SFU, TENSOR, pipe_of
from .base import Tool
from .h200 import H200, DeviceFigures


@dataclass(frozen=True)
class Segment:
    resource: str          # "sm", "h2d", "d2h", "peer" (copy engines), "host"
    seconds: float
    share: float = 1.0     # of the resource (SM shares add up to 1)
    what: str = ""
    returned_ns: int | None = None     # a host function: when it really returned (perf_counter ns)


# ---- the operation a stream worker is running: what it did, noted by the code that did it --
_running = threading.local()


def begin(op) -> None:
    """The stream worker starts `op` (a timeline.Op) on this thread."""
    _running.op = op


def end() -> None:
    _running.op = None


def note(segment: Segment) -> None:
    """Add `segment` to the operation running on this thread (none: the model is off)."""
    op = getattr(_running, "op", None)
    if op is not None:
        op.segments.append(segment)


def running() -> bool:
    return getattr(_running, "op", None) is not None


# ---- copies, memsets, host functions ---------------------------------------------------------
def copy_segment(kind: str, nbytes: int, pinned: bool, dev: DeviceFigures = H200) -> Segment:
    """A cuMemcpy* of `nbytes`: kind "HtoD", "DtoH" or "DtoD"; `pinned`: the host side is
    page-locked (ignored for DtoD)."""
    if kind == "DtoD":
        s = 2 * nbytes / (dev.hbm_bytes_per_s * dev.hbm_efficiency)
        return Segment("sm", s + dev.copy_overhead_s, 1.0, "memcpyDtoD")
    rate = dev.pcie_pinned_bytes_per_s if pinned else dev.pcie_pageable_bytes_per_s
    engine = {"HtoD": "h2d", "DtoH": "d2h"}[kind]
    what = f"memcpy{kind} ({'pinned' if pinned else 'pageable'})"
    return Segment(engine, nbytes / rate + dev.copy_overhead_s, 1.0, what)


def peer_segment(nbytes: int, dev: DeviceFigures = H200) -> Segment:
    """A copy between two devices' memories, over NVLink, by its own copy engine."""
    return Segment("peer", nbytes / dev.nvlink_bytes_per_s + dev.copy_overhead_s, 1.0, "memcpyPeer")


def streaming_segment(nbytes: int, what: str, dev: DeviceFigures = H200) -> Segment:
    """A kernel that streams `nbytes` through HBM and little else (cuBLAS level 1 and 2)."""
    s = nbytes / (dev.hbm_bytes_per_s * dev.hbm_efficiency) + dev.kernel_overhead_s
    return Segment("sm", max(s, dev.kernel_min_s), 1.0, what)


def memset_segment(nbytes: int, dev: DeviceFigures = H200) -> Segment:
    return Segment("sm", nbytes / (dev.hbm_bytes_per_s * dev.hbm_efficiency) + dev.copy_overhead_s, 1.0, "memset")


def host_segment(seconds: float, returned_ns: int | None = None) -> Segment:
    """A host function that ran `seconds` and returned at `returned_ns` (perf_counter ns):
    it ends on the modelled timeline no earlier than it really returned, as what follows it
    on a GPU cannot start before then either (devicetime.py)."""
    return Segment("host", seconds, 1.0, "host function", returned_ns)


def timed_host(run):
    """`run` (a host function), noting the real time it takes and when it returned."""
    def timed():
        t0 = time.perf_counter_ns()
        try:
            run()
        finally:
            t1 = time.perf_counter_ns()
            note(host_segment((t1 - t0) / 1e9, t1))
    return timed


# ---- cuBLAS ----------------------------------------------------------------------------------
_GEMM_RATES = {   # math -> (figure name of the rate, efficiency name)
    "fp32": ("fp32", "compute_efficiency"),
    "fp64": ("fp64", "compute_efficiency"),
    "tf32": ("tensor_tf32_flops", "tensor_efficiency"),
    "fp16": ("tensor_fp16_flops", "tensor_efficiency"),
}


def peak_flops(math: str, dev: DeviceFigures = H200) -> float:
    """FLOP/s at peak for `math`: fp32, fp64 (the SIMT lanes, 2 FLOPs per FMA), tf32, fp16
    (tensor cores; fp16 also stands for bf16)."""
    if math == "fp32":
        return dev.sms * dev.fp32_lanes * 2 * dev.clock_hz
    if math == "fp64":
        return dev.sms * dev.fp64_lanes * 2 * dev.clock_hz
    return getattr(dev, _GEMM_RATES[math][0])


def gemm_segment(m: int, n: int, k: int, batch: int, math: str, in_bytes: int, out_bytes: int,
                 reads_c: bool, dev: DeviceFigures = H200) -> Segment:
    """A cuBLAS GEMM of `batch` m x n x k products (in_bytes: A's and B's element size)."""
    flops = 2.0 * m * n * k * batch
    compute = flops / (peak_flops(math, dev) * getattr(dev, _GEMM_RATES[math][1]))
    traffic = batch * ((m * k + k * n) * in_bytes + m * n * out_bytes * (2 if reads_c else 1))
    memory = traffic / (dev.hbm_bytes_per_s * dev.hbm_efficiency)
    s = max(compute, memory) + dev.kernel_overhead_s
    return Segment("sm", max(s, dev.kernel_min_s), 1.0, f"gemm {m}x{n}x{k} ({math})")


# ---- kernels ---------------------------------------------------------------------------------
# an instruction's pipe class is its family's declaration (isa/registry.py: pipe=...)
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_NOT_GLOBAL = {"shared", "local", "param", "const"}
_FP32_TYPES = {"f32", "f16", "bf16", "f16x2", "bf16x2"}


@dataclass
class Mix:
    """Thread-operations of each pipe, tensor FLOPs and global bytes: of one thread running
    some instructions once (instruction_mix), or of a whole launch (executed_mix)."""
    fp32: float = 0.0
    fp64: float = 0.0
    integer: float = 0.0
    sfu: float = 0.0
    tensor_flops: float = 0.0
    tensor_seconds: float = 0.0      # the tensor FLOPs over the peak rate of their type
    global_bytes: float = 0.0


def _type_bytes(mods) -> int:
    for m in mods:
        if m[:1] in "bsuf" and m[1:].isdigit():
            return int(m[1:]) // 8
    return 4


def _vector(mods) -> int:
    return next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)


_FIELDS = ("fp32", "fp64", "integer", "sfu", "tensor_flops", "tensor_seconds", "global_bytes")
# a tensor instruction's input type -> the figure of its peak rate
_TENSOR_RATES = {"e4m3": "tensor_fp8_flops", "e5m2": "tensor_fp8_flops", "s8": "tensor_int8_ops",
                 "u8": "tensor_int8_ops", "s4": "tensor_int8_ops", "u4": "tensor_int8_ops",
                 "b1": "tensor_int8_ops", "tf32": "tensor_tf32_flops", "f64": "tensor_fp64_flops"}


def tensor_rate(mods, dev: DeviceFigures = H200) -> float:
    """The peak FLOP/s of a tensor instruction with modifiers `mods`: its input type's
    (FP16/BF16 when none of the others is named)."""
    return getattr(dev, next((_TENSOR_RATES[m] for m in mods if m in _TENSOR_RATES), "tensor_fp16_flops"))


def instruction_mix(instructions) -> Mix:
    """What one thread running `instructions` (PTX Instruction objects: opcode, mods) once
    does, each counted on the pipe its family declares."""
    mix = Mix()
    for ins in instructions:
        op, mods = ins.opcode, ins.mods
        pipe = pipe_of(ins)
        if pipe == TENSOR:
            shape = next((_SHAPE.fullmatch(m) for m in mods if _SHAPE.fullmatch(m)), None)
            if shape:
                mm, nn, kk = map(int, shape.groups())
                threads = 128 if op == "wgmma" else 32
                flops = 2.0 * mm * nn * kk / threads
                mix.tensor_flops += flops
                mix.tensor_seconds += flops / tensor_rate(mods)
        elif pipe == MEMORY and ("global" in mods or not _NOT_GLOBAL.intersection(mods)):
            mix.global_bytes += _type_bytes(mods) * _vector(mods)
        elif pipe in (MEMORY, INTEGER):     # shared, local, param: the load/store unit; moves
            mix.integer += 1
        elif pipe == SFU:
            mix.sfu += 1
        elif "f64" in mods:
            mix.fp64 += 1
        elif _FP32_TYPES.intersection(mods):
            mix.fp32 += 1
        else:
            mix.integer += 1
    return mix


def executed_mix(block_mixes: list, block_lanes: list) -> Mix:
    """A launch's totals: each block's mix (one thread, once) times the lanes that ran it."""
    total = Mix()
    for mix, lanes in zip(block_mixes, block_lanes):
        if lanes:
            for name in _FIELDS:
                setattr(total, name, getattr(total, name) + getattr(mix, name) * lanes)
    return total


def kernel_segment(mix: Mix, thread_instructions: int, threads: int, threads_per_cta: int,
                   dev: DeviceFigures = H200) -> Segment:
    """A kernel that executed `thread_instructions`, `mix` their totals by class, over
    `threads` threads."""
    warps = -(-threads // threads_per_cta) * -(-threads_per_cta // 32)
    share = min(1.0, warps / (dev.sms * dev.saturating_warps_per_sm))
    per_pipe = dev.sms * dev.clock_hz * dev.compute_efficiency * share
    ti = float(thread_instructions)
    compute = max(ti / (dev.issue_lanes * per_pipe),
                  mix.fp32 / (dev.fp32_lanes * per_pipe),
                  mix.fp64 / (dev.fp64_lanes * per_pipe),
                  mix.integer / (dev.int_lanes * per_pipe),
                  mix.sfu / (dev.sfu_lanes * per_pipe),
                  mix.tensor_seconds / (dev.tensor_efficiency * share))
    memory = mix.global_bytes / (dev.hbm_bytes_per_s * dev.hbm_efficiency * share)
    seconds = max(max(compute, memory) + dev.kernel_overhead_s, dev.kernel_min_s)
    return Segment("sm", seconds, share, "kernel")


class KernelTime(Tool):
    """Times a launch: its CPU seconds in the emulator (LaunchStats.cpu_s) always, its
    modelled duration (LaunchStats.modelled_us, and a Segment for the timeline) while the
    launch runs under the time model."""

    def initialize(self, launch) -> None:
        self.ck = launch.ck
        self.threads_per_cta = launch.threads_per_cta
        self.cpu0 = time.thread_time()

    def finish(self, stats) -> None:
        stats.cpu_s = time.thread_time() - self.cpu0
        if not running():
            return
        mixes = getattr(self.ck, "time_mixes", None)           # once per kernel
        if mixes is None:
            mixes = self.ck.time_mixes = [instruction_mix(b.instructions) for b in self.ck.blocks]
        mix = executed_mix(mixes, stats.block_lanes)
        segment = kernel_segment(mix, stats.thread_instructions, stats.threads, self.threads_per_cta)
        stats.modelled_us = segment.seconds * 1e6
        note(Segment("sm", segment.seconds, segment.share, f"kernel {self.ck.kernel.name}"))


__all__ = ["KernelTime", "Mix", "Segment", "begin", "copy_segment", "end", "executed_mix", "gemm_segment", "host_segment",
           "instruction_mix", "kernel_segment", "memset_segment", "note", "peak_flops", "peer_segment", "running",
           "streaming_segment", "tensor_rate", "timed_host"]

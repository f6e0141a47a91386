"""wgmma test kernels, written from the PTX ISA's text, independently of the emulator.

`Case` describes one product: the instruction's types and shape, where A comes from, the
shared-memory layout of each operand (K- or MN-major, swizzle, LBO, SBO) and the k-blocks
the kernel runs (each a mma_async whose descriptor start advances as CUTLASS and Triton
advance it, all chained on one accumulator in one group). `image` lays an operand out in
shared memory following the PTX ISA's description of the canonical layouts (core matrices
of 8 rows x 16 bytes; in a swizzled layout, row r of an 8-row atom keeps its 16-byte chunk
c at chunk position c XOR phase(r), phase(r) = (r // (8 / W)) % W for W chunks per row:
the ISA's "Tensor swizzling modes" figures). `a_fragments` and `d_elements` follow the
ISA's figures of wgmma's register fragments, written out per type.

The kernel (`ptx`) copies the operand images from global into 1024-aligned shared memory,
builds the descriptors from the buffers' shared addresses (start >> 4 in bits 0-13, the
rest from a parameter), loads D from global, runs the mma_asyncs between wgmma.fence and
commit_group / wait_group 0, and stores D back, register by register.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from helpers.mma_matrices import random_matrix

SWIZZLE_FIELD = {0: 0, 128: 1, 64: 2, 32: 3}      # swizzle bytes -> the descriptor's bits 62-63
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
K_OF = {16: 16, 32: 8, 8: 32, 1: 256}              # element bits -> K of one wgmma
THREADS = 128


@dataclasses.dataclass
class Operand:
    """An operand's shared-memory layout: K-major or MN-major, swizzle bytes (0: none),
    leading and stride byte offsets."""
    mn_major: bool = False
    swizzle: int = 0
    lbo: int = 128
    sbo: int = 256


@dataclasses.dataclass
class Case:
    dtype: str
    atype: str
    btype: str
    n: int
    blocks: int = 1                   # k-blocks: K = blocks * K of one wgmma
    a: Operand | None = None          # None: A from registers
    b: Operand = dataclasses.field(default_factory=Operand)
    scale_d: int = 1
    scale_a: int = 1
    scale_b: int = 1
    satfinite: bool = False
    warpgroups: int = 1               # per CTA, each with an A of its own
    ctas: int = 2

    @property
    def k(self):
        return K_OF[BITS[self.atype]]

    def instruction(self) -> str:
        sat = ".satfinite" if self.satfinite else ""
        pop = ".and.popc" if self.atype == "b1" else ""
        return (f"wgmma.mma_async.sync.aligned.m64n{self.n}k{self.k}{sat}.{self.dtype}."
                f"{self.atype}.{self.btype}{pop}")

    def d_registers(self) -> int:
        return self.n // 4 if self.dtype == "f16" else self.n // 2

    def immediates(self) -> list[int]:
        if self.atype in ("s8", "u8", "b1"):
            return []
        imms = [self.scale_a, self.scale_b]
        if self.atype in ("f16", "bf16"):
            if self.a is not None:
                imms.append(int(self.a.mn_major))
            imms.append(int(self.b.mn_major))
        return imms


def phase(r, w):
    return (r // (8 // w)) % w


def element_offset(mn, k, op: Operand, bits: int):
    """Byte offset of element (mn, k) of a rows x K operand in its image (the unswizzled
    core-matrix position, with the swizzle's XOR on the 16-byte chunk)."""
    size = max(bits, 8) // 8
    t = 16 // size                          # elements per 16-byte chunk (b1: bytes)
    w = op.swizzle // 16
    if not op.mn_major:
        i, r, c, e = mn // 8, mn % 8, k // t, k % t
        if not w:
            return i * op.sbo + c * op.lbo + r * 16 + e * size
        assert (c < w).all(), "a swizzled K-major operand here is one atom wide along K"
        return i * op.sbo + r * 16 * w + 16 * (c ^ phase(r, w)) + e * size
    ki, r, c, e = k // 8, k % 8, mn // t, mn % t
    if not w:
        return c * op.sbo + ki * op.lbo + r * 16 + e * size
    return (c // w) * op.lbo + ki * op.sbo + r * 16 * w + 16 * ((c % w) ^ phase(r, w)) + e * size


def block_start(j: int, op: Operand) -> int:
    """How far k-block j's descriptor start is from the image's start."""
    if not op.mn_major:
        return 32 * j if op.swizzle else 2 * j * op.lbo
    return 2 * j * (op.sbo if op.swizzle else op.lbo)


def image(codes, op: Operand, bits: int) -> np.ndarray:
    """The bytes of a rows x K matrix of raw codes (uint64) laid out as `op` says."""
    rows, k = codes.shape
    if bits == 1:                         # b1: bytes of 8 bits, bit k%8 of byte k//8
        b = codes.reshape(rows, k // 8, 8).astype(np.uint8) << np.arange(8, dtype=np.uint8)
        codes, bits, k = b.sum(axis=2).astype(np.uint64), 8, k // 8
    size = bits // 8
    mn, kk = np.meshgrid(np.arange(rows), np.arange(k), indexing="ij")
    off = element_offset(mn, kk, op, bits)
    assert np.unique(off).size == off.size, "the layout puts two elements in one place"
    out = np.zeros(int(off.max()) + size, np.uint8)
    for byte in range(size):
        out[off + byte] = (codes >> np.uint64(8 * byte)) & np.uint64(0xFF)
    return out


def a_fragments(codes, atype: str) -> np.ndarray:
    """(128, 4) uint32 A registers of each thread for a 64 x K matrix of codes (the ISA's
    figures: warp w holds rows 16w..16w+15; g = lane/4, t = lane%4)."""
    regs = np.zeros((THREADS, 4), np.uint64)
    for tid in range(THREADS):
        w, g, t = tid // 32, tid % 32 // 4, tid % 4
        for i in range(4 * 32 // BITS[atype] if atype != "b1" else 128):
            if atype in ("f16", "bf16"):            # a0..a7, two per register
                row, col, bits = g + 8 * (i // 2 % 2), 2 * t + i % 2 + 8 * (i // 4), 16
            elif atype == "tf32":                   # a0..a3, one per register
                row, col, bits = g + 8 * (i % 2), t + 4 * (i // 2), 32
            elif atype == "b1":                     # 32 bits per register
                row, col, bits = g + 8 * (i // 32 % 2), 32 * t + i % 32 + 128 * (i // 64), 1
            else:                                   # 8-bit: a0..a15, four per register
                row, col, bits = g + 8 * (i // 4 % 2), 4 * t + i % 4 + 16 * (i // 8), 8
            per = 32 // bits
            regs[tid, i // per] |= codes[16 * w + row, col] << np.uint64(bits * (i % per))
    return regs.astype(np.uint32)


def d_position(tid: int, i: int):
    """(row, col) of accumulator element i of thread tid (f32/s32: register i; f16: half
    i % 2 of register i // 2)."""
    w, g, t = tid // 32, tid % 32 // 4, tid % 4
    return 16 * w + g + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * t + i % 2


def d_elements(values, n: int) -> np.ndarray:
    """A 64 x n matrix as (128, n/2) accumulator elements per thread."""
    out = np.zeros((THREADS, n // 2), values.dtype)
    for tid in range(THREADS):
        for i in range(n // 2):
            out[tid, i] = values[d_position(tid, i)]
    return out


def d_matrix(elements, n: int) -> np.ndarray:
    out = np.full((64, n), np.nan)
    for tid in range(THREADS):
        for i in range(n // 2):
            out[d_position(tid, i)] = elements[tid, i]
    return out


def operands(rng, case: Case):
    """Random A (ctas, wgs, 64, K) and B (ctas, K, N): (values, codes) each."""
    k = case.k * case.blocks
    a = random_matrix(rng, case.atype, (case.ctas, case.warpgroups, 64, k))
    b = random_matrix(rng, case.btype, (case.ctas, k, case.n))
    return a, b


def ptx(case: Case, a_bytes: int, b_bytes: int) -> str:
    """The kernel: one CTA of case.warpgroups warpgroups per product."""
    nreg, threads = case.d_registers(), THREADS * case.warpgroups
    lines = [".version 8.0", ".target sm_90a", ".address_size 64", "",
             ".visible .entry wg(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd,",
             "                   .param .u64 da, .param .u64 db, .param .u32 sd)",
             f".reqntid {threads}", "{",
             f"  .reg .b32 %d<{nreg}>;            // the accumulators D",
             "  .reg .b32 %a<4>;                // A's fragment (A from registers)",
             "  .reg .b32 %r<16>;", "  .reg .b64 %rd<24>;", "  .reg .pred %p<4>;",
             f"  .shared .align 1024 .b8 sa[{max(a_bytes, 16) * case.warpgroups}];  // A's images",
             f"  .shared .align 1024 .b8 sb[{b_bytes}];  // B's image",
             "  mov.u32 %r0, %tid.x;            // thread in the CTA",
             "  mov.u32 %r1, %ctaid.x;          // which product",
             "  ld.param.u64 %rd0, [pa];        // A's images (or fragments) in global memory",
             "  ld.param.u64 %rd1, [pb];        // B's images",
             f"  mul.wide.u32 %rd2, %r1, {b_bytes};   // this CTA's B image",
             "  add.u64 %rd1, %rd1, %rd2;"]
    lines += _copy("sb", "%rd1", b_bytes, threads, "B")
    if case.a is not None:
        total = a_bytes * case.warpgroups
        lines += [f"  mul.wide.u32 %rd2, %r1, {total};   // this CTA's A images",
                  "  add.u64 %rd0, %rd0, %rd2;"]
        lines += _copy("sa", "%rd0", total, threads, "A")
    else:
        lines += [f"  mad.lo.u32 %r2, %r1, {threads}, %r0;   // the global thread: its A fragment",
                  "  mul.wide.u32 %rd2, %r2, 16;     // 4 registers of 4 bytes",
                  "  add.u64 %rd0, %rd0, %rd2;",
                  "  ld.global.v4.b32 {%a0, %a1, %a2, %a3}, [%rd0];"]
    lines += ["  bar.sync 0;                     // the images are in shared memory",
              "  fence.proxy.async.shared::cta;  // ... and visible to the async proxy (wgmma)",
              "  mov.u32 %r3, sb;                // B's shared address",
              "  cvt.u64.u32 %rd3, %r3;",
              "  shr.u64 %rd3, %rd3, 4;          // start address >> 4",
              "  and.b64 %rd3, %rd3, 16383;      // in bits 0-13",
              "  ld.param.u64 %rd4, [db];        // LBO, SBO, base offset, swizzle",
              "  or.b64 %rd5, %rd3, %rd4;        // B's descriptor",
              "  shr.u32 %r4, %r0, 7;            // warpgroup in the CTA",
              f"  mul.lo.u32 %r4, %r4, {a_bytes};    // its A image",
              "  mov.u32 %r5, sa;",
              "  add.u32 %r5, %r5, %r4;          // A's shared address",
              "  cvt.u64.u32 %rd6, %r5;",
              "  shr.u64 %rd6, %rd6, 4;",
              "  and.b64 %rd6, %rd6, 16383;",
              "  ld.param.u64 %rd7, [da];",
              "  or.b64 %rd8, %rd6, %rd7;        // A's descriptor",
              "  ld.param.u64 %rd9, [pc];        // D's initial values",
              f"  mad.lo.u32 %r6, %r1, {threads}, %r0;   // the global thread",
              f"  mul.wide.u32 %rd10, %r6, {4 * nreg};",
              "  add.u64 %rd9, %rd9, %rd10;      // its accumulators"]
    lines += [f"  ld.global.b32 %d{i}, [%rd9+{4 * i}];" for i in range(nreg)]
    lines += ["  ld.param.u32 %r7, [sd];",
              "  setp.ne.u32 %p1, %r7, 0;        // scale-d: D = A*B + (scale-d ? D : 0)",
              "  wgmma.fence.sync.aligned;       // our register writes before the mma_asyncs"]
    lines += _mmas(case)
    lines += ["  wgmma.commit_group.sync.aligned;      // one group of all k-blocks",
              "  wgmma.wait_group.sync.aligned 0;      // ... complete: D may be read",
              "  ld.param.u64 %rd11, [pd];",
              "  add.u64 %rd11, %rd11, %rd10;"]
    lines += [f"  st.global.b32 [%rd11+{4 * i}], %d{i};" for i in range(nreg)]
    return "\n".join(lines + ["  ret;", "}", ""])


def _copy(buffer: str, src: str, nbytes: int, threads: int, what: str) -> list[str]:
    """Threads copy 16-byte chunks tid, tid + threads, ... of an image into `buffer`."""
    return [f"  mov.u32 %r8, %r0;                // {what}: chunk index i = tid",
            f"COPY_{what}:",
            f"  setp.ge.u32 %p0, %r8, {-(-nbytes // 16)};   // done past the last chunk",
            f"  @%p0 bra COPIED_{what};",
            "  mul.wide.u32 %rd12, %r8, 16;",
            f"  add.u64 %rd13, {src}, %rd12;",
            "  ld.global.v4.b32 {%r9, %r10, %r11, %r12}, [%rd13];",
            f"  mov.u32 %r13, {buffer};",
            "  mad.lo.u32 %r13, %r8, 16, %r13;",
            "  st.shared.v4.b32 [%r13], {%r9, %r10, %r11, %r12};",
            f"  add.u32 %r8, %r8, {threads};",
            f"  bra COPY_{what};",
            f"COPIED_{what}:"]


def _mmas(case: Case) -> list[str]:
    out = []
    dregs = "{" + ", ".join(f"%d{i}" for i in range(case.d_registers())) + "}"
    imms = "".join(f", {x}" for x in case.immediates())
    for j in range(case.blocks):
        a = "{%a0, %a1, %a2, %a3}"
        if case.a is not None:
            out.append(f"  add.u64 %rd14, %rd8, {block_start(j, case.a) >> 4};   // k-block {j} of A")
            a = "%rd14"
        out.append(f"  add.u64 %rd15, %rd5, {block_start(j, case.b) >> 4};   // k-block {j} of B")
        scale = "%p1" if j == 0 else "1"              # later k-blocks accumulate
        out.append(f"  {case.instruction()} {dregs}, {a}, %rd15, {scale}{imms};")
    return out


def descriptor_bits(op: Operand) -> int:
    """Bits 14-63 of a descriptor for `op` (start address 0; the kernel adds it)."""
    return ((op.lbo >> 4) << 16) | ((op.sbo >> 4) << 32) | (SWIZZLE_FIELD[op.swizzle] << 62)

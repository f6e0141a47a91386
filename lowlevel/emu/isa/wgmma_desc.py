"""wgmma's shared-memory matrix descriptors: the 64-bit format, the canonical layouts, and
the matrix a descriptor names, read from the CTA's shared memory.

The descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma, 9.7.15.5.1.2.2 in 9.x):

    bits  0-13  start address >> 4            bits 32-45  stride dimension byte offset >> 4
    bits 16-29  leading dimension byte offset >> 4
    bits 49-51  base offset                   bits 62-63  swizzle: 0 none (interleave),
                                                          1 128B, 2 64B, 3 32B

Every wgmma reads a 32-byte slice along K of each row of A (64 rows) and B (N rows): K
elements of its type (f16: 16). Shared memory holds them in core matrices of 8 rows of 16
bytes (T = 16 bytes / element size elements). The canonical layouts (PTX ISA, "Shared
Memory Matrix Layout" (9.7.15.5.1.2 in PTX ISA 9.x), its table of canonical layouts and its
strides: LBO is "not used" by swizzled K-major layouts and steps along MN between
swizzle-width groups in swizzled MN-major ones; CUTLASS writes the same layouts in
cute/atom/mma_traits_sm90_gmma.hpp), as byte offsets from the start address of element
(mn, k), mn = 8*mi + r, k = T*kc + e for K-major; k = 8*ki + r, mn = T*c + e for MN-major
(imm-trans 1, .f16/.bf16 only), W = swizzle width / 16 (2, 4, 8), c = W*mi + w:

    K-major,  no swizzle:  mi*SBO + kc*LBO + r*16 + e*size
    K-major,  swizzled:    mi*SBO + r*16W + kc*16 + e*size           (LBO is not used)
    MN-major, no swizzle:  c*SBO + ki*LBO + r*16 + e*size
    MN-major, swizzled:    mi*LBO + w*16 + ki*SBO + r*16W + e*size

A swizzled layout is then permuted by the address swizzle of its mode (PTX ISA, "Tensor
swizzling modes"; swizzle.py, which TMA uses too): the 16-byte chunk index, address bits
4.., is XORed with the row inside the pattern, bits 7.., on the shared address. The pattern
repeats every 256/512/1024 bytes; a pattern that does not start on that boundary needs the
base offset (pattern start >> 7) & 7, else 0 (PTX ISA, the descriptor's "base offset"
field). The swizzle is applied to absolute shared addresses, which is what the ISA's rule
makes the base offset stand for; a descriptor whose base offset disagrees with its start
address (neither (start >> 7) & 7 nor, for a start on the boundary, 0) is refused with a
launch fault (CUDA_ERROR_ILLEGAL_INSTRUCTION), as is a descriptor that differs between the
lanes of a warpgroup; one that names bytes outside the CTA's shared window is
CUDA_ERROR_ILLEGAL_ADDRESS. b1 rows are read as 32 bytes, bit k of a row in byte
k//8 at bit k%8.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from . import mma_shapes, swizzle
from .wgmma_shapes import ELEMENT_BITS

ROW_BYTES = 32                      # the K extent of every wgmma, in bytes
# the descriptor's swizzle field -> swizzle.py's (CUtensorMapSwizzle's) numbering
MODE = {0: swizzle.NONE, 1: swizzle.B128, 2: swizzle.B64, 3: swizzle.B32}
WIDTH = {swizzle.B32: 2, swizzle.B64: 4, swizzle.B128: 8}     # 16-byte chunks per row
_MASK14 = np.uint64(0x3FFF)


def fields(desc):
    """(start, leading byte offset, stride byte offset, base offset, swizzle.py mode) of
    descriptors `desc` (uint64 array), as int64 arrays."""
    d = np.asarray(desc, np.uint64)
    start = ((d & _MASK14) << np.uint64(4)).astype(np.int64)
    lbo = (((d >> np.uint64(16)) & _MASK14) << np.uint64(4)).astype(np.int64)
    sbo = (((d >> np.uint64(32)) & _MASK14) << np.uint64(4)).astype(np.int64)
    base = ((d >> np.uint64(49)) & np.uint64(7)).astype(np.int64)
    mode = np.vectorize(MODE.get, otypes=[np.int64])((d >> np.uint64(62)).astype(np.int64))
    return start, lbo, sbo, base, mode


def offsets(rows: int, size_bits: int, trans: bool, mode: int, lbo, sbo):
    """Byte offsets from the start address (groups, rows, k) of each element's first byte
    (b1: of each byte), for one swizzle mode; lbo, sbo: int64 arrays per warpgroup."""
    size = max(1, size_bits // 8)
    t = 16 // size                                  # elements per 16-byte chunk
    k = ROW_BYTES // size
    lbo, sbo = lbo[:, None, None], sbo[:, None, None]
    mn = np.arange(rows)[None, :, None]
    kk = np.arange(k)[None, None, :]
    if not trans:
        mi, r, kc, e = mn // 8, mn % 8, kk // t, kk % t
        if mode == swizzle.NONE:
            return mi * sbo + kc * lbo + r * 16 + e * size
        return mi * sbo + r * 16 * WIDTH[mode] + kc * 16 + e * size
    ki, r, c, e = kk // 8, kk % 8, mn // t, mn % t
    if mode == swizzle.NONE:
        return c * sbo + ki * lbo + r * 16 + e * size
    w, mi = c % WIDTH[mode], c // WIDTH[mode]
    return mi * lbo + w * 16 + ki * sbo + r * 16 * WIDTH[mode] + e * size


def _fault(C, why: str, iid: int, code: str = "CUDA_ERROR_ILLEGAL_INSTRUCTION") -> KernelFault:
    ins = C.ck.instructions[iid]
    return KernelFault(code,
                       f"{C.name}: {why}, PTX line {ins.line}: {ins.text}")


def uniform(C, values, what: str, iid: int):
    """The one value per warpgroup of `values` (groups, 128), or a fault naming `what`."""
    if (values != values[:, :1]).any():
        g = int(np.flatnonzero((values != values[:, :1]).any(axis=1))[0])
        raise _fault(C, f"{what} differs between the lanes of warpgroup {g} of the batch "
                        f"(it must be the same in all 128)", iid)
    return values[:, 0]


def _check_base_offset(C, start, base, mode, which: str, iid: int) -> None:
    repeat = swizzle.REPEAT_BYTES[mode]
    want = (start >> 7) & 7
    aligned = start % repeat == 0
    bad = (base != want) & ~(aligned & (base == 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise _fault(C, f"the {which} descriptor's base offset is {int(base[i])} but its start "
                        f"address {int(start[i]):#x} needs {int(want[i])} (PTX ISA: (start >> 7) & 7 "
                        f"when not aligned to the {repeat}-byte swizzle pattern)", iid)


def read_matrix(C, desc, first_lanes, rows: int, kind: str, trans: bool, which: str, iid: int,
                reads: list):
    """Every warpgroup's rows x K matrix (groups, rows, K) of exact values (float64/int64 as
    mma_shapes.elements gives them) named by its descriptor `desc` (uint64 per warpgroup);
    first_lanes: the batch lane of each warpgroup's first thread (racecheck sees the read
    as that thread's). Appends to `reads` the shared bytes read, (groups, bytes) indices
    into C.smem and their values, which must not change until the wait (wgmma_async.py)."""
    cta_base = C.cta_base[first_lanes]
    start, lbo, sbo, base, mode = fields(desc)
    size = max(1, ELEMENT_BITS[kind] // 8)
    addr = np.zeros((start.size, rows, ROW_BYTES // size), np.int64)
    for m in np.unique(mode):
        sel = mode == m
        if m != swizzle.NONE:
            _check_base_offset(C, start[sel], base[sel], int(m), which, iid)
        off = offsets(rows, ELEMENT_BITS[kind], trans, int(m), lbo[sel], sbo[sel])
        addr[sel] = swizzle.swizzle(start[sel][:, None, None] + off, int(m))
    top = int(addr.max()) + size
    if top > C.smem_window:
        raise _fault(C, f"the {which} matrix descriptor names shared bytes up to {top:#x}, past "
                        f"the block's shared window of {C.smem_window} bytes", iid,
                     "CUDA_ERROR_ILLEGAL_ADDRESS")
    idx = (cta_base[:, None, None] + addr)[..., None] + np.arange(size)
    if C.observers:
        C.notify("shared_access", False, idx.reshape(start.size, -1), 1, first_lanes, iid)
    raw = np.ascontiguousarray(C.smem[idx]).reshape(-1, ROW_BYTES)        # (groups * rows, 32)
    reads.append((idx.reshape(start.size, -1), raw.reshape(start.size, -1)))
    words = raw.view(np.uint32)
    vals = mma_shapes.elements([words[:, i] for i in range(ROW_BYTES // 4)], kind, raw.shape[0])
    return vals.reshape(start.size, rows, -1)

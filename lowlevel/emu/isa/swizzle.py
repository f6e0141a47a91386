"""Hopper's shared-memory swizzle: where byte `addr` of a tile really lives in shared memory.

TMA (cp.async.bulk.tensor) writes a tile in this layout and wgmma's matrix descriptors read it
back in the same one, so both call this one function. The PTX ISA ("Tensor swizzling modes")
describes it on 16-byte chunks: within each span of 32, 64 or 128 bytes, a chunk's index is
XORed with the index of the span's row, counted modulo the number of chunks in a span. In
address bits that is bits [4, 4+b) XORed with bits [7, 7+b), b = 1, 2, 3 for 32B, 64B, 128B;
the pattern repeats every 256, 512 or 1024 bytes, which is why swizzled tiles are aligned so.
"""
from __future__ import annotations

import numpy as np

# CUtensorMapSwizzle's numbering (wgmma's descriptor numbers the modes the other way round:
# 1 is 128B, 3 is 32B; wgmma_desc.py maps them)
NONE, B32, B64, B128 = 0, 1, 2, 3
SPAN_BYTES = {NONE: 0, B32: 32, B64: 64, B128: 128}
REPEAT_BYTES = {NONE: 16, B32: 256, B64: 512, B128: 1024}


def swizzle(addr, mode: int):
    """The swizzled shared-memory address of `addr` (an int or a numpy integer array)."""
    if mode == NONE:
        return addr
    bits = {B32: 1, B64: 2, B128: 3}[mode]
    mask = ((1 << bits) - 1) << 4
    if isinstance(addr, np.ndarray):
        return addr ^ ((addr >> 3) & addr.dtype.type(mask))
    return addr ^ ((addr >> 3) & mask)

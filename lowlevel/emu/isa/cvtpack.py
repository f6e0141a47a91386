"""cvt.pack.sat (sm_72+): two s32 values saturated to a narrow integer type and packed (the
arithmetic; cvt.py writes the instruction).

    cvt.pack.sat.{u16,s16}.s32 d, a, b
        d = sat(a) << 16 | sat(b)
    cvt.pack.sat.{u8,s8,u4,s4,u2,s2}.s32.b32 d, a, b, c
        d = c << 2N | sat(a) << N | sat(b), N the width of the type, cut to 32 bits

sat clamps to the type's range; a lands above b (the ISA's pseudo-code: td's bits N..2N-1
are ta's), so packing four bytes takes two of them, the second with the first as c.
"""
from __future__ import annotations

import numpy as np

from .registry import provide

WIDTHS = {"u16": 16, "s16": 16, "u8": 8, "s8": 8, "u4": 4, "s4": 4, "u2": 2, "s2": 2}
U32, I64 = np.uint32, np.int64


def saturate(x, width: int, signed: bool):
    """x (s32) clamped to the range of a `width`-bit integer, as its low `width` bits."""
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    return (np.clip(np.asarray(x, I64), lo, hi) & ((1 << width) - 1)).astype(U32)


def cvt_pack(width: int, signed: bool, a, b, c):
    ta, tb = saturate(a, width, signed), saturate(b, width, signed)
    packed = (ta << U32(width)) | tb
    if c is None:
        return packed
    return ((np.asarray(c, U32).astype(np.uint64) << np.uint64(2 * width)).astype(U32)) | packed


provide(_cvt_pack=cvt_pack)


__all__ = ["WIDTHS", "cvt_pack", "saturate"]

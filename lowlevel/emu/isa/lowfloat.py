"""The 8-bit floats (.e4m3, .e5m2) and tf32: the arithmetic of their cvt forms (cvt.py
writes the instructions), and the values mma reads.

    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32    d, a, b;   d .b16: a to the upper byte
    cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2  d, a;      a's upper half to the upper byte
    cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}            d, a;      a .b16; the upper byte to the upper half
    cvt.rna{.satfinite}.tf32.f32                   d, a;      d .b32 (sm_80; .satfinite: PTX 8.1)
    cvt.{rn,rz}{.relu}.tf32.f32                    d, a;      sm_90

The 8-bit forms need sm_90 with PTX 7.8, or sm_89 with PTX 8.1; ptxas takes them only with .rn, and to the 8-bit
types only with .satfinite (these are exactly the forms ptxas takes for sm_90).

Formats (PTX ISA, "Alternate floating point data formats"): e4m3 has a sign, 4 exponent
bits (bias 7) and 3 mantissa bits, no infinity, and one NaN per sign (S.1111.111), so its
largest value is 448 (S.1111.110); e5m2 is IEEE-like (5 exponent bits, bias 15, 2 mantissa
bits): infinities S.11111.00, NaNs S.11111.{01,10,11}, largest 57344. Both have subnormals.

Rounding: to nearest, ties to even, once, from the exact f32 / f16 value. .satfinite: a NaN
gives NaN (0x7F, the canonical NaN NVIDIA's conversions produce), and a magnitude above the
largest finite value (infinity too) gives that value with the sign kept. Widening to f16 is
exact (every e4m3 and e5m2 value is an f16 value); a NaN gives the canonical f16 NaN 0x7FFF.
.relu makes a negative result +0 (a NaN stays NaN; -0 stays -0, as half.py's .relu); with
.relu a tf32 NaN is 0x7FFFE000 (the canonical 0x7FFFFFFF cut to tf32's bits).
tf32: 10 mantissa bits in a .b32 whose low 13 bits are zero; .rna rounds ties away from
zero, .rn to even, .rz toward zero (never to infinity); .satfinite as above.
"""
from __future__ import annotations

import numpy as np

from .registry import provide

F64 = np.float64
# kind -> (exponent bits, mantissa bits, bias, largest finite value)
FORMATS = {"e4m3": (4, 3, 7, 448.0), "e5m2": (5, 2, 15, 57344.0)}
NAN8 = 0x7F
CANON_F16_NAN = 0x7FFF


def decode(bits, kind: str):
    """8-bit codes (any integer array) as float64 values."""
    ebits, mbits, bias, _ = FORMATS[kind]
    b = np.asarray(bits).astype(np.int64) & 0xFF
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> mbits) & ((1 << ebits) - 1)
    mant = (b & ((1 << mbits) - 1)).astype(F64)
    normal = (1.0 + mant / (1 << mbits)) * np.exp2(exp.astype(F64) - bias)
    sub = mant * 2.0 ** (1 - bias - mbits)
    val = sign * np.where(exp == 0, sub, normal)
    top = exp == (1 << ebits) - 1
    if kind == "e4m3":
        return np.where(top & (mant == 7), np.nan, val)
    return np.where(top, np.where(mant == 0, sign * np.inf, np.nan), val)


def encode(x, kind: str, relu: bool):
    """float64 values to 8-bit codes (uint8): round to nearest even, .satfinite."""
    ebits, mbits, bias, top = FORMATS[kind]
    x = np.asarray(x, F64)
    nan = np.isnan(x)
    if relu:
        x = np.where(x < 0, 0.0, x)
    neg = np.signbit(x) & ~nan
    a = np.minimum(np.abs(np.where(nan, 0.0, x)), top)      # .satfinite (inf too)
    emin = 1 - bias
    # the unit in the last place of a's binade (the subnormal one below 2^emin)
    _, e = np.frexp(a)
    quantum = np.exp2(np.maximum(e.astype(F64) - 1, emin) - mbits)
    r = np.round(a / quantum) * quantum          # a / quantum is exact; np.round ties to even
    _, er = np.frexp(r)
    er = np.maximum(er.astype(np.int64) - 1, emin)
    subnormal = r < 2.0 ** emin
    field = np.where(subnormal, 0, er + bias)
    mant = np.where(subnormal, r / 2.0 ** (emin - mbits), (r / np.exp2(er.astype(F64)) - 1) * (1 << mbits))
    code = (field << mbits) | mant.astype(np.int64)
    code = np.where(neg, code | 0x80, code)
    return np.where(nan, NAN8, code).astype(np.uint8)


def f8x2_from_f32(a, b, kind, relu):
    """cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b: a to the upper byte, b to the lower."""
    hi = encode(np.asarray(a, np.float32).astype(F64), kind, relu).astype(np.uint16)
    lo = encode(np.asarray(b, np.float32).astype(F64), kind, relu).astype(np.uint16)
    return (hi << np.uint16(8)) | lo


def f8x2_from_f16x2(x, kind, relu):
    """cvt.rn.satfinite.{e4m3x2,e5m2x2}.f16x2 d, a: each half to the byte of its place."""
    u = np.asarray(x, np.uint32)
    halves = [((u >> np.uint32(s)) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16) for s in (16, 0)]
    hi, lo = (encode(h.astype(F64), kind, relu).astype(np.uint16) for h in halves)
    return (hi << np.uint16(8)) | lo


def f16x2_from_f8x2(x, kind, relu):
    """cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a: each byte to the half of its place (exact)."""
    u = np.asarray(x, np.uint16)
    out = []
    for shift in (8, 0):
        v = decode(u >> np.uint16(shift), kind)
        if relu:
            v = np.where(v < 0, 0.0, v)
        h = v.astype(np.float16).view(np.uint16)
        out.append(np.where(np.isnan(v), CANON_F16_NAN, h).astype(np.uint32))
    return (out[0] << np.uint32(16)) | out[1]


TF32_MAX = np.uint32(0x7F7FE000)


def tf32_from_f32(x, mode: str, relu: bool, satfinite: bool):
    """cvt.{rna,rn,rz}.tf32.f32 on the f32 bits: the result's low 13 bits are zero."""
    u = np.asarray(x, np.float32).view(np.uint32)
    mag = u & np.uint32(0x7FFFFFFF)
    nan = mag > np.uint32(0x7F800000)
    low = mag & np.uint32(0x1FFF)
    if mode == "rna":            # adding half the dropped unit carries into the kept bits
        up = low >= np.uint32(0x1000)
    elif mode == "rn":
        odd = (mag >> np.uint32(13)) & np.uint32(1)
        up = (low > np.uint32(0x1000)) | ((low == np.uint32(0x1000)) & (odd == 1))
    else:                        # rz
        up = np.zeros_like(nan)
    inf = mag == np.uint32(0x7F800000)
    r = (mag & np.uint32(0xFFFFE000)) + np.where(up & ~inf, np.uint32(0x2000), np.uint32(0))
    if satfinite:
        r = np.minimum(r, TF32_MAX)
    out = r | (u & np.uint32(0x80000000))
    if relu:
        negative = (out >> np.uint32(31) == 1) & ((out & np.uint32(0x7FFFFFFF)) != 0)
        out = np.where(negative, np.uint32(0), out)
        return np.where(nan, np.uint32(0x7FFFE000), out).astype(np.uint32)   # canonical, in tf32
    # a NaN stays a NaN, made quiet, its payload cut to the kept bits
    return np.where(nan, (u & np.uint32(0xFFFFE000)) | np.uint32(0x00400000), out).astype(np.uint32)


provide(_f8x2_from_f32=f8x2_from_f32, _f8x2_from_f16x2=f8x2_from_f16x2,
        _f16x2_from_f8x2=f16x2_from_f8x2, _tf32_from_f32=tf32_from_f32)

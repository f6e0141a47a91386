"""Forms of min/max and lop3 the base families leave out (registered as the registry's
modifier forms, so arith.py, simd.py, half.py and bits.py keep theirs):

    min/max.relu.{s32,s16x2}       (sm_90) the min/max (of each half of a pair), then 0 if
                                   negative
    min/max{.ftz}{.NaN}.xorsign.abs.{f16,f16x2,bf16,bf16x2}   (sm_86+) the min/max of |a|
                                   and |b| with the sign bit sign(a) XOR sign(b); NaN rules
                                   as plain min/max (one NaN: the other operand; both, or
                                   either with .NaN: the canonical NaN 0x7FFF, no sign set)
    lop3.{and,or}.b32 d|p, a, b, c, immLut, q
                                   d as lop3.b32 (or the `_` sink); p = (d != 0) BoolOp q

Half values are compared on their bits: for non-NaN magnitudes (sign bit clear) the order
of the 15 low bits is the order of the values, f16 and bf16 alike.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Imm, PredPair, Reg
from .operands import Mods, operands
from .registry import BOOLOP, INT_RELU, XORSIGN, provide, register

U16, U32, I16, I32 = np.uint16, np.uint32, np.int16, np.int32
SIGN, MAG, CANON_NAN = 0x8000, 0x7FFF, 0x7FFF
INF = {"f16": 0x7C00, "bf16": 0x7F80}
SUBNORMAL_BELOW = 0x0400                    # f16 magnitudes under this are subnormal (or 0)


def int_relu(op: str, pair: bool, a, b):
    """min/max.relu: a, b as s32, or (pair) u32 words of two s16."""
    fn = np.minimum if op == "min" else np.maximum
    if not pair:
        return np.maximum(fn(np.asarray(a, I32), np.asarray(b, I32)), I32(0))
    a, b = np.asarray(a, U32), np.asarray(b, U32)
    out = np.zeros(np.broadcast(a, b).shape, U32)
    for shift in (0, 16):
        x = ((a >> U32(shift)) & U32(0xFFFF)).astype(U16).view(I16)
        y = ((b >> U32(shift)) & U32(0xFFFF)).astype(U16).view(I16)
        r = np.maximum(fn(x, y), I16(0)).view(U16).astype(U32)
        out |= r << U32(shift)
    return out if out.ndim else out.reshape(-1)[0]


def xorsign_half(op: str, kind: str, ftz: bool, nan: bool, a, b):
    """min/max.xorsign.abs on the raw 16-bit values a, b (uint32 arrays, low 16 bits)."""
    a, b = np.asarray(a, U32) & U32(0xFFFF), np.asarray(b, U32) & U32(0xFFFF)
    sign = (a ^ b) & U32(SIGN)
    ma, mb = a & U32(MAG), b & U32(MAG)
    if ftz:                                 # .ftz (f16 only): subnormal inputs are zeros
        ma = np.where(ma < U32(SUBNORMAL_BELOW), U32(0), ma)
        mb = np.where(mb < U32(SUBNORMAL_BELOW), U32(0), mb)
    na, nb = ma > U32(INF[kind]), mb > U32(INF[kind])
    pick = np.minimum(ma, mb) if op == "min" else np.maximum(ma, mb)
    r = np.where(na, mb, np.where(nb, ma, pick)) | sign
    is_nan = (na & nb) | ((na | nb) & nan)
    return np.where(is_nan, U32(CANON_NAN), r).astype(U32)


def xorsign(op: str, kind: str, pair: bool, ftz: bool, nan: bool, a, b):
    if not pair:
        return xorsign_half(op, kind, ftz, nan, a, b).astype(U16)
    a, b = np.asarray(a, U32), np.asarray(b, U32)
    lo = xorsign_half(op, kind, ftz, nan, a, b)
    hi = xorsign_half(op, kind, ftz, nan, a >> U32(16), b >> U32(16))
    return (lo | (hi << U32(16))).astype(U32)


def lut3(lut: int, a, b, c):
    """lop3's function of each bit of a, b, c: bit i of `lut` for a = bit 2 of i, b = bit 1,
    c = bit 0 (the ISA's 0xF0, 0xCC, 0xAA construction)."""
    a, b, c = (np.asarray(x, U32) for x in (a, b, c))
    d = np.zeros(np.broadcast(a, b, c).shape, U32)
    for i in range(8):
        if lut >> i & 1:
            d |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return d


def lop3_bool(lut: int, boolop: str, a, b, c, q):
    d = lut3(lut, a, b, c)
    t = d != 0
    return d, (t & q) if boolop == "and" else (t | q)


provide(_int_relu=int_relu, _xorsign=xorsign, _lop3_bool=lop3_bool)


def emit_int_relu(g, ins):
    m = Mods(ins)
    m.take("relu")
    t = m.take("s32", "s16x2")              # s16x2 is no register type: taken by name
    m.done()
    d, a, b = operands(ins, 3)
    rt = "s32" if t == "s32" else "u32"
    expr = (f"_int_relu({ins.opcode!r}, {t == 's16x2'}, {g.read(ins, a, rt)}, "
            f"{g.read(ins, b, rt)})")
    g.write(ins, d, expr, rt, g.guard(ins))


def emit_xorsign(g, ins):
    m = Mods(ins)
    m.take("xorsign")
    if not m.take("abs"):
        raise PtxError(ins.line, f".xorsign needs .abs: {ins.text}")
    ftz, nan = bool(m.take("ftz")), bool(m.take("NaN"))
    t = m.one_type({"f16", "f16x2", "bf16", "bf16x2"})
    m.done()
    kind, pair = t.removesuffix("x2"), t.endswith("x2")
    if ftz and kind == "bf16":
        raise PtxError(ins.line, f".ftz is not defined for {ins.opcode}.{t}: {ins.text}")
    d, a, b = operands(ins, 3)
    rt = "u32" if pair else "u16"
    expr = (f"_xorsign({ins.opcode!r}, {kind!r}, {pair}, {ftz}, {nan}, "
            f"{g.read(ins, a, rt)}, {g.read(ins, b, rt)})")
    g.write(ins, d, expr, rt, g.guard(ins))


def emit_lop3_bool(g, ins):
    m = Mods(ins)
    boolop = m.take("and", "or")
    m.one_type({"b32"})
    m.done()
    dp, a, b, c, lut, q = operands(ins, 6)
    if not isinstance(dp, PredPair) or dp.q is None:
        raise PtxError(ins.line, f"lop3.{boolop} takes d|p as its destination: {ins.text}")
    if not isinstance(lut, Imm) or lut.is_float or not 0 <= lut.value <= 255:
        raise PtxError(ins.line, f"lop3 needs an 8-bit immediate truth table: {ins.text}")
    d = None if isinstance(dp.p, Reg) and dp.p.name == "_" else dp.p     # the `_` sink
    guard = g.guard(ins)
    r = g.fresh()
    xs = ", ".join(g.read(ins, o, "u32") for o in (a, b, c))
    g.emit(f"{r} = _lop3_bool({lut.value}, {boolop!r}, {xs}, {g.read(ins, q, 'pred')})")
    g.write(ins, d, f"{r}[0]", "u32", guard)
    g.write(ins, dp.q, f"{r}[1]", "pred", guard)


register(emit_int_relu, "min", "max", forms=(INT_RELU,))
register(emit_xorsign, "min", "max", forms=(XORSIGN,))
register(emit_lop3_bool, "lop3", forms=(BOOLOP,))

__all__ = ["emit_int_relu", "emit_lop3_bool", "emit_xorsign", "int_relu", "lop3_bool", "xorsign"]

"""min and max, every form:

    min/max{.ftz}{.NaN}.{f32,f64}, on integers     emit_minmax (a NaN loses to a number,
                                                   -0 below +0; with .NaN a NaN wins)
    min/max{.ftz}{.NaN}{.relu}.{f16,f16x2,bf16,bf16x2}   emit_minmax_half (half.py's _hop)
    min/max.relu.{s32,s16x2} (sm_90)               emit_int_relu: the min/max (of each
                                                   half), then 0 if negative
    min/max{.ftz}{.NaN}.xorsign.abs.{f16,f16x2,bf16,bf16x2} (sm_86+)
                                                   emit_xorsign: the min/max of |a| and |b|
                                                   with the sign bit sign(a) XOR sign(b)
    min/max.{s16x2,u16x2} (sm_90)                  emit_minmax_16x2 (simd.py's lanes)

xorsign's NaN rules are plain min/max's (one NaN: the other operand; both, or either with
.NaN: the canonical NaN 0x7FFF, no sign set); magnitudes compare on their 15 low bits.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction
from . import simd
from .half import INF, MAG, SIGN, SUBNORMAL_BELOW, half_modifiers, refuse_approx, write_hop
from .operands import FLOAT_TYPES, INT_TYPES, Mods, operands, unsupported
from .registry import ANY, HALF_FORMS, INT_RELU, XORSIGN, family, provide

U16, U32, I16, I32 = np.uint16, np.uint32, np.int16, np.int32


def emit_minmax(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES)
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    kind = TYPES[t][1]
    if kind == "f":
        ftz = m.take("ftz")
        nan = m.take("NaN")
        m.done()
        if t == "f64" and ftz:
            raise unsupported(ins, ".ftz on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        if nan:
            fn = "_np.minimum" if ins.opcode == "min" else "_np.maximum"
        else:
            fn = "_fmin" if ins.opcode == "min" else "_fmax"
        g.write(ins, d, f"{fn}({x}, {y})", t, guard)
        return
    if m.take("relu"):
        raise unsupported(ins, ".relu")
    m.done()
    fn = "_np.minimum" if ins.opcode == "min" else "_np.maximum"
    g.write(ins, d, f"{fn}({g.read(ins, a, t)}, {g.read(ins, b, t)})", t, guard)


def emit_minmax_half(g, ins) -> None:
    """min/max on .f16/.f16x2/.bf16/.bf16x2 (.ftz on f16, .NaN, .relu)."""
    hm = half_modifiers(ins)
    refuse_approx(ins, hm)
    write_hop(g, ins, hm, ins.opcode + (".NaN" if hm.nan else ""), 2)


# --- .relu on s32 and s16x2 -------------------------------------------------------------

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


provide(_int_relu=int_relu)


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


# --- .xorsign.abs on the half types ---------------------------------------------------

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
    return np.where(is_nan, U32(0x7FFF), r).astype(U32)


def xorsign(op: str, kind: str, pair: bool, ftz: bool, nan: bool, a, b):
    if not pair:
        return xorsign_half(op, kind, ftz, nan, a, b).astype(U16)
    a, b = np.asarray(a, U32), np.asarray(b, U32)
    lo = xorsign_half(op, kind, ftz, nan, a, b)
    hi = xorsign_half(op, kind, ftz, nan, a >> U32(16), b >> U32(16))
    return (lo | (hi << U32(16))).astype(U32)


provide(_xorsign=xorsign)


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


def emit_minmax_16x2(g, ins) -> None:
    """min/max.{s16x2,u16x2}: each half-word lane alone."""
    simd.write_packed16(g, ins)


FAMILY = family("minmax", __name__)
FAMILY.declare("min", "max", emit={ANY: emit_minmax, **dict.fromkeys(HALF_FORMS, emit_minmax_half),
                                   "i16x2": emit_minmax_16x2, INT_RELU: emit_int_relu, XORSIGN: emit_xorsign})

"""Integer and floating-point arithmetic: add sub mul mad fma div rem, the unary
operations (abs neg not cnot sqrt rcp rsqrt ex2 lg2 sin cos tanh), min max (and
min/max.relu on s32 and s16x2), and or xor, shl shr, copysign, testp.

This module holds the rows of these opcodes (at the end), every form included: the half
types are written by half.py's emitters, add.cc/sub.cc/mad.cc by carry.py's, add/min/max
on s16x2/u16x2 by simd.py's, min/max.xorsign.abs by half.py's."""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction, Reg
from . import carry, fma32, half, numerics, simd
from .operands import (
    BIT_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    ROUND_F,
    Mods,
    operands,
    unsupported,
    view_name,
)
from .registry import ANY, CARRY, HALF_FORMS, INT_RELU, SFU, TYPED, XORSIGN, family, provide

U16, U32, I16, I32 = np.uint16, np.uint32, np.int16, np.int32


def emit_int_or_float_binary(g, ins: Instruction) -> None:
    """add, sub, mul (lo/hi/wide for integers; rounding/ftz/sat for floats)."""
    m = Mods(ins)
    op = ins.opcode
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES | ({"b16", "b32", "b64"} if op != "mul" else set()))
    size, kind = TYPES[t]
    if kind == "f":
        rnd = m.take(*ROUND_F) or "rn"
        ftz = m.take("ftz")
        sat = m.take("sat")
        m.done()
        if t == "f64" and (ftz or sat):
            raise unsupported(ins, ".ftz/.sat on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        if rnd == "rn":
            expr = f"({x} {sym} {y})"
        elif t == "f32":
            expr = f"_f32_dir({op!r}, {x}, {y}, {rnd!r})"
        else:
            expr = f"_f64_dir({op!r}, {x}, {y}, {rnd!r})"
        if ftz:
            expr = f"_flush({expr})"
        if sat:
            expr = f"_satf({expr})"
        g.write(ins, d, expr, t, guard)
        return
    # integers: two's complement add/sub/mul.lo are the same on raw unsigned bits
    if op == "mul":
        mode = m.take("lo", "hi", "wide")
        if mode is None:
            raise PtxError(ins.line, f"mul on integers needs .lo, .hi or .wide: {ins.text}")
        m.done()
        _emit_mul(g, ins, mode, t, d, a, b, None, guard)
        return
    sat = m.take("sat")
    if m.take("cc"):
        raise unsupported(ins, "carry (.cc)")
    m.done()
    sym = "+" if op == "add" else "-"
    if sat:
        if t != "s32":
            raise PtxError(ins.line, f".sat is only for .s32: {ins.text}")
        x, y = g.read(ins, a, "s32"), g.read(ins, b, "s32")
        expr = f"_clip({x}.astype(_I64) {sym} {y}.astype(_I64), -2147483648, 2147483647).astype(_I32)"
        g.write(ins, d, expr, "s32", guard)
        return
    ut = f"u{size * 8}"
    g.write(ins, d, f"({g.read(ins, a, ut)} {sym} {g.read(ins, b, ut)})", ut, guard)


def _emit_mul(g, ins, mode, t, d, a, b, c, guard):
    """mul/mad .lo .hi .wide; c is the addend operand for mad (or None)."""
    size, kind = TYPES[t]
    bits = size * 8
    if mode == "lo":
        ut = f"u{bits}"
        expr = f"({g.read(ins, a, ut)} * {g.read(ins, b, ut)})"
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, ut)})"
        g.write(ins, d, expr, ut, guard)
    elif mode == "wide":
        if size == 8:
            raise PtxError(ins.line, f".wide is not defined for 64-bit types: {ins.text}")
        wt = f"{kind}{bits * 2}"
        wview = view_name(wt)
        expr = f"({g.read(ins, a, t)}.astype({wview}) * {g.read(ins, b, t)}.astype({wview}))"
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, wt)})"
        g.write(ins, d, expr, wt, guard)
    else:  # hi
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if size == 8:
            expr = f"_mulhi_s64({x}, {y})" if kind == "s" else f"_mulhi_u64({x}, {y})"
        else:
            wide = "_I64" if kind == "s" else "_U64"
            expr = (f"(({x}.astype({wide}) * {y}.astype({wide})) >> {wide}({bits}))"
                    f".astype({view_name(t)})")
        if c is not None:
            expr = f"({expr} + {g.read(ins, c, t)})"
        g.write(ins, d, expr, t, guard)


def emit_mad(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES)
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    if TYPES[t][1] == "f":
        _emit_fma(g, ins, m, t, d, a, b, c, guard)
        return
    mode = m.take("lo", "hi", "wide")
    if mode is None:
        raise PtxError(ins.line, f"mad on integers needs .lo, .hi or .wide: {ins.text}")
    if m.take("sat"):
        raise unsupported(ins, ".sat")
    if m.take("cc"):
        raise unsupported(ins, "carry (.cc)")
    m.done()
    _emit_mul(g, ins, mode, t, d, a, b, c, guard)


def emit_fma(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(FLOAT_TYPES)
    d, a, b, c = operands(ins, 4)
    _emit_fma(g, ins, m, t, d, a, b, c, g.guard(ins))


def _emit_fma(g, ins, m, t, d, a, b, c, guard):
    rnd = m.take(*ROUND_F) or "rn"
    ftz = m.take("ftz")
    sat = m.take("sat")
    m.done()
    if t == "f64" and (ftz or sat):
        raise unsupported(ins, ".ftz/.sat on f64")
    if t == "f32" and rnd == "rn" and not (ftz or sat) and ins.opcode == "fma" \
            and guard is None and isinstance(d, Reg):
        fma32.queue(g, ins, d, a, b, c)        # sgemm's inner loop: one call per run (fma32.py)
        return
    fma32.flush(g)                             # anything else comes after the queued ones
    x, y, z = (g.read(ins, o, t) for o in (a, b, c))
    if ftz:
        x, y, z = f"_flush({x})", f"_flush({y})", f"_flush({z})"
    expr = f"_fma_f32({x}, {y}, {z}, {rnd!r})" if t == "f32" else f"_fma_f64({x}, {y}, {z}, {rnd!r})"
    if ftz:
        expr = f"_flush({expr})"
    if sat:
        expr = f"_satf({expr})"
    g.write(ins, d, expr, t, guard)


def emit_div_rem(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES)
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    if kind == "f":
        if ins.opcode == "rem":
            raise unsupported(ins, "rem on floats")
        mode = m.take("approx", "full", "rn", "rz", "rm", "rp")
        ftz = m.take("ftz")
        m.done()
        if mode is None and t == "f64":
            raise PtxError(ins.line, f"div.f64 needs a rounding modifier: {ins.text}")
        if t == "f64" and ftz:
            raise unsupported(ins, ".ftz on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        # .approx and .full are within 2 ulp; the correctly rounded quotient satisfies that.
        expr = f"_div_dir({x}, {y}, {mode!r})" if mode in ("rz", "rm", "rp") else f"({x} / {y})"
        if ftz:
            expr = f"_flush({expr})"
        g.write(ins, d, expr, t, guard)
        return
    m.done()
    x, y = g.read(ins, a, t), g.read(ins, b, t)
    fn = {("div", "u"): "_udiv", ("div", "s"): "_sdiv",
          ("rem", "u"): "_urem", ("rem", "s"): "_srem"}[(ins.opcode, kind)]
    g.write(ins, d, f"{fn}({x}, {y})", t, guard)


def emit_unary(g, ins: Instruction) -> None:
    """abs, neg, not, cnot, and the float unary functions."""
    m = Mods(ins)
    op = ins.opcode
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    if op in ("not", "cnot"):
        t = m.one_type(BIT_TYPES | {"pred"} | (INT_TYPES if op == "cnot" else set()))
        m.done()
        if t == "pred":
            if op == "cnot":
                raise PtxError(ins.line, f"cnot has no .pred form: {ins.text}")
            g.write(ins, d, f"(~{g.read(ins, a, 'pred')})", "pred", guard)
            return
        ut = f"u{TYPES[t][0] * 8}"
        x = g.read(ins, a, ut)
        if op == "not":
            g.write(ins, d, f"(~{x})", ut, guard)
        else:
            g.write(ins, d, f"({x} == 0).astype({view_name(ut)})", ut, guard)
        return
    t = m.one_type(INT_TYPES | FLOAT_TYPES if op in ("abs", "neg") else FLOAT_TYPES)
    size, kind = TYPES[t]
    bits = size * 8
    if kind != "f":
        m.done()
        if op == "abs":
            g.write(ins, d, f"_abs({g.read(ins, a, t)})", t, guard)
        else:
            ut = f"u{bits}"
            g.write(ins, d, f"({g.const(numerics.UINT[size](0))} - {g.read(ins, a, ut)})", ut, guard)
        return
    ftz = m.take("ftz")
    if t == "f64" and ftz and not (op in ("rcp", "rsqrt") and "approx" in ins.mods):
        raise unsupported(ins, ".ftz on f64")
    x = g.read(ins, a, t)
    flush = "_flush64" if t == "f64" else "_flush"
    if ftz:
        x = f"{flush}({x})"
    ut = f"u{bits}"
    sign = g.const(numerics.UINT[size](1 << (bits - 1)))
    if op in ("abs", "neg"):
        m.done()
        raw = f"({x}).view(_U{bits})"
        expr = f"({raw} & ~{sign})" if op == "abs" else f"({raw} ^ {sign})"
        g.write(ins, d, expr, ut, guard)
        return
    approx = m.take("approx")
    rnd = m.take(*ROUND_F)
    m.done()
    if rnd in ("rz", "rm", "rp") and op not in ("sqrt", "rcp"):
        raise PtxError(ins.line, f"{op} takes no rounding modifier: {ins.text}")
    if op in ("sqrt", "rcp") and not (approx or rnd):
        raise PtxError(ins.line, f"{op} needs .approx or a rounding modifier: {ins.text}")
    if op in ("rsqrt", "ex2", "lg2", "sin", "cos", "tanh") and not approx:
        raise PtxError(ins.line, f"{op} needs .approx: {ins.text}")
    if op in ("ex2", "lg2", "sin", "cos", "tanh") and t != "f32":
        raise unsupported(ins, f"{op} on .{t}")
    fdt = f"_F{bits}"
    # The approximations are computed in f64 and rounded once: within 0.5 ulp of f32
    # (f64 for rcp/rsqrt.approx.f64), inside every bound the ISA documents for them (e.g.
    # ex2 2 ulp, lg2/sin/cos 2^-22.x absolute, rsqrt 2^-22.9 relative, tanh 2^-11).
    if op == "sqrt":
        expr = f"_sqrt_dir({x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"_sqrt({x})"
    elif op == "rcp":
        one = g.const(numerics.FLOAT[size](1))
        expr = f"_div_dir({one}, {x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"({one} / {x})"
    elif op == "rsqrt":
        expr = f"(1.0 / _sqrt({x}.astype(_F64))).astype({fdt})" if t == "f32" else \
            f"({g.const(np.float64(1))} / _sqrt({x}))"
    else:
        fn = {"ex2": "_exp2", "lg2": "_log2", "sin": "_sin", "cos": "_cos", "tanh": "_tanh"}[op]
        expr = f"{fn}({x}.astype(_F64)).astype(_F32)"
    if ftz:
        expr = f"{flush}({expr})"
    g.write(ins, d, expr, t, guard)


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


def emit_logic(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(BIT_TYPES | {"pred"})
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    sym = {"and": "&", "or": "|", "xor": "^"}[ins.opcode]
    ut = "pred" if t == "pred" else f"u{TYPES[t][0] * 8}"
    g.write(ins, d, f"({g.read(ins, a, ut)} {sym} {g.read(ins, b, ut)})", ut, guard)


def emit_shift(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(BIT_TYPES | INT_TYPES)
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    bits = size * 8
    if ins.opcode == "shl" or kind != "s":
        t = f"u{bits}"            # shl and unsigned/bit shr: logical on raw bits
    x = g.read(ins, a, t)
    n = g.read(ins, b, "u32")
    fn = "_shl" if ins.opcode == "shl" else "_shr"
    g.write(ins, d, f"{fn}({x}, {n}, {bits})", t, guard)


# --- copysign, testp ---------------------------------------------------------------------

def emit_copysign(g, ins):
    m = Mods(ins)
    t = m.one_type(FLOAT_TYPES)
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    ut = _bits_type(t)
    bits = TYPES[t][0] * 8
    sign = g.const(numerics.UINT[bits // 8](1 << (bits - 1)))
    expr = f"(({g.read(ins, a, ut)} & {sign}) | ({g.read(ins, b, ut)} & ~{sign}))"
    g.write(ins, d, expr, ut, guard)


_TESTP = {
    "finite": "_np.isfinite({x})",
    "infinite": "_np.isinf({x})",
    "number": "~_isnan({x})",
    "notanumber": "_isnan({x})",
    "normal": "(_np.isfinite({x}) & (_abs({x}) >= {tiny}))",
    "subnormal": "(({x} != 0) & (_abs({x}) < {tiny}))",
}


def emit_testp(g, ins):
    m = Mods(ins)
    op = m.take(*_TESTP)
    t = m.one_type(FLOAT_TYPES)
    m.done()
    if op is None:
        raise PtxError(ins.line, f"testp needs one of {', '.join('.' + k for k in _TESTP)}: {ins.text}")
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    dt = numerics.FLOAT[TYPES[t][0]]
    tiny = g.const(dt(np.finfo(dt).tiny))
    x = g.read(ins, a, t)
    g.write(ins, d, _TESTP[op].format(x=x, tiny=tiny), "pred", guard)


def _bits_type(t: str) -> str:
    return f"u{TYPES[t][0] * 8}"


# --- min/max.relu on s32 and s16x2 (sm_90): the min/max (of each half), then 0 if negative --

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


# --- the rows: every form of these opcodes, wherever its emitter is written ----------------
FAMILY = family("arith", __name__)
_HALF = dict.fromkeys(HALF_FORMS, half.emit_arith)
FAMILY.declare("add", emit={ANY: emit_int_or_float_binary, **_HALF, CARRY: carry.emit_carry,
                            "i16x2": simd.emit_packed16})
FAMILY.declare("sub", emit={ANY: emit_int_or_float_binary, **_HALF, CARRY: carry.emit_carry})
FAMILY.declare("mul", emit={ANY: emit_int_or_float_binary, **_HALF})
FAMILY.declare("mad", emit={ANY: emit_mad, CARRY: carry.emit_carry})
FAMILY.declare("fma", emit={ANY: emit_fma, **_HALF})
FAMILY.declare("div", emit=emit_div_rem, pipe=lambda ins: SFU if "approx" in ins.mods else TYPED)
FAMILY.declare("rem", emit=emit_div_rem)
FAMILY.declare("abs", "neg", emit={ANY: emit_unary, **_HALF})
FAMILY.declare("not", "cnot", emit=emit_unary)
FAMILY.declare("sqrt", "rcp", "rsqrt", "lg2", "sin", "cos", emit=emit_unary, pipe=SFU)
FAMILY.declare("ex2", "tanh", emit={ANY: emit_unary, **_HALF}, pipe=SFU)
FAMILY.declare("min", "max", emit={ANY: emit_minmax, **_HALF, "i16x2": simd.emit_packed16,
                                   INT_RELU: emit_int_relu, XORSIGN: half.emit_xorsign})
FAMILY.declare("and", "or", "xor", emit=emit_logic)
FAMILY.declare("shl", "shr", emit=emit_shift)
FAMILY.declare("copysign", emit=emit_copysign)
FAMILY.declare("testp", emit=emit_testp)

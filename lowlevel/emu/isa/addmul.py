"""add sub mul mad fma, and the carry chain addc subc madc: every form of these opcodes.

    add sub mul on integers and floats            emit_int_or_float_binary (.lo/.hi/.wide,
                                                  .sat on s32; rounding, .ftz, .sat)
    mad (integers .lo/.hi/.wide; floats as fma)   emit_mad
    fma on f32/f64                                emit_fma (fma.rn.f32 runs in batches,
                                                  fma32.py: sgemm's inner loop)
    add sub mul fma on .f16/.f16x2/.bf16/.bf16x2  emit_half (half.py's _hop: exact, one
                                                  rounding)
    add.cc sub.cc mad.cc, addc subc madc          emit_carry (the carry flag: carry.py)
    add.{s16x2,u16x2} (sm_90)                     emit_add_16x2 (simd.py's lanes)
"""
from __future__ import annotations

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction, Reg
from . import fma32, simd
from .carry import cc_register
from .half import half_modifiers, refuse_approx, write_hop
from .operands import FLOAT_TYPES, INT_TYPES, ROUND_F, Mods, operands, unsupported, view_name
from .registry import ANY, CARRY, HALF_FORMS, family


def emit_int_or_float_binary(g, ins: Instruction) -> None:
    """add, sub, mul (lo/hi/wide for integers; rounding/ftz/sat for floats)."""
    m = Mods(ins)
    op = ins.opcode
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES | ({"b16", "b32", "b64"} if op != "mul" else set()))
    size, kind = TYPES[t]
    if kind == "f":
        rnd, ftz, sat = _float_modifiers(ins, m, t)
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


def _float_modifiers(ins, m, t: str) -> tuple:
    """(rounding, .ftz, .sat) of a float add/sub/mul/fma/mad: the last of its modifiers
    (.rn when none is given); f64 takes neither .ftz nor .sat."""
    rnd = m.take(*ROUND_F) or "rn"
    ftz = m.take("ftz")
    sat = m.take("sat")
    m.done()
    if t == "f64" and (ftz or sat):
        raise unsupported(ins, ".ftz/.sat on f64")
    return rnd, ftz, sat


def _emit_fma(g, ins, m, t, d, a, b, c, guard):
    rnd, ftz, sat = _float_modifiers(ins, m, t)
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


def emit_half(g, ins) -> None:
    """add sub mul fma on .f16/.f16x2/.bf16/.bf16x2 (.rnd, .ftz on f16, .sat, .relu)."""
    hm = half_modifiers(ins)
    refuse_approx(ins, hm)
    if hm.nan:
        raise unsupported(ins, ".NaN")
    write_hop(g, ins, hm, ins.opcode, 3 if ins.opcode == "fma" else 2)


# --- the carry chain --------------------------------------------------------------------

def _ut(t):
    return f"u{TYPES[t][0] * 8}"


def emit_carry(g, ins):
    """add.cc addc sub.cc subc mad.cc madc (the CARRY form of add/sub/mad)."""
    op = ins.opcode
    m = Mods(ins)
    cc_out = bool(m.take("cc"))
    mode = m.take("lo", "hi") if op in ("mad", "madc") else None
    t = m.one_type({"u32", "s32", "u64", "s64"})
    m.done()
    if op in ("mad", "madc") and mode is None:
        raise PtxError(ins.line, f"{op} needs .lo or .hi: {ins.text}")
    ops = operands(ins, 4 if op in ("mad", "madc") else 3)
    guard = g.guard(ins)
    ut = _ut(t)
    cc = cc_register(g)
    cin = g.read(ins, cc, "pred") if op in ("addc", "subc", "madc") else "None"
    x, y = g.read(ins, ops[1], ut), g.read(ins, ops[2], ut)
    if op in ("mad", "madc"):
        if mode == "lo":
            prod = f"({x} * {y})"
        elif t == "u64" or t == "s64":
            prod = f"_mulhi_s64({g.read(ins, ops[1], t)}, {g.read(ins, ops[2], t)}).view(_U64)" \
                if t == "s64" else f"_mulhi_u64({x}, {y})"
        else:
            wide = "_I64" if t == "s32" else "_U64"
            prod = (f"(({g.read(ins, ops[1], t)}.astype({wide}) * {g.read(ins, ops[2], t)}"
                    f".astype({wide})) >> {wide}(32)).astype(_U32)")
        x, y = prod, g.read(ins, ops[3], ut)
    fn = "_sub_borrow" if op in ("sub", "subc") else "_add_carry"
    r = g.fresh()
    g.emit(f"{r} = {fn}({x}, {y}, {cin})")
    g.write(ins, ops[0], f"{r}[0]", ut, guard)
    if cc_out:
        g.write(ins, cc, f"{r}[1]", "pred", guard)


def emit_add_16x2(g, ins) -> None:
    """add.{s16x2,u16x2}: each half-word lane alone, wrapping in its lane."""
    simd.write_packed16(g, ins)


FAMILY = family("addmul", __name__)
_HALF = dict.fromkeys(HALF_FORMS, emit_half)
FAMILY.declare("add", emit={ANY: emit_int_or_float_binary, **_HALF, CARRY: emit_carry, "i16x2": emit_add_16x2})
FAMILY.declare("sub", emit={ANY: emit_int_or_float_binary, **_HALF, CARRY: emit_carry})
FAMILY.declare("mul", emit={ANY: emit_int_or_float_binary, **_HALF})
FAMILY.declare("mad", emit={ANY: emit_mad, CARRY: emit_carry})
FAMILY.declare("fma", emit={ANY: emit_fma, **_HALF})
FAMILY.declare("addc", "subc", "madc", emit=emit_carry)

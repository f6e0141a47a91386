"""Moves and conversions: mov (registers, immediates, vector packing) and cvt between the
integer and float types; trap; membar/fence. The mov and cvt rows (at the end) hold every
form: cvt's half types are written by half_compare_convert.py, cvt.pack by cvtpack.py, the
8-bit floats and tf32 by lowfloat.py, and `mov` of a variable's address by memops.py."""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, Instruction, Sym, Vec
from . import numerics
from .operands import (
    BIT_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    ROUND_F,
    ROUND_I,
    Mods,
    operands,
    unsupported,
    view_dtype,
    view_name,
)
from . import cvtpack, lowfloat
from . import half_compare_convert as half
from .memops import emit_mov_address
from .registry import ANY, HALF_FORMS, INTEGER, PACK, SYMBOL, family


def emit_mov(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | BIT_TYPES | FLOAT_TYPES | {"pred"})
    m.done()
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    if isinstance(a, Sym):
        raise unsupported(ins, f"taking the address of {a.name}")
    if isinstance(a, Vec):                       # pack {lo, ..., hi} into one register
        n = len(a.elems)
        if n not in (2, 4) or size % n or None in a.elems:
            raise PtxError(ins.line, f"bad vector operand for mov: {ins.text}")
        part = f"u{size * 8 // n}"
        wide = f"_U{size * 8}"
        terms = [f"({g.read(ins, e, part)}.astype({wide}) << {wide}({i * size * 8 // n}))"
                 for i, e in enumerate(a.elems)]
        g.write(ins, d, "(" + " | ".join(terms) + ")", f"u{size * 8}", guard)
        return
    if isinstance(d, Vec):                       # unpack one register into parts
        n = len(d.elems)
        if n not in (2, 4) or size % n:
            raise PtxError(ins.line, f"bad vector operand for mov: {ins.text}")
        src = g.fresh()
        g.emit(f"{src} = {g.read(ins, a, f'u{size * 8}')}")
        pbits = size * 8 // n
        wide = f"_U{size * 8}"
        for i, e in enumerate(d.elems):
            g.write(ins, e, f"({src} >> {wide}({i * pbits})).astype(_U{pbits})", f"u{pbits}", guard)
        return
    if kind == "pred":
        g.write(ins, d, g.read(ins, a, "pred"), "pred", guard)
        return
    ut = f"u{size * 8}"
    if isinstance(a, Imm) and kind == "f":
        g.write(ins, d, f"{g.read(ins, a, t)}.view(_U{size * 8})", ut, guard)
        return
    g.write(ins, d, g.read(ins, a, ut), ut, guard)


def emit_cvt(g, ins: Instruction) -> None:
    m = Mods(ins)
    irnd = m.take(*ROUND_I)
    frnd = m.take(*ROUND_F)
    ftz = m.take("ftz")
    sat = m.take("sat")
    ts = m.types()
    m.done()
    if len(ts) != 2:
        raise PtxError(ins.line, f"cvt needs a destination and a source type: {ins.text}")
    dt, st = ts
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    dsize, dkind = TYPES[dt]
    ssize, skind = TYPES[st]
    if "pred" in (dkind, skind):
        raise PtxError(ins.line, f"cvt does not take predicates: {ins.text}")
    x = g.read(ins, a, st)
    if ftz and not (st == "f32" or dt == "f32"):
        raise PtxError(ins.line, f".ftz applies to .f32 only: {ins.text}")
    if ftz and st == "f32":
        x = f"_flush({x})"
    if skind != "f" and dkind != "f":                       # integer <-> integer
        if irnd or frnd:
            raise PtxError(ins.line, f"no rounding modifier for integer cvt: {ins.text}")
        if sat:
            info = np.iinfo(view_dtype(dt) if dkind != "b" else numerics.UINT[dsize])
            lo, hi = g.const(np.int64(info.min)), g.const(np.int64(info.max))
            if ssize == 8 and skind != "s":
                # a u64 source beyond int64: clamp in unsigned space first
                x = f"_np.minimum({x}, _U64({info.max})).astype(_I64)"
            else:
                x = f"{x}.astype(_I64)"
            expr = f"_clip({x}, {lo}, {hi}).astype({view_name(dt)})"
        else:
            expr = f"{x}.astype({view_name(dt)})"        # C casts: truncate / extend
        g.write(ins, d, expr, dt, guard)
        return
    if skind != "f":                                        # integer -> float
        if irnd:
            raise PtxError(ins.line, f"integer rounding modifier on int->float cvt: {ins.text}")
        mode = frnd or "rn"
        if ssize == 8 and mode != "rn" and not numerics.LONG_DOUBLE_EXACT_64:
            raise unsupported(ins, "directed rounding from 64-bit integers on this platform")
        expr = f"_int_to_float({x}, {mode!r}, {view_name(dt)})"
    elif dkind != "f":                                      # float -> integer
        if not irnd:
            raise PtxError(ins.line, f"float->integer cvt needs .rni/.rzi/.rmi/.rpi: {ins.text}")
        target = view_dtype(dt) if dkind != "b" else numerics.UINT[dsize]
        expr = f"_float_to_int({x}, {irnd!r}, {g.const(target)})"
        if dkind == "b":
            dt = f"u{dsize * 8}"
    else:                                                   # float -> float
        if dsize < ssize:                                   # f64 -> f32
            if irnd:
                raise PtxError(ins.line, f"f64->f32 cvt takes a float rounding mode: {ins.text}")
            if not frnd:
                raise PtxError(ins.line, f"f64->f32 cvt needs a rounding modifier: {ins.text}")
            expr = f"_round_f64_to_f32({x}, {frnd!r})"
        elif dsize > ssize:                                 # f32 -> f64: exact
            if irnd or frnd:
                raise PtxError(ins.line, f"f32->f64 cvt takes no rounding modifier: {ins.text}")
            expr = f"{x}.astype(_F64)"
        else:                                               # same size: round to integral
            if frnd:
                raise PtxError(ins.line, f"same-size float cvt takes .rni/.rzi/.rmi/.rpi: {ins.text}")
            expr = f"_round_integral({x}, {irnd!r})" if irnd else x
    if ftz and dt == "f32":
        expr = f"_flush({expr})"
    if sat and dkind == "f":
        expr = f"_satf({expr})"
    g.write(ins, d, expr, dt, guard)


# ld, st, cvta (every state space), atom, red, bar/barrier and `mov` of a variable's
# address: memops.py (imported at the end of this file).


def emit_trap(g, ins: Instruction) -> None:
    operands(ins, 0)
    Mods(ins).done()
    iid = g.ns["_register_instruction"](ins)
    guard = g.guard(ins)
    g.emit(f"C.trap({iid}, {guard if guard is not None else 'None'})")


def emit_nop(g, ins: Instruction) -> None:
    """membar/fence: every access here is already sequentially consistent."""
    g.guard(ins)


FAMILY = family("convert", __name__)
FAMILY.declare("mov", emit={ANY: emit_mov, SYMBOL: emit_mov_address}, pipe=INTEGER)
FAMILY.declare("cvt", emit={ANY: emit_cvt, **dict.fromkeys(HALF_FORMS, half.emit_cvt), PACK: cvtpack.emit_cvt_pack,
                           "f8": lowfloat.emit_cvt_f8, "tf32": lowfloat.emit_cvt_tf32})
FAMILY.declare("trap", emit=emit_trap)
FAMILY.declare("membar", "fence", emit=emit_nop)

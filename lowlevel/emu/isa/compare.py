"""Comparisons: setp, set, selp. The rows (at the end) hold every form: the half types are
written by half_compare_convert.py's emitters."""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction, PredPair
from .operands import BIT_TYPES, CMP, FLOAT_TYPES, INT_TYPES, UNORDERED, Mods, cmp_and_bool, operands, unsupported
from . import half_compare_convert as half
from .registry import ANY, HALF_FORMS, family

def compare(g, ins, cmp, t, a, b, ftz) -> str:
    size, kind = TYPES[t]
    if kind == "b" and cmp not in ("eq", "ne"):
        raise PtxError(ins.line, f"setp.{cmp} needs a typed (not .b) comparison: {ins.text}")
    if cmp in ("lo", "ls", "hi", "hs") and kind == "s":
        raise PtxError(ins.line, f".{cmp} is an unsigned comparison: {ins.text}")
    if cmp in ("lo", "ls", "hi", "hs") and kind == "b":
        t = f"u{size * 8}"
    x, y = g.read(ins, a, t), g.read(ins, b, t)
    if kind != "f":
        if cmp not in CMP:
            raise PtxError(ins.line, f"comparison .{cmp} is only for floats: {ins.text}")
        return f"({x} {CMP[cmp]} {y})"
    if ftz:
        x, y = f"_flush({x})", f"_flush({y})"
    if cmp == "num":
        return f"~(_isnan({x}) | _isnan({y}))"
    if cmp == "nan":
        return f"(_isnan({x}) | _isnan({y}))"
    if cmp == "ne":             # ordered: false when either is NaN (numpy's != says true)
        return f"(({x} != {y}) & ~(_isnan({x}) | _isnan({y})))"
    if cmp in CMP and cmp not in ("lo", "ls", "hi", "hs"):
        return f"({x} {CMP[cmp]} {y})"
    if cmp in UNORDERED:
        return f"(({x} {UNORDERED[cmp]} {y}) | _isnan({x}) | _isnan({y}))"
    raise PtxError(ins.line, f"unknown comparison .{cmp}: {ins.text}")


def emit_setp(g, ins: Instruction) -> None:
    m = Mods(ins)
    cmp, boolop, ftz = cmp_and_bool(ins, m)
    t = m.one_type(INT_TYPES | BIT_TYPES | FLOAT_TYPES)
    m.done()
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"setp takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    dest = ops[0]
    p, q = (dest.p, dest.q) if isinstance(dest, PredPair) else (dest, None)
    r = g.fresh()
    g.emit(f"{r} = {compare(g, ins, cmp, t, ops[1], ops[2], ftz)}")
    if boolop:
        c = g.read(ins, ops[3], "pred")
        sym = {"and": "&", "or": "|", "xor": "^"}[boolop]
        g.write(ins, p, f"({r} {sym} {c})", "pred", guard)
        if q is not None:
            g.write(ins, q, f"((~{r}) {sym} {c})", "pred", guard)
    else:
        g.write(ins, p, r, "pred", guard)
        if q is not None:
            g.write(ins, q, f"(~{r})", "pred", guard)


def emit_set(g, ins: Instruction) -> None:
    m = Mods(ins)
    cmp, boolop, ftz = cmp_and_bool(ins, m)
    ts = m.types()
    m.done()
    if len(ts) != 2 or ts[0] not in ("u32", "s32", "f32") or \
            ts[1] not in INT_TYPES | BIT_TYPES | FLOAT_TYPES:
        raise unsupported(ins, "types")
    dtype, stype = ts
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"set takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    r = compare(g, ins, cmp, stype, ops[1], ops[2], ftz)
    if boolop:
        sym = {"and": "&", "or": "|", "xor": "^"}[boolop]
        r = f"({r} {sym} {g.read(ins, ops[3], 'pred')})"
    true = g.const(np.uint32(0x3F800000 if dtype == "f32" else 0xFFFFFFFF))
    g.write(ins, ops[0], f"_select({r}, {true}, {g.const(np.uint32(0))})", "u32", guard)


def emit_selp(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | BIT_TYPES | FLOAT_TYPES)
    m.done()
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    ut = f"u{TYPES[t][0] * 8}"
    expr = f"_select({g.read(ins, c, 'pred')}, {g.read(ins, a, ut)}, {g.read(ins, b, ut)})"
    g.write(ins, d, expr, ut, guard)


FAMILY = family("compare", __name__)
FAMILY.declare("setp", emit={ANY: emit_setp, **dict.fromkeys(HALF_FORMS, half.emit_setp)})
FAMILY.declare("set", emit={ANY: emit_set, **dict.fromkeys(HALF_FORMS, half.emit_half_set)})
FAMILY.declare("selp", emit=emit_selp)

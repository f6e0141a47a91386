"""Comparisons: setp, set, selp, every form: the integer and float types, and the half types
(emit_setp_half, emit_set_half: each half widened exactly to float64 and compared there)."""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction, PredPair
from .operands import BIT_TYPES, CMP, FLOAT_TYPES, INT_TYPES, UNORDERED, Mods, cmp_and_bool, operands, unsupported
from .half import HALF_TYPES, PAIR_TYPES, element_kind, half_type, storage_type, to_f64
from .registry import ANY, HALF_FORMS, family, provide

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


# --- the half types: .f16, .f16x2, .bf16, .bf16x2 (half.py's widening) ---------------------
#     set.cmp{.bool}{.ftz}.dtype.{f16,f16x2,bf16,bf16x2}: a comparison per half: with a half
#     .dtype 1.0 or 0.0 (each half of a pair), with an integer .dtype all ones or 0 (0xFFFF
#     per half of a pair)

ONE = {"f16": 0x3C00, "bf16": 0x3F80}       # 1.0 in each half type


def emit_setp_half(g, ins):
    """setp.cmp{.bool}{.ftz}.{f16,f16x2,bf16,bf16x2}: per half, into p (and q for a pair)."""
    t = half_type(ins)
    m = Mods(ins)
    cmp, boolop, ftz = cmp_and_bool(ins, m)
    m.one_type(HALF_TYPES | PAIR_TYPES)
    m.done()
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"setp takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    kind = element_kind(t)
    rt = storage_type(t)
    a, b = g.read(ins, ops[1], rt), g.read(ins, ops[2], rt)
    dest = ops[0]
    p, q = (dest.p, dest.q) if isinstance(dest, PredPair) else (dest, None)
    if t in PAIR_TYPES:
        ta, tb = g.fresh(), g.fresh()
        g.emit(f"{ta} = _halves({a})")
        g.emit(f"{tb} = _halves({b})")
        pairs = [(f"{ta}[0]", f"{tb}[0]"), (f"{ta}[1]", f"{tb}[1]")]
    else:
        pairs = [(a, b)]
    results = []
    for x, y in pairs:
        fx, fy = g.fresh(), g.fresh()
        g.emit(f"{fx} = _h2f({x}, {kind!r}, {bool(ftz)})")
        g.emit(f"{fy} = _h2f({y}, {kind!r}, {bool(ftz)})")
        r = g.fresh()
        g.emit(f"{r} = {_cmp_expr(ins, cmp, fx, fy)}")
        results.append(r)
    c = g.read(ins, ops[3], "pred") if boolop else None
    sym = {"and": "&", "or": "|", "xor": "^"}.get(boolop)

    def combine(r):
        return f"({r} {sym} {c})" if boolop else r

    if t in PAIR_TYPES:
        g.write(ins, p, combine(results[0]), "pred", guard)
        if q is not None:
            g.write(ins, q, combine(results[1]), "pred", guard)
    else:
        g.write(ins, p, combine(results[0]), "pred", guard)
        if q is not None:
            g.write(ins, q, combine(f"(~{results[0]})"), "pred", guard)


def _cmp_expr(ins, cmp, x, y):
    if cmp == "num":
        return f"~(_isnan({x}) | _isnan({y}))"
    if cmp == "nan":
        return f"(_isnan({x}) | _isnan({y}))"
    if cmp == "ne":
        return f"(({x} != {y}) & ~(_isnan({x}) | _isnan({y})))"
    if cmp in ("eq", "lt", "le", "gt", "ge"):
        return f"({x} {CMP[cmp]} {y})"
    if cmp in UNORDERED:
        return f"(({x} {UNORDERED[cmp]} {y}) | _isnan({x}) | _isnan({y}))"
    raise PtxError(ins.line, f"comparison .{cmp} is not defined for half types: {ins.text}")



def _compare(cmp: str, x, y):
    nan = np.isnan(x) | np.isnan(y)
    if cmp == "num":
        return ~nan
    if cmp == "nan":
        return nan
    base = cmp[:-1] if cmp.endswith("u") else cmp          # equ ltu ...: or unordered
    ordered = {"eq": x == y, "ne": (x != y) & ~nan, "lt": x < y, "le": x <= y,
               "gt": x > y, "ge": x >= y}[base]
    return ordered | nan if base != cmp else ordered


def half_set(cmp, kind, pair, ftz, dtype, boolop, c, a, b, size):
    """set on half values (raw bits a, b; c the optional predicate): the result's `size`
    bits (16 for a .u16/.s16/.f16/.bf16 destination, else 32)."""
    lanes = 2 if pair else 1
    out = np.zeros(np.broadcast(np.asarray(a), np.asarray(b)).shape, np.uint32)
    width = 16 if pair else 32
    for i in range(lanes):
        x = to_f64((np.asarray(a, np.uint32) >> (16 * i)) & 0xFFFF, kind, ftz)
        y = to_f64((np.asarray(b, np.uint32) >> (16 * i)) & 0xFFFF, kind, ftz)
        t = _compare(cmp, x, y)
        if boolop is not None:
            t = {"and": t & c, "or": t | c, "xor": t ^ c}[boolop]
        # a half .dtype holds 1.0; an integer one all ones (per half of a pair)
        true = ONE[kind] if dtype in ("f16", "bf16", "f16x2", "bf16x2") else (1 << width) - 1
        out |= np.where(t, np.uint32(true), np.uint32(0)) << np.uint32(16 * i)
    out = out.astype(np.uint16 if size == 16 else np.uint32)
    return out if out.ndim else out.reshape(-1)[0]


provide(_half_set=half_set)


def emit_set_half(g, ins):
    m = Mods(ins)
    cmp, boolop, ftz = cmp_and_bool(ins, m)
    ts = m.types()
    m.done()
    if len(ts) != 2 or ts[1] not in ("f16", "bf16", "f16x2", "bf16x2"):
        raise PtxError(ins.line, f"set on half types takes .dtype.stype: {ins.text}")
    dtype, stype = ts
    pair = stype.endswith("x2")
    allowed = {stype, "u32", "s32"} | (set() if pair else {"u16", "s16"})
    if dtype not in allowed:
        raise PtxError(ins.line, f"set.{dtype}.{stype} is not a PTX form: {ins.text}")
    ops = ins.operands
    if len(ops) != (4 if boolop else 3) or isinstance(ops[0], PredPair):
        raise PtxError(ins.line, f"set takes {4 if boolop else 3} operands: {ins.text}")
    kind = stype[:-2] if pair else stype
    src = "u32" if pair else "u16"
    x, y = g.read(ins, ops[1], src), g.read(ins, ops[2], src)
    c = g.read(ins, ops[3], "pred") if boolop else "None"
    size = 16 if dtype in ("u16", "s16", "f16", "bf16") else 32
    expr = (f"_half_set({cmp!r}, {kind!r}, {pair}, {bool(ftz)}, {dtype!r}, {boolop!r}, "
            f"{c}, {x}, {y}, {size})")
    g.write(ins, ops[0], expr, f"u{size}", g.guard(ins))



FAMILY = family("compare", __name__)
FAMILY.declare("setp", emit={ANY: emit_setp, **dict.fromkeys(HALF_FORMS, emit_setp_half)})
FAMILY.declare("set", emit={ANY: emit_set, **dict.fromkeys(HALF_FORMS, emit_set_half)})
FAMILY.declare("selp", emit=emit_selp)

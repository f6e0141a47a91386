"""Half precision beyond arithmetic (half.py): comparisons and atomics on
.f16, .f16x2, .bf16, .bf16x2 (emitters of the compare family's rows,
and the step functions of memops' atomics); cvt on the half types is cvt.py's.

    setp.cmp{.bool}{.ftz}.{f16,f16x2,bf16,bf16x2}   per half, into p (and q for a pair)
    set.cmp{.bool}{.ftz}.dtype.{f16,f16x2,bf16,bf16x2}
                                                 a comparison per half: with a half .dtype
                                                 1.0 or 0.0 (each half of a pair), with an
                                                 integer .dtype all ones or 0 (0xFFFF per
                                                 half of a pair)
    atom/red.add.noftz.{f16,bf16,f16x2,bf16x2}   each thread's add rounds to nearest even in
                                                 the element type, subnormals kept (.noftz);
                                                 the lanes of a pair add independently

The atomics reach engine/atomics.py as a step function over the raw bits, so the engine
keeps serializing the threads of one address exactly; the add itself is half.py's `hop`
(exact sum, one rounding).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import PredPair
from .half import (HALF_TYPES, PAIR_TYPES, element_kind, half_type, hop, storage_type, to_f64, x2)
from .operands import CMP, UNORDERED, cmp_and_bool, Mods, unsupported
from .registry import provide

HALF_ATOMIC_TYPES = {"f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}
ONE = {"f16": 0x3C00, "bf16": 0x3F80}


def emit_setp(g, ins):
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


def half_add_step(ptype: str):
    """The new bits of one thread's atom.add.noftz.<ptype> (old and b: raw bits)."""
    kind = ptype[:-2] if ptype.endswith("x2") else ptype
    if ptype.endswith("x2"):
        return lambda old, b: x2(hop, ("add", kind, "rn", False, False, False), old, b)
    return lambda old, b: hop("add", kind, "rn", False, False, False, old, b)


def half_minmax_step(op: str, ptype: str):
    """The new bits of one thread's vector-element atom.min/max.noftz.<ptype> (sm_90 takes
    these only in vector form, vecatom.py): the min/max of the two values as min/max on
    the half types (a NaN loses to a number, -0 below +0), subnormals kept; the lanes of a
    pair independently."""
    kind = ptype[:-2] if ptype.endswith("x2") else ptype
    if ptype.endswith("x2"):
        return lambda old, b: x2(hop, (op, kind, "rn", False, False, False), old, b)
    return lambda old, b: hop(op, kind, "rn", False, False, False, old, b)


def half_atomic(ins, op: str, ptype: str):
    """(step function, raw bit type) for an atom/red with .noftz, or refuse it by name."""
    if op != "add" or ptype not in HALF_ATOMIC_TYPES:
        raise unsupported(ins, f".noftz with .{op}.{ptype} (only add on f16, bf16 and pairs)")
    return half_add_step(ptype), HALF_ATOMIC_TYPES[ptype]


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


def emit_half_set(g, ins):
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

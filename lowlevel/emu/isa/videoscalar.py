"""The scalar video instructions (PTX ISA "Scalar Video Instructions"), each on one
selected byte, half-word or word of its operands:

    vadd vsub vabsdiff vmin vmax  .dtype.atype.btype{.sat}{.op2}   d{.dsel}, a{.asel}, b{.bsel}{, c}
    vshl vshr                     .dtype.atype.u32{.sat}.mode{.op2} (mode .clamp: b > 32 is 32;
                                                                   .wrap: b mod 32)
    vset                          .atype.btype.cmp{.op2}            (1 or 0)

The ISA's pseudo-code: ta, tb = the selected part of a and b (.b0-.b3, .h0/.h1, the whole
word by default), sign- or zero-extended by .atype/.btype; tmp = the operation, exact;
.sat clamps tmp to the range of .dtype (signed or not), of the selected destination part
when there is one; then either the secondary operation with c (.add: tmp + c, .min, .max;
c extended by .dtype's signedness) or, with d.dsel, tmp's low byte/half-word merged into c
at that place; d the low 32 bits.

    vset2 vset4  .atype.btype.cmp{.add}  d, a, b, c   the SIMD compare: each half-word (vset2)
                                                   or byte (vset4) lane of a and b, extended
                                                   by its type, compared: 1 or 0 in that
                                                   lane of d; with .add d = c + the lanes'
                                                   sum. Only the default lane selectors and
                                                   mask (.h10/.b3210, .h32/.b7654 of a, b)
                                                   are taken, as simd.py's vop2/vop4.
vmad is not implemented (refused by name).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Reg
from .operands import Mods, unsupported
from .registry import family, provide

SELECTORS = {"b0": (0, 8), "b1": (8, 8), "b2": (16, 8), "b3": (24, 8), "h0": (0, 16), "h1": (16, 16)}
ARITH = ("vadd", "vsub", "vabsdiff", "vmin", "vmax")
SHIFTS = ("vshl", "vshr")
COMPARES = ("eq", "ne", "lt", "le", "gt", "ge")
I64 = np.int64


def part(x, sel, signed: bool):
    """partSelectSignExtend: the selected part of uint32 x as int64."""
    x = np.asarray(x, np.uint32).astype(I64)
    shift, width = SELECTORS.get(sel, (0, 32))
    v = (x >> shift) & ((1 << width) - 1)
    return np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v


def _operate(op, ta, tb, mode):
    if op in SHIFTS:
        tb = np.minimum(tb, 32) if mode == "clamp" else tb & 31
        if op == "vshr":
            return ta >> np.minimum(tb, 63)             # ta fits 33 bits: 33+ is all sign
        # ta << 32 needs 65 bits: exact Python integers
        return np.asarray(ta, object) << np.asarray(tb, object)
    if op in COMPARES:
        return {"eq": ta == tb, "ne": ta != tb, "lt": ta < tb, "le": ta <= tb,
                "gt": ta > tb, "ge": ta >= tb}[op].astype(I64)
    return {"vadd": ta + tb, "vsub": ta - tb, "vabsdiff": np.abs(ta - tb),
            "vmin": np.minimum(ta, tb), "vmax": np.maximum(ta, tb)}[op]


def video_scalar(op, a, asel, sa, b, bsel, sb, c, dsel, sd, sat, op2, mode):
    """One scalar video instruction over uint32 registers; returns uint32."""
    tmp = _operate(op, part(a, asel, sa), part(b, bsel, sb), mode)
    if sat:
        width = SELECTORS[dsel][1] if dsel else 32
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if sd else (0, (1 << width) - 1)
        tmp = np.clip(tmp, lo, hi)
    if dsel:
        shift, width = SELECTORS[dsel]
        keep = 0xFFFFFFFF ^ (((1 << width) - 1) << shift)
        low = _low_bits(tmp, width).astype(I64)
        return _scalar(((low << shift) | (np.asarray(c, np.uint32).astype(I64) & keep)).astype(np.uint32))
    if op2:
        cv = part(c, None, sd)
        tmp = {"add": tmp + cv, "min": np.minimum(tmp, cv), "max": np.maximum(tmp, cv)}[op2]
    return _scalar(_low_bits(tmp, 32).astype(np.uint32))


def _low_bits(x, width: int):
    """The low `width` bits of x (int64, or exact integers after a shift) as int64."""
    x = np.asarray(x)
    return np.asarray(x & ((1 << width) - 1)).astype(I64)


def _scalar(x):
    """A numpy scalar for a 0-d result (every operand uniform), as other helpers give."""
    return x if x.ndim else x[()]


def vset_simd(cmp: str, lanes: int, a, sa: bool, b, sb: bool, c, add: bool):
    """vset2/vset4 with the default selectors and mask; returns uint32."""
    width = 32 // lanes
    d = np.asarray(c, np.uint32).astype(I64) if add else np.zeros(np.broadcast(a, b).shape, I64)
    for i in range(lanes):
        sel = SIMD_LANES[lanes][i]
        t = _operate(cmp, part(a, sel, sa), part(b, sel, sb), None)
        d = d + t if add else d | (t << (width * i))
    return _scalar(_low_bits(d, 32).astype(np.uint32))


SIMD_LANES = {2: ("h0", "h1"), 4: ("b0", "b1", "b2", "b3")}

provide(_video_scalar=video_scalar, _vset_simd=vset_simd)


def _split(ins, o):
    """(register or immediate, selector or None) of an operand `%r1.b2`."""
    if isinstance(o, Reg) and "." in o.name:
        name, sel = o.name.rsplit(".", 1)
        if sel not in SELECTORS:
            raise PtxError(ins.line, f"{ins.opcode}: unknown selector .{sel} on {name}: {ins.text}")
        return Reg(name), sel
    return o, None


def emit_video_scalar(g, ins):
    op = ins.opcode
    m = Mods(ins)
    ts = m.types()
    sat = m.take("sat") is not None
    op2 = m.take("add", "min", "max")
    mode = m.take("clamp", "wrap") if op in SHIFTS else None
    cmp = m.take(*COMPARES) if op == "vset" else None
    m.done()
    want = 2 if op == "vset" else 3
    if len(ts) != want or not set(ts) <= {"u32", "s32"} or (op in SHIFTS and ts[2] != "u32"):
        raise PtxError(ins.line, f"{op} needs {want} types of .u32/.s32 (a shift's b .u32): {ins.text}")
    if (op in SHIFTS and mode is None) or (op == "vset" and cmp is None):
        raise PtxError(ins.line, f"{op} needs {'.clamp or .wrap' if op in SHIFTS else 'a comparison'}: {ins.text}")
    if op == "vset" and sat:
        raise PtxError(ins.line, f"vset has no .sat: {ins.text}")
    (d, dsel), (a, asel), (b, bsel) = (_split(ins, o) for o in ins.operands[:3])
    if len(ins.operands) != (4 if op2 or dsel else 3):
        raise PtxError(ins.line, f"{op} takes c with a secondary operation or a destination "
                                 f"selector, and only then: {ins.text}")
    if op2 and dsel:
        raise PtxError(ins.line, f"{op}: a secondary operation and a destination selector "
                                 f"exclude each other: {ins.text}")
    sd, sa, sb = (ts[0] == "s32", ts[0] == "s32", ts[1] == "s32") if op == "vset" else \
        (ts[0] == "s32", ts[1] == "s32", ts[2] == "s32")
    if op == "vset":
        sd = False                                  # the result, 0 or 1, is unsigned
    c = g.read(ins, ins.operands[3], "u32") if len(ins.operands) == 4 else "0"
    expr = (f"_video_scalar({(cmp or op)!r}, {g.read(ins, a, 'u32')}, {asel!r}, {sa}, "
            f"{g.read(ins, b, 'u32')}, {bsel!r}, {sb}, {c}, {dsel!r}, {sd}, {sat}, {op2!r}, {mode!r})")
    g.write(ins, d, expr, "u32", g.guard(ins))


def emit_vset_simd(g, ins):
    lanes = int(ins.opcode[-1])
    m = Mods(ins)
    ts = m.types()
    cmp = m.take(*COMPARES)
    add = m.take("add") is not None
    m.done()
    if len(ts) != 2 or not set(ts) <= {"u32", "s32"} or cmp is None:
        raise PtxError(ins.line, f"{ins.opcode} needs .atype.btype (.u32/.s32) and a comparison: {ins.text}")
    if len(ins.operands) != 4:
        raise PtxError(ins.line, f"{ins.opcode} takes d, a, b, c: {ins.text}")
    for o in ins.operands:
        if isinstance(o, Reg) and "." in o.name:
            raise unsupported(ins, f"operand lane selector or mask {o.name}")
    d, a, b, c = ins.operands
    expr = (f"_vset_simd({cmp!r}, {lanes}, {g.read(ins, a, 'u32')}, {ts[0] == 's32'}, "
            f"{g.read(ins, b, 'u32')}, {ts[1] == 's32'}, {g.read(ins, c, 'u32')}, {add})")
    g.write(ins, d, expr, "u32", g.guard(ins))


FAMILY = family("videoscalar", __name__)
FAMILY.declare(*ARITH, *SHIFTS, "vset", emit=emit_video_scalar)
FAMILY.declare("vset2", "vset4", emit=emit_vset_simd)

__all__ = ["emit_video_scalar", "emit_vset_simd", "part", "video_scalar", "vset_simd"]

"""SIMD within a 32-bit register: the video instructions and the 16x2 integer forms.

    vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4   four byte lanes     (what __vabsdiffu4,
    vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2   two half-word lanes  __vsadu4 ... compile to)
    add min max .s16x2 .u16x2                  sm_90's packed half-word arithmetic
    bmsk.clamp/.wrap                           a mask of b bits from bit a (CUB radix sort)

The video forms follow the PTX ISA: each lane of a and b is sign- or zero-extended by its
.atype/.btype, combined exactly (no wrap), then either clamped to the lane's .dtype range
(.sat) or truncated to the lane, and merged into d; with .add, d = c + the sum of the
lanes' results (mod 2^32). Only the default lane selectors and masks (.b3210/.b7654,
.h10/.h32) are taken; operand selectors stay refused by name at load.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Reg
from .operands import Mods, operands, unsupported
from .registry import family, provide

VIDEO_OPS = ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax")


def _lanes(x, lanes: int, signed: bool):
    """The `lanes` lanes of uint32 `x` as int64, sign- or zero-extended; shape x.shape +
    (lanes,), the lanes last, so a uniform (0-d) operand broadcasts against a per-thread one."""
    x = np.asarray(x, np.uint32).astype(np.int64)
    width = 32 // lanes
    out = np.stack([(x >> (width * i)) & ((1 << width) - 1) for i in range(lanes)], axis=-1)
    if signed:
        out = np.where(out >= 1 << (width - 1), out - (1 << width), out)
    return out


def _combine(op: str, va, vb):
    if op == "vadd":
        return va + vb
    if op == "vsub":
        return va - vb
    if op == "vavrg":                       # rounds half away from zero's upper side: +1 if >= 0
        s = va + vb
        return np.where(s >= 0, (s + 1) >> 1, s >> 1)
    if op == "vabsdiff":
        return np.abs(va - vb)
    return np.minimum(va, vb) if op == "vmin" else np.maximum(va, vb)


def video(op: str, lanes: int, a, b, c, sa: bool, sb: bool, sd: bool, sat: bool, add: bool):
    """One vop2/vop4 over the threads' uint32 registers a, b, c; returns uint32."""
    t = _combine(op, _lanes(a, lanes, sa), _lanes(b, lanes, sb))
    width = 32 // lanes
    if add:
        total = np.asarray(c, np.uint32).astype(np.int64) + t.sum(axis=-1)
        return _scalar((total & 0xFFFFFFFF).astype(np.uint32))
    if sat:
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if sd else (0, (1 << width) - 1)
        t = np.clip(t, lo, hi)
    d = np.zeros(t.shape[:-1], np.int64)
    for i in range(lanes):
        d |= (t[..., i] & ((1 << width) - 1)) << (width * i)
    return _scalar(d.astype(np.uint32))


def _scalar(x):
    """A numpy scalar for a 0-d result (every operand uniform), as other helpers give."""
    x = np.asarray(x)
    return x if x.ndim else x[()]


def packed16(op: str, a, b, signed: bool):
    """add/min/max.{s,u}16x2: each half-word lane alone (add wraps in its lane)."""
    va, vb = _lanes(a, 2, signed), _lanes(b, 2, signed)
    t = {"add": va + vb, "min": np.minimum(va, vb), "max": np.maximum(va, vb)}[op]
    return _scalar(((t[..., 0] & 0xFFFF) | ((t[..., 1] & 0xFFFF) << 16)).astype(np.uint32))


def bmsk(a, b, wrap: bool):
    """bmsk.clamp/.wrap d, a, b, the PTX ISA's pseudo-code: mask0 = ~0 << (a & 31),
    mask1 = ~0 << ((a & 31) + (b & 31)); mask1 = 0 when that sum reaches 32 (or, with
    .clamp, when a or b is 32 or more, a >= 32 also clearing mask0), mask1 = ~0 when
    b & 31 is 0; d = mask0 & ~mask1."""
    a = np.asarray(a, np.uint32).astype(np.int64)
    b = np.asarray(b, np.uint32).astype(np.int64)
    a1, b1 = a & 31, b & 31
    full = np.int64(0xFFFFFFFF)
    mask0 = (full << a1) & full
    total = a1 + b1
    mask1 = (full << np.minimum(total, 31)) & full
    overflow = total >= 32
    if not wrap:
        mask0 = np.where(a >= 32, 0, mask0)
        overflow = overflow | (a >= 32) | (b >= 32)
    mask1 = np.where(overflow, 0, np.where(b1 == 0, full, mask1))
    return (mask0 & ~mask1 & full).astype(np.uint32)


provide(_video=video, _packed16=packed16, _bmsk=bmsk)


def _plain_registers(ins):
    """Refuse the lane selectors (`%r1.b10`, `%r2.h32`) this module does not implement."""
    for o in ins.operands:
        if isinstance(o, Reg) and "." in o.name and not o.name.startswith("%tid"):
            raise unsupported(ins, f"operand lane selector or mask {o.name}")


def emit_video(g, ins):
    op, lanes = ins.opcode[:-1], int(ins.opcode[-1])
    m = Mods(ins)
    ts = m.types()
    sat, add = m.take("sat") is not None, m.take("add") is not None
    m.done()
    if len(ts) != 3 or not set(ts) <= {"u32", "s32"}:
        raise PtxError(ins.line, f"{ins.opcode} needs .dtype.atype.btype, each .u32 or "
                                 f".s32: {ins.text}")
    if sat and add:
        raise PtxError(ins.line, f"{ins.opcode}: .sat cannot be used with .add: {ins.text}")
    _plain_registers(ins)
    d, a, b, c = operands(ins, 4)
    sd, sa, sb = (t == "s32" for t in ts)
    x, y, z = (g.read(ins, o, "u32") for o in (a, b, c))
    g.write(ins, d, f"_video({op!r}, {lanes}, {x}, {y}, {z}, {sa}, {sb}, {sd}, {sat}, {add})",
            "u32", g.guard(ins))


def write_packed16(g, ins):
    """add/min/max.{s16x2,u16x2} d, a, b (sm_90), for the modules of those opcodes."""
    m = Mods(ins)
    t = m.take("s16x2", "u16x2")
    m.done()
    if g.ck.kernel.binary_version < 90:
        raise PtxError(ins.line, f"{ins.opcode}.{t} requires sm_90 or later "
                                 f"(target sm_{g.ck.kernel.binary_version}): {ins.text}")
    d, a, b = operands(ins, 3)
    x, y = g.read(ins, a, "u32"), g.read(ins, b, "u32")
    g.write(ins, d, f"_packed16({ins.opcode!r}, {x}, {y}, {t == 's16x2'})", "u32", g.guard(ins))


def emit_bmsk(g, ins):
    m = Mods(ins)
    mode = m.take("clamp", "wrap")
    m.take("b32")
    m.done()
    if mode is None or ins.mods.count("b32") != 1:
        raise PtxError(ins.line, f"bmsk takes .clamp or .wrap and .b32: {ins.text}")
    d, a, b = operands(ins, 3)
    x, y = g.read(ins, a, "u32"), g.read(ins, b, "u32")
    g.write(ins, d, f"_bmsk({x}, {y}, {mode == 'wrap'})", "u32", g.guard(ins))


# add/min/max.{s,u}16x2 are forms of addmul.py's and minmax.py's rows (write_packed16)
FAMILY = family("simd", __name__)
FAMILY.declare(*(f"{op}{n}" for op in VIDEO_OPS for n in (2, 4)), emit=emit_video)
FAMILY.declare("bmsk", emit=emit_bmsk)

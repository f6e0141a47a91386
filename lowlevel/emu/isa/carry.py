"""The carry chain: add.cc addc sub.cc subc mad.cc madc (the CARRY form of add/sub/mad).

The carry flag CC.CF is a hidden predicate register `%__cc`, created the first time a
kernel uses it; after sub.cc/subc it holds the borrow, as the ISA defines subc as
d = a - (b + CC.CF).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Reg
from .operands import Mods, operands
from .registry import family, provide


def add_carry(a, b, cin):
    """a + b + cin (unsigned, wrapping) and the carry out."""
    s = a + b
    c1 = s < a
    if cin is None:
        return s, c1
    s2 = s + cin.astype(s.dtype) if isinstance(cin, np.ndarray) else s + s.dtype.type(bool(cin))
    return s2, c1 | (s2 < s)


def sub_borrow(a, b, bin_):
    """a - (b + bin) (unsigned, wrapping) and the borrow out."""
    if bin_ is None:
        return a - b, a < b
    t = bin_.astype(a.dtype) if isinstance(bin_, np.ndarray) else a.dtype.type(bool(bin_))
    return a - b - t, (a < b) | ((a == b) & bin_)


_CC = "%__cc"


def _cc(g) -> Reg:
    """The hidden carry-flag predicate register of this kernel (created on first use)."""
    k = g.ck.kernel
    if _CC not in g.ck.slots:
        k.registers[_CC] = "pred"
        g.ck.slots[_CC] = len(g.ck.slot_dtypes)
        g.ck.slot_dtypes.append(np.bool_)
    return Reg(_CC)


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
    cc = _cc(g)
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


provide(_add_carry=add_carry, _sub_borrow=sub_borrow)
# add.cc, sub.cc, mad.cc are forms of arith.py's rows
FAMILY = family("carry", __name__)
FAMILY.declare("addc", "subc", "madc", emit=emit_carry)

"""Moves: mov, every form: registers, immediates, vector packing (emit_mov), and a variable's
or a function's address (emit_mov_address); trap; membar/fence. (cvt is cvt.py's.)"""
from __future__ import annotations

import numpy as np


from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, Instruction, Sym, Vec
from .operands import (
    BIT_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    Mods,
    operands,
    unsupported,
)
from . import paramaddr
from .addressing import symbol
from .registry import ANY, INTEGER, SYMBOL, family


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


# ld, st, cvta (every state space), atom, red, bar/barrier and `mov` of a variable's
# address: memops.py (imported at the end of this file).


def emit_mov_address(g, ins: Instruction) -> None:
    """mov d, variable (the SYMBOL form of mov): the variable's address in its space."""
    ops = ins.operands
    m = Mods(ins)
    t = m.one_type({"u32", "u64", "b32", "b64", "s32", "s64"})
    m.done()
    guard = g.guard(ins)
    offset = paramaddr.parameter_offset(g.ck, ops[1].name)
    function = getattr(g.ck.kernel, "function_addresses", {}).get(ops[1].name)
    if offset is not None:
        expr = g.const(np.uint64(offset))       # an address in the parameter space
    elif function is not None:
        expr = g.const(np.uint64(function))     # a device function pointer (ptx/functions.py)
    else:
        expr, _ = symbol(g, ins, ops[1].name)
    if TYPES[t][0] == 4:
        g.write(ins, ops[0], f"({expr} & _U64(0xFFFFFFFF)).astype(_U32)", "u32", guard)
    else:
        g.write(ins, ops[0], expr, "u64", guard)


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
FAMILY.declare("trap", emit=emit_trap)
FAMILY.declare("membar", "fence", emit=emit_nop)

"""Cache hints and cache policies: instructions that change where data is cached, not
what a program computes (PTX ISA, "Data Movement and Conversion Instructions").

    prefetch{.global,.local}.{L1,L2}  [a];   prefetch.global.L2::evict_{last,normal}  [a];
    prefetchu.L1  [a];                       prefetch{.const,.param}.tensormap  [a];
    applypriority{.global}.L2::evict_normal  [a], 128;
    discard{.global}.L2  [a], 128;
    createpolicy.fractional.L2::primary{.L2::secondary}.b64  policy{, fraction};
    createpolicy.range{.global}.L2::primary{.L2::secondary}.b64  policy, [a], primary, total;
    createpolicy.cvt.L2.b64  policy, access_property;

Prefetches and applypriority do nothing here (there are no caches; a prefetch does not
fault on a GPU either). discard is the one with an effect on values: the ISA defines it as
writing unstable indeterminate values into [a, a+128) (a 128-byte aligned, in .global), so
the bytes become 0xFF, what fresh memory reads, and a kernel that reads discarded data gets
a wrong answer as it may on a GPU; it is checked like a 128-byte global store. The
policies createpolicy makes are opaque 64-bit values that only .L2::cache_hint operands
consume (and the emulator ignores): a fixed value per form; .cvt returns its operand.
"""
from __future__ import annotations

import zlib

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Imm, Instruction
from .addressing import address
from .operands import Mods
from .registry import family, provide

_LINE = 128                     # the one size applypriority and discard take


def _space(m: Mods, *spaces) -> str | None:
    return m.take(*spaces)


def emit_prefetch(g, ins: Instruction) -> None:
    m = Mods(ins)
    if ins.opcode == "prefetchu":
        m.take("L1")
        space = "generic"
    elif m.take("tensormap"):
        space = _space(m, "const", "param") or "generic"
    else:
        space = _space(m, "global", "local") or "generic"
        if m.take("L1", "L2", "L2::evict_last", "L2::evict_normal") is None:
            raise PtxError(ins.line, f"{ins.opcode} needs a cache level (.L1 or .L2): {ins.text}")
    m.done()
    (a,) = _operands(ins, 1)
    if space != "param":                      # a parameter's name: nothing to compute
        address(g, ins, a, space)


def _l2_line(g, ins: Instruction, level: str) -> tuple[str, str]:
    """applypriority's and discard's common form, `op{.global}.LEVEL [a], 128`: (the
    address's expression, its space)."""
    m = Mods(ins)
    space = _space(m, "global") or "generic"
    if m.take(level) is None:
        raise PtxError(ins.line, f"{ins.opcode} takes .{level}: {ins.text}")
    m.done()
    a, size = _operands(ins, 2)
    _line_size(ins, size)
    return address(g, ins, a, space), space


def emit_applypriority(g, ins: Instruction) -> None:
    _l2_line(g, ins, "L2::evict_normal")


def emit_discard(g, ins: Instruction) -> None:
    expr, space = _l2_line(g, ins, "L2")
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_discard(C, {expr}, {space!r}, {iid}, {guard if guard is not None else 'None'})")


def discard(C, addr, space: str, iid: int, guard) -> None:
    """Indeterminate values (0xFF) over each active lane's 128-byte line."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    a = np.broadcast_to(np.asarray(addr, np.uint64), (C.n,))
    a = a if active is None else a[active]
    off = C.global_index(a, _LINE, 1, iid, "store", active, None, space)
    C.memory.u8[off[:, None] + np.arange(_LINE)] = 0xFF


def emit_createpolicy(g, ins: Instruction) -> None:
    m = Mods(ins)
    kind = m.take("fractional", "range", "cvt")
    if kind is None:
        raise PtxError(ins.line, f"createpolicy is .fractional, .range or .cvt: {ins.text}")
    levels = [x for x in list(m.left) if x.startswith("L2")]
    for x in levels:
        m.left.remove(x)
    if kind == "range":
        m.take("global")
    m.one_type({"b64"})
    m.done()
    want = {"fractional": (1, 2), "range": (4,), "cvt": (2,)}[kind]
    ops = list(ins.operands)
    if len(ops) not in want:
        raise PtxError(ins.line, f"createpolicy.{kind} takes {' or '.join(map(str, want))} "
                                 f"operands: {ins.text}")
    guard = g.guard(ins)
    if kind == "cvt":
        g.write(ins, ops[0], g.read(ins, ops[1], "b64"), "u64", guard)
        return
    if kind == "fractional" and len(ops) == 2:
        _fraction(g, ins, ops[1])
    if kind == "range":
        if not isinstance(ops[1], Addr):
            raise PtxError(ins.line, f"createpolicy.range takes an [address]: {ins.text}")
        address(g, ins, ops[1], "generic" if "global" not in ins.mods else "global")
        g.read(ins, ops[2], "u32")
        g.read(ins, ops[3], "u32")
    # an opaque value of this form (stable across runs), tagged in its top byte
    tag = np.uint64(0xC0 << 56 | zlib.crc32(".".join(ins.mods).encode()))
    g.write(ins, ops[0], g.const(tag), "u64", guard)


def _fraction(g, ins, op) -> None:
    if isinstance(op, Imm) and not 0.0 < float(op.value) <= 1.0:
        raise PtxError(ins.line, f"createpolicy fraction must be in (0.0, 1.0]: {ins.text}")
    g.read(ins, op, "f32")


def _operands(ins: Instruction, n: int) -> list:
    ops = list(ins.operands)
    if len(ops) != n or not isinstance(ops[0], Addr):
        raise PtxError(ins.line, f"{ins.opcode} takes [address]{', size' if n == 2 else ''}: {ins.text}")
    return ops


def _line_size(ins: Instruction, size) -> None:
    if not isinstance(size, Imm) or size.is_float or size.value != _LINE:
        raise PtxError(ins.line, f"{ins.opcode} takes a size of {_LINE}: {ins.text}")


FAMILY = family("memhints", __name__)
FAMILY.declare("prefetch", "prefetchu", emit=emit_prefetch)
FAMILY.declare("applypriority", emit=emit_applypriority)
FAMILY.declare("discard", emit=emit_discard)
FAMILY.declare("createpolicy", emit=emit_createpolicy)
provide(_discard=discard)

__all__ = ["emit_prefetch", "emit_applypriority", "emit_discard", "emit_createpolicy", "discard"]

"""Calls through device function pointers, `call (r), %rd, (a), prototype;`, inlined.

calls.py inlines direct calls. An indirect call becomes a choice among direct calls, one
per candidate: the functions of the module that have an address (ptx/functions.py: their
name is used as a value, in code or in a table or vtable) and whose parameters and return
values have the sizes the prototype declares. Each lane compares the pointer with each
candidate's address and runs the matching copy, so lanes calling different functions
diverge and reconverge after the call as with any branch. A pointer that matches no
candidate faults with CUDA_ERROR_INVALID_PC (what a GPU reports for a jump to no code),
when a lane really takes that path: the load itself does not fail. A candidate already
being called in this chain (recursion through a pointer) is a real call (recursion.py).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.ir import ArgList, Imm, Instruction, Reg, Sym
from .operands import operands
from .registry import family, provide


def _sizes(params) -> list:
    return [p.size for p in params]


def candidates(mod, proto) -> list:
    """(name, address) of the functions an indirect call of `proto` may reach."""
    out = []
    for name, addr in getattr(mod, "function_addresses", {}).items():
        f = mod.functions.get(name)
        if f is None or not (f.body or f.registers):
            continue
        if _sizes(f.params) == _sizes(proto.params) and \
                _sizes(getattr(f, "return_params", [])) == _sizes(proto.returns):
            out.append((name, addr))
    return out


def choose(k, ins, rets, target: Reg, args, mod, stack, counter) -> list:
    """The body items (instructions, labels) an indirect call becomes."""
    counter[0] += 1
    sfx = f"@{counter[0]}"
    line, text = ins.line, ins.text
    p = f"%__icall{sfx}"
    k.registers[p] = "pred"
    done, items = f"__icall_done{sfx}", []
    if ins.guard is not None:              # @p call: skip the whole choice
        items.append(Instruction("bra", [], [Sym(done)], line, text,
                                 Reg(ins.guard.name, not ins.guard.negated)))
    for i, (name, addr) in enumerate(candidates(mod, ins.prototype)):
        skip = f"__icall_next{sfx}_{i}"
        items.append(Instruction("setp", ["ne", "u64"], [Reg(p), target, Imm(addr)], line, text))
        items.append(Instruction("bra", [], [Sym(skip)], line, text, Reg(p)))
        items.append(Instruction("call", [], [ArgList([Sym(r) for r in rets]), Sym(name),
                                              ArgList([Sym(a) for a in args])], line, text))
        items.append(Instruction("bra", [], [Sym(done)], line, text))
        items.append(skip)
    items.append(Instruction("_icall_invalid", [], [target], line, text))
    items.append(done)
    return items


def emit_invalid(g, ins):
    (target,) = operands(ins, 1)
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_icall_fault(C, {g.read(ins, target, 'u64')}, {iid})")


def icall_fault(C, target, iid: int) -> None:
    """The lanes that get here call through a pointer to no function: fault for the first."""
    active, any_active = C.active_with(None)
    if not any_active:
        return
    lanes = C.batch_lanes(active, None)
    if lanes.size == 0:
        return
    first = int(np.flatnonzero(active)[0]) if active is not None else 0
    addr = int(np.broadcast_to(np.asarray(target, np.uint64), (C.n,))[first])
    ins = C.ck.instructions[iid]
    who = f"by {C.who_batch(int(lanes[0]))}, PTX line {ins.line}: {ins.text}"
    raise KernelFault("CUDA_ERROR_INVALID_PC",
                      f"{C.name}: indirect call to {addr:#x}, which is no function of the "
                      f"module, {who}")


FAMILY = family("indirect", __name__)
FAMILY.declare("_icall_invalid", emit=emit_invalid)
provide(_icall_fault=icall_fault)

__all__ = ["candidates", "choose", "icall_fault"]

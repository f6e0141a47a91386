"""Which registers are live at given labels of a straight list of PTX items (for the
frames of recursive calls, recursion.py): a backward dataflow over the instructions.

An instruction defines its first operand only when it is one of DEFINES and has no guard
(a guarded write may not happen); every other register it names counts as read, and so
do the registers holding a variable it addresses (the words of a .param variable). So the
sets are never too small: an instruction not understood here only keeps more registers
live. Branches go to their labels; a branch to a call's entry (`calls`) continues after
it, as the call returns there; a branch to a return dispatch (`returns`), ret, exit and
trap end the path.
"""
from __future__ import annotations

from ..ptx.ir import Addr, ArgList, Instruction, PredPair, Reg, Sym, TensorAddr, Vec

DEFINES = {"mov", "add", "sub", "mul", "mad", "fma", "div", "rem", "abs", "neg", "min", "max",
           "and", "or", "xor", "not", "cnot", "shl", "shr", "cvt", "cvta", "setp", "selp", "set",
           "ld", "_ldpv", "slct", "bfe", "bfi", "popc", "clz", "brev", "prmt", "lop3", "shf",
           "sqrt", "rcp", "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "mul24", "mad24",
           "copysign", "testp", "sad", "bfind", "fns"}
_ENDS = {"ret", "exit", "trap"}
_IGNORED = {"_frame_push", "_frame_pop"}


def _regs(o, out: set, variable) -> None:
    if isinstance(o, Reg):
        out.add(o.name)
    elif isinstance(o, Addr) and isinstance(o.base, Sym):
        out.update(variable(o.base.name))       # a .param variable's words, say
    elif isinstance(o, Addr) and o.base is not None:
        _regs(o.base, out, variable)
    elif isinstance(o, TensorAddr):
        for part in (o.base, o.coords):
            if part is not None:
                _regs(part, out, variable)
    elif isinstance(o, (Vec, ArgList)):
        for e in o.elems:
            if e is not None:
                _regs(e, out, variable)
    elif isinstance(o, PredPair):
        _regs(o.p, out, variable)
        if o.q is not None:
            _regs(o.q, out, variable)


def _use_def(ins: Instruction, variable):
    if ins.opcode in _IGNORED:
        return set(), set()
    uses, defs = set(), set()
    ops = list(ins.operands)
    if ops and ins.opcode in DEFINES and ins.guard is None and not isinstance(ops[0], Addr):
        _regs(ops.pop(0), defs, variable)
    for o in ops:
        _regs(o, uses, variable)
    if ins.guard is not None:
        _regs(ins.guard, uses, variable)
    return uses, defs


def live_at_labels(items: list, labels: set, is_call, is_return, variable=lambda name: ()) -> dict:
    """{label: registers live on entry to it} for the `labels` among `items`; `variable`
    gives the registers that hold a variable named in an address (its .param words)."""
    at = {it: i for i, it in enumerate(items) if isinstance(it, str)}
    n = len(items)
    succ, use, kill = [], [], []
    for i, it in enumerate(items):
        nxt = [i + 1] if i + 1 < n else []
        if not isinstance(it, Instruction):
            succ.append(nxt)
            use.append(set())
            kill.append(set())
            continue
        u, d = _use_def(it, variable)
        use.append(u)
        kill.append(d)
        if it.opcode in _ENDS and it.guard is None:
            succ.append([])
        elif it.opcode == "bra" and it.operands and isinstance(it.operands[0], Sym):
            target = it.operands[0].name
            if is_call(target):
                to = nxt
            elif is_return(target):
                to = []
            else:
                to = [at[target]] if target in at else []
            succ.append(to + (nxt if it.guard is not None else []))
        else:
            succ.append(nxt)
    live = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = set().union(*(live[j] for j in succ[i])) if succ[i] else set()
            new = use[i] | (out - kill[i])
            if new != live[i]:
                live[i] = new
                changed = True
    return {label: live[at[label]] for label in labels if label in at}


__all__ = ["live_at_labels", "DEFINES"]

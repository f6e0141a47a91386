"""Recursive device functions: real calls with a per-thread call stack.

calls.py inlines every call; a call of a function that is already being expanded (direct
or mutual recursion) cannot be inlined, so it becomes a real call of one out-of-line copy
of that function (a Subroutine, its registers and labels renamed with `@rN`) placed after
the kernel's code:

    _frame_push                   (only inside a subroutine: save its registers)
    mov.b64 callee params <- the caller's argument words
    mov.u32 %__ra@rN, <site id>;  bra __entry@rN;
  site:
    mov.b64 temps <- callee's return words;  _frame_pop;  caller's results <- temps

and each `ret` of the copy branches to a dispatch on %__ra@rN back to its call sites (the
ordinary branch machinery handles threads returning to different sites). `_frame_push`
saves every register and .param word of the enclosing subroutine on the thread's stack
(`_frame_pop` restores them), so each activation keeps its own values.

The stack: the context's CU_LIMIT_STACK_SIZE per thread (handed to the launch by
driver/limits.py; CALL_STACK_BYTES, 1024, the default, where no driver runs the kernel), a frame costing the bytes of the registers it saves
(more than ptxas keeps, so a recursion faults at a depth no greater than on a GPU). A
deeper recursion faults with CUDA_ERROR_ILLEGAL_ADDRESS, "stack overflow", naming the
function, the depth and the frame size. A recursive function with .local variables
(stack frames in local memory, as -G builds make) is refused by name at load.
"""
from __future__ import annotations

import copy

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.ir import TYPES, Imm, Instruction, Reg, Sym, Variable
from . import liveness
from .operands import unsupported
from .registry import LaunchState, family, provide

CALL_STACK_BYTES = 1024
_WORD = 8


class Subroutine:
    def __init__(self, name: str, sfx: str):
        self.name, self.sfx = name, sfx
        self.entry, self.ret = f"__entry{sfx}", f"__ret{sfx}"
        self.ra = f"%__ra{sfx}"
        self.sites: list[str] = []
        self.params: list = []            # (variable name, size) of the copy's parameters
        self.returns: list = []
        self.body: list | None = None
        self.site_frames: list = []       # SiteFrame of each call made from this body


class SiteFrame:
    """What one call site inside a subroutine saves around its call: the registers of the
    enclosing activation that are live after the call (finish_frame)."""

    def __init__(self, owner: Subroutine, site: str):
        self.owner, self.site = owner, site
        self.name = owner.name
        self.registers: list[str] = []
        self.frame_bytes = 0


def _words(size: int) -> int:
    return -(-size // _WORD)


def _pv(name: str, word: int) -> str:
    return f"%__pv:{name}:{word}"


def _param_size(k, name: str) -> int:
    return max((v.size for v in k.variables if v.space == "param" and v.name == name), default=0)


def subroutine(k, ctx, f) -> Subroutine:
    """The out-of-line copy of f (made once per kernel)."""
    sub = ctx.subs.get(f.name)
    if sub is not None:
        return sub
    ctx[0] += 1
    sub = ctx.subs[f.name] = Subroutine(f.name, f"@r{ctx[0]}")
    k.registers[sub.ra] = "u32"
    k.registers[f"%__rp{sub.sfx}"] = "pred"
    for p in f.params:
        sub.params.append((p.name + sub.sfx, p.size))
    for p in getattr(f, "return_params", []):
        sub.returns.append((p.name + sub.sfx, p.size))
    for name, size in sub.params + sub.returns:
        k.variables.append(Variable(name, "param", "b8", size, 8))
    return sub


def call_site(k, ins, f, rets, args, ctx) -> list:
    """The items a recursive call becomes (see the module docstring)."""
    sub = subroutine(k, ctx, f)
    frame = ctx.frame
    line, text = ins.line, ins.text
    site = f"__site{sub.sfx}_{len(sub.sites)}"
    skip = f"{site}_skip"
    items = []
    if ins.guard is not None:
        items.append(Instruction("bra", [], [Sym(skip)], line, text,
                                 Reg(ins.guard.name, not ins.guard.negated)))
    if frame is not None:
        frame = SiteFrame(frame, site)
        ctx.frame.site_frames.append(frame)
        items.append(_frame_op("_frame_push", frame, line, text))
    for (dst, size), src in zip(sub.params, args):
        for w in range(_words(size)):
            items.append(_mov(k, _pv(dst, w), _pv(src, w), line, text))
    items.append(Instruction("mov", ["u32"], [Reg(sub.ra), Imm(len(sub.sites))], line, text))
    items.append(Instruction("bra", [], [Sym(sub.entry)], line, text))
    items.append(site)
    sub.sites.append(site)
    temps = []
    for j, ((src, size), dst) in enumerate(zip(sub.returns, rets)):
        for w in range(_words(size)):
            tmp = f"%__rt{sub.sfx}:{len(sub.sites)}:{j}:{w}"
            items.append(_mov(k, tmp, _pv(src, w), line, text))
            temps.append((dst, w, tmp))
    if frame is not None:
        items.append(_frame_op("_frame_pop", frame, line, text))
    for dst, w, tmp in temps:
        items.append(_mov(k, _pv(dst, w), tmp, line, text))
    items.append(skip)
    return items


def _mov(k, dst: str, src: str, line, text) -> Instruction:
    for r in (dst, src):
        k.registers[r] = "b64"
    return Instruction("mov", ["b64"], [Reg(dst), Reg(src)], line, text)


def _frame_op(opcode, frame, line, text) -> Instruction:
    ins = Instruction(opcode, [], [], line, text)
    ins.frame = frame
    return ins


def body_of(k, f, sub: Subroutine, renamer_cls, used_names) -> list:
    """The copy's body before its own calls are expanded: renamed, `ret` -> dispatch."""
    regs = {}
    for r in used_names(f.body):
        t = f.registers.get(r)
        if t is not None:
            regs[r] = r + sub.sfx
            k.registers[r + sub.sfx] = t
    labels = {it: it + sub.sfx for it in f.body if isinstance(it, str)}
    syms = {p.name: n for p, (n, _) in zip(f.params, sub.params)}
    syms.update({p.name: n for p, (n, _) in zip(getattr(f, "return_params", []), sub.returns)})
    for v in f.variables:
        if v.space == "shared":
            if not any(x.name == v.name and x.space == "shared" for x in k.variables):
                k.variables.append(v)
            continue
        if v.space == "local":
            raise unsupported(_first_instruction(f), f"recursion of {f.name!r}, which keeps "
                                                     f".local variables (a stack frame in local "
                                                     f"memory)")
        syms[v.name] = v.name + sub.sfx
        nv = copy.copy(v)
        nv.name = v.name + sub.sfx
        k.variables.append(nv)
    ren = renamer_cls(regs, labels, syms)
    out = [sub.entry]
    for it in f.body:
        if isinstance(it, str):
            out.append(labels[it])
            continue
        new = ren.instruction(it)
        if new.opcode == "ret":
            new = Instruction("bra", [], [Sym(sub.ret)], it.line, it.text, new.guard)
        out.append(new)
    return out


def _first_instruction(f):
    return next((it for it in f.body if isinstance(it, Instruction)),
                Instruction("call", [], [], f.line, f".func {f.name}"))


def tail(sub: Subroutine, line: int) -> list:
    """The dispatch that returns to the call sites, after the copy's body."""
    p = f"%__rp{sub.sfx}"
    out = [sub.ret]
    for i, site in enumerate(sub.sites):
        out.append(Instruction("setp", ["eq", "u32"], [Reg(p), Reg(sub.ra), Imm(i)], line,
                               f"return of {sub.name}"))
        out.append(Instruction("bra", [], [Sym(site)], line, f"return of {sub.name}", Reg(p)))
    out.append(Instruction("trap", [], [], line, f"return of {sub.name}"))
    return out


def finish_frame(k, sub: Subroutine, expanded: list) -> None:
    """What each call site in `sub`'s expanded body saves: the registers live after its
    call (liveness.py), and the return site register, which the dispatch reads."""
    live = liveness.live_at_labels(expanded, {f.site for f in sub.site_frames},
                                   lambda label: label.startswith("__entry"),
                                   lambda label: label.startswith("__ret"),
                                   lambda name: [_pv(name, w) for w in
                                                 range(_words(_param_size(k, name)))])
    for frame in sub.site_frames:
        names = {n for n in live[frame.site] if not n.startswith("%__rt")} | {sub.ra}
        for n in names:
            if n.startswith("%__pv:") and n not in k.registers:
                k.registers[n] = "b64"
        frame.registers = sorted(n for n in names if n in k.registers)
        frame.frame_bytes = max(1, sum(_cost(k, n) for n in frame.registers))


def _cost(k, name: str) -> int:
    """Bytes of the stack limit one saved register takes: its size (a .param word: the
    bytes of the variable it holds)."""
    if name.startswith("%__pv:"):
        var, word = name[len("%__pv:"):].rsplit(":", 1)
        size = _param_size(k, var)
        if size:
            return max(1, min(_WORD, size - _WORD * int(word)))
    return max(1, TYPES[k.registers[name]][0])


# --- the frame pseudo instructions --------------------------------------------------------

def _emit_push(g, ins):
    frame = ins.frame
    vals = [g.read(ins, Reg(n), _bits_type(g, n)) for n in frame.registers]
    iid = g.ns["_register_instruction"](ins)
    name = f"_frame{id(frame)}"
    g.ns[name] = frame
    g.emit(f"_push_frame(C, {name}, ({', '.join(vals)}{',' if vals else ''}), {iid})")


def _emit_pop(g, ins):
    frame = ins.frame
    iid = g.ns["_register_instruction"](ins)
    tmp = g.fresh()
    name = f"_frame{id(frame)}"
    g.ns[name] = frame
    g.emit(f"{tmp} = _pop_frame(C, {name}, {iid})")
    for i, n in enumerate(frame.registers):
        t = _bits_type(g, n)
        expr = f"({tmp}[{i}] != 0)" if t == "pred" else f"{tmp}[{i}].astype(_U{TYPES[t][0] * 8})"
        g.write(ins, Reg(n), expr, t, None)


def _bits_type(g, name: str) -> str:
    rtype = g.ck.kernel.registers[name]
    return "pred" if rtype == "pred" else f"u{TYPES[rtype][0] * 8}"


def _stack(C, words: int):
    """The batch's call stacks (one row of saved words per lane), grown to hold `words`."""
    state = C.recursion_state
    if state.stack is None:
        state.stack = np.zeros((C.n_lanes, 16), np.uint64)
        state.sp = np.zeros(C.n_lanes, np.int64)          # words in use
        state.used = np.zeros(C.n_lanes, np.int64)        # bytes of the stack limit in use
    if words > state.stack.shape[1]:
        grown = np.zeros((C.n_lanes, max(words, 2 * state.stack.shape[1])), np.uint64)
        grown[:, :state.stack.shape[1]] = state.stack
        state.stack = grown
    return state


class CallStacks(LaunchState):
    """The call stacks of the batch running (made on its first recursive call): the saved
    words of each lane, how many are in use, and the bytes of the stack limit in use."""
    __slots__ = ("stack", "sp", "used")

    def __init__(self, launch) -> None:
        self.new_batch(launch)

    def new_batch(self, launch) -> None:
        self.stack = self.sp = self.used = None


def _current(C):
    """(positions among the current lanes, batch lanes) of the active current lanes."""
    active, _ = C.active_with(None)
    pick = np.arange(C.n) if active is None else np.flatnonzero(active)
    lanes = pick if C.lanes is None else C.lanes[pick]
    return pick, lanes


def push_frame(C, frame, values, iid: int) -> None:
    """Save `values` (the frame's registers over the current lanes) for the active lanes;
    a frame beyond the stack limit is a stack overflow."""
    pick, lanes = _current(C)
    if lanes.size == 0:
        return
    state = _stack(C, 0)
    used = state.used[lanes] + frame.frame_bytes
    limit = CALL_STACK_BYTES if C.stack_bytes is None else C.stack_bytes   # CU_LIMIT_STACK_SIZE
    if (used > limit).any():
        j = int(np.argmax(used > limit))
        ins = C.ck.instructions[iid]
        raise KernelFault("CUDA_ERROR_ILLEGAL_ADDRESS",
                          f"{C.name}: stack overflow in the recursion of {frame.name!r} by "
                          f"{C.who_batch(int(lanes[j]))}: frame {int(used[j]) // frame.frame_bytes} "
                          f"of {frame.frame_bytes} bytes exceeds the {limit}-byte "
                          f"per-thread stack, PTX line {ins.line}: {ins.text}")
    n = len(values)
    sp = state.sp[lanes]
    _stack(C, int(sp.max()) + n)
    if n:
        block = np.stack([np.broadcast_to(np.asarray(v).astype(np.uint64), (C.n,))[pick]
                          for v in values], axis=1)
        state.stack[lanes[:, None], sp[:, None] + np.arange(n)] = block
    state.sp[lanes] = sp + n
    state.used[lanes] = used


def pop_frame(C, frame, iid: int):
    """The registers the matching push saved, over the current lanes (others: zeros)."""
    n = len(frame.registers)
    out = np.zeros((n, C.n), np.uint64)
    pick, lanes = _current(C)
    if lanes.size == 0:
        return out
    state = _stack(C, 0)
    sp = state.sp[lanes] - n
    if (sp < 0).any():
        ins = C.ck.instructions[iid]
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED", f"{C.name}: return of {frame.name!r} "
                                                      f"with an empty call stack, PTX line {ins.line}")
    if n:
        out[:, pick] = state.stack[lanes[:, None], sp[:, None] + np.arange(n)].T
    state.sp[lanes] = sp
    state.used[lanes] -= frame.frame_bytes
    return out


FAMILY = family("recursion", __name__, state=CallStacks)
FAMILY.declare("_frame_push", emit=_emit_push)
FAMILY.declare("_frame_pop", emit=_emit_pop)
provide(_push_frame=push_frame, _pop_frame=pop_frame)

__all__ = ["CALL_STACK_BYTES", "Subroutine", "call_site", "body_of", "tail", "finish_frame",
           "push_frame", "pop_frame"]

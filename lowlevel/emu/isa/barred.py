"""Barrier reductions: `bar.red` (`__syncthreads_count`, `__syncthreads_and`, `__syncthreads_or`).

    bar{.cta}.red.popc{.aligned}.u32  d, a{, b}, {!}c;     d = how many arriving threads have c
    bar{.cta}.red.and{.aligned}.pred  p, a{, b}, {!}c;     p = every arriving thread has c
    bar{.cta}.red.or{.aligned}.pred   p, a{, b}, {!}c;     p = some arriving thread has c
    (and barrier{.cta}.red... with the same operands)

A `bar.red` is a `bar.sync` on barrier `a` (optional thread count `b`, immediates, as for
bar.sync; engine/scheduler.py parks and releases the lanes) that also reduces the predicates of the
threads of the CTA that arrive. Exited threads count as arrived and do not contribute.
Decoding splits it in two (split_blocks, via `follower`):

- `bar.red` itself ends its basic block like bar.sync; it records each arriving lane's
  predicate (`arrive`). On the converged path every live lane of every CTA is there, so
  the per-CTA reduction is computed at once, vectorized over a (CTAs, threads) view.
  On the divergent path the lanes arrive at different times: their predicates are kept
  per lane and the engine calls `release` when it releases them, which reduces over the
  released lanes of each (CTA, barrier id).
- `_bar_red_get d` starts the next block (reachable only from the barrier: it has no
  label) and reads each lane's result into `d`.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from .operands import Mods, unsupported
from .registry import LaunchState, family, provide
from ..ptx.ir import Instruction, Reg

_OPS = {"popc": ("u32", 1), "and": ("pred", 2), "or": ("pred", 3)}
_U32 = np.uint32


def emit_bar_red(g, ins: Instruction, m: Mods, barrier_id_count) -> None:
    """bar.red (after emit_bar took .cta and .red); `barrier_id_count(ins, ops)` parses
    the id and thread count as for bar.sync."""
    op = m.take(*_OPS)
    m.take("aligned")
    t = m.one_type({"u32", "pred"})
    m.done()
    if op is None:
        raise unsupported(ins, "reduction (expected .popc, .and or .or)")
    if t != _OPS[op][0]:
        raise PtxError(ins.line, f"bar.red.{op} takes a .{_OPS[op][0]} destination: {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated barrier")
    ops = ins.operands
    if len(ops) not in (3, 4):
        raise PtxError(ins.line, f"bar.red takes a destination, a barrier id, an optional "
                                 f"thread count and a predicate: {ins.text}")
    if not isinstance(ops[0], Reg) or ops[0].negated:
        raise PtxError(ins.line, f"bar.red needs a register destination: {ins.text}")
    if not isinstance(ops[-1], Reg):
        raise unsupported(ins, "an immediate predicate")
    g.barrier = barrier_id_count(ins, ops[1:-1])
    g.barrier_red = op
    g.ck.reductions = True
    pred = g.read(ins, ops[-1], "pred")
    g.emit(f"_bar_red_arrive(C, {op!r}, {pred})")


def follower(ins: Instruction) -> Instruction | None:
    """The pseudo instruction that delivers a bar.red's result (first of the next block)."""
    if ins.opcode not in ("bar", "barrier") or "red" not in ins.mods:
        return None
    t = "pred" if "pred" in ins.mods else "u32"
    d = ins.operands[0] if ins.operands else None
    return Instruction("_bar_red_get", [t], [d], ins.line, ins.text, None)


def emit_bar_red_get(g, ins: Instruction) -> None:
    t = ins.mods[0]
    d = ins.operands[0]
    if t == "pred":
        g.write(ins, d, "(_bar_red_result(C) != _U32(0))", "pred", None)
    else:
        g.write(ins, d, "_bar_red_result(C)", "u32", None)


# --- runtime ---------------------------------------------------------------------------------

class Reductions(LaunchState):
    """bar.red and barrier.sync %r in a launch: each lane's predicate and result in the batch
    running (made on the first bar.red of the batch); which reduction each block's barrier
    does (made on the first release); the id each `barrier.sync %r` read last, by
    instruction (dynamic_id, for the scheduler's release: resolve_ids)."""
    __slots__ = ("pred", "result", "codes", "dynamic_ids")

    def __init__(self, launch) -> None:
        self.pred = self.result = self.codes = None
        self.dynamic_ids = {}

    def new_batch(self, launch) -> None:
        self.pred = self.result = None


def _state(C):
    """Per-lane predicate and result arrays of the current batch."""
    state = C.barred_state
    if state.pred is None:
        state.pred = np.zeros(C.n_lanes, bool)
        state.result = np.zeros(C.n_lanes, _U32)
    return state.pred, state.result


def arrive(C, op: str, pred) -> None:
    preds, result = _state(C)
    p = np.broadcast_to(np.asarray(pred, bool), (C.n,))
    if C.lanes is not None:                 # divergent: reduced when the engine releases
        preds[C.lanes] = p
        return
    # converged: every live lane of every CTA of the batch is at this barrier
    act = C.active
    q = p if act is None else p & act
    count = q.reshape(-1, C.padded).sum(axis=1)
    if op == "popc":
        r = count
    elif op == "or":
        r = count > 0
    else:
        live = C.threads_per_cta if act is None else act.reshape(-1, C.padded).sum(axis=1)
        r = count == live
    result[:] = np.repeat(np.asarray(r, _U32), C.padded)


def release(C, lanes, blocks, keys) -> None:
    """The engine released `lanes` (batch lanes, parked at barrier blocks `blocks`, grouped
    by `keys`: one per CTA (or cluster) and barrier id): deliver the reduction of each group."""
    table = C.barred_state.codes
    if table is None:
        table = C.barred_state.codes = np.array(
            [_OPS[b.reduction][1] if b.reduction else 0 for b in C.ck.blocks], np.int8)
    code = table[blocks]
    sel = code != 0
    if not sel.any():
        return
    lanes, keys, code = lanes[sel], keys[sel], code[sel]
    preds, result = _state(C)
    _, inverse = np.unique(keys, return_inverse=True)
    p = preds[lanes]
    count = np.bincount(inverse, weights=p).astype(np.int64)
    arrived = np.bincount(inverse)
    c, a = count[inverse], arrived[inverse]
    result[lanes] = np.where(code == 1, c, np.where(code == 2, c == a, c > 0)).astype(_U32)


def result(C):
    _, r = _state(C)
    return r.copy() if C.lanes is None else r[C.lanes]


def dynamic_id(C, value, iid: int) -> None:
    """The id of a `barrier.sync %r`: 0..15, and the same for the threads that execute
    the instruction together (the emulator keeps the id of its latest execution, for the
    engine's release: read by resolve_ids)."""
    active, any_active = C.active_with(None)
    if not any_active:
        return
    v = np.broadcast_to(np.asarray(value, np.uint32), (C.n,))
    v = v if active is None else v[active]
    ins = C.ck.instructions[iid]
    if v.size == 0:
        return
    bid = int(v[0])
    if (v != v[0]).any():
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{C.name}: threads wait at barrier.sync with different barrier ids "
                          f"({sorted(set(v.tolist()))}) at PTX line {ins.line}: {ins.text}; "
                          f"the emulator needs one id per barrier instruction at a time")
    if bid > 15:
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{C.name}: barrier id {bid} outside 0..15 at PTX line {ins.line}: "
                          f"{ins.text}")
    C.barred_state.dynamic_ids[iid] = bid


def resolve_ids(C, bid):
    """Barrier ids of parked lanes: -1 - iid stands for the id barrier.sync %r read."""
    dyn = bid < 0
    if dyn.any():
        bid = bid.copy()
        bid[dyn] = [C.barred_state.dynamic_ids[-1 - int(b)] for b in bid[dyn]]
    return bid


provide(_bar_dynamic_id=dynamic_id)


FAMILY = family("barred", __name__, state=Reductions,
                hooks={"barrier_ids": resolve_ids, "barrier_release": release})
FAMILY.declare("_bar_red_get", emit=emit_bar_red_get)
provide(_bar_red_arrive=arrive, _bar_red_result=result)

__all__ = ["emit_bar_red", "follower", "release", "resolve_ids"]

"""mbarrier: the split-phase barriers in shared memory that `cuda::barrier` and
`cuda::pipeline` are built on (PTX ISA, "Parallel Synchronization and Communication
Instructions: mbarrier").

    mbarrier.init{.shared{::cta}}.b64                 [addr], count;
    mbarrier.inval{.shared{::cta}}.b64                [addr];
    mbarrier.arrive{.noComplete|.expect_tx}{.sem}{.scope}{.shared{::cta}}.b64
                                                      state, [addr]{, count | txCount};
    mbarrier.arrive_drop{...}.b64                     state, [addr]{, count | txCount};
    mbarrier.expect_tx / complete_tx{.sem}{.scope}{.shared{::cta}}.b64  [addr], txCount;
    mbarrier.test_wait{.parity}{.sem}{.scope}{.shared{::cta}}.b64
                                                      waitComplete, [addr], state | parity;
    mbarrier.try_wait{.parity}{...}.b64               waitComplete, [addr], state | parity
                                                      {, suspendTimeHint};
    mbarrier.pending_count.b64                        count, state;
    mbarrier.arrive{.expect_tx}{.sem}{.scope}.shared::cluster.b64   _, [addr]{, count | txCount};
    mbarrier.arrive_drop{...}.shared::cluster.b64     _, [addr]{, count | txCount};
    mbarrier.expect_tx / complete_tx{.sem}{.scope}.shared::cluster.b64  [addr], txCount;
    cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64   [addr];   (asyncopy.py)

The object is 8 bytes of shared memory whose encoding the ISA leaves opaque; here it is
    bits 0-19 pending arrivals, 20-39 expected arrivals, 40 phase parity,
    41-61 tx-count (21-bit two's complement), 62-63 the tag 0b10 of a valid object.
Fresh shared memory (0xFF bytes), zeros, an invalidated object (mbarrier.inval writes 0)
and ordinary data stored over it lack the tag, so using an object that mbarrier.init did
not set up faults (CUDA_ERROR_LAUNCH_FAILED) instead of doing something plausible. The
`state` an arrive returns is the object as it was before that arrive (same encoding), so
waits and pending_count can check that they were given one.

Semantics (the ISA's): an arrive decrements the pending count by `count` (default 1),
arrive_drop also the expected count; expect_tx adds to the tx-count, complete_tx
subtracts. When both pending count and tx-count are 0 the phase completes: the parity
flips and the pending count reloads from the expected count. A wait on `state` succeeds
once the phase that state was taken in has completed (the parity differs); a wait on
`parity` once the phase of that parity has. What the ISA leaves undefined faults: a count
outside 1..2^20-1, arriving with more than the pending count, a .noComplete arrive that
completes the phase, a tx-count leaving -(2^20-1)..2^20-1, a generic address outside the
shared window. Scopes and memory-ordering qualifiers change nothing here (every access is
sequentially consistent).

Clusters (sm_90): the updating forms (arrive, arrive_drop, expect_tx, complete_tx) take a
.shared::cluster address (mapa.shared::cluster, isa/cluster.py), so a thread can arrive on
the barrier of another CTA of its cluster; such an arrive returns no state (its
destination is the sink `_`, as ptxas requires). The update lands on the peer CTA's object
with the same rules, and that CTA's waiters see its phase complete: a cluster's CTAs run in
one batch (cluster.py), so a waiter that fails parks and the arriving CTA runs (the
scheduler's wait handling, engine/waits.py). init, inval, the waits and pending_count work
on the executing CTA's own objects only (.shared::cta or generic), as the ISA defines them;
a generic address of another CTA's shared memory is out of the CTA's window and faults.

Threads of one instruction that hit the same object are serialized in lane order by the
engine's atomics (engine/atomics.py), so returned states form the same chain as on a GPU
that ran them in that order (mbarstate.py: the encoding, and the chain of a run of threads
computed at once). Converged CTAs arriving on or waiting at one object each, at a uniform
address (a `cuda::barrier` loop), skip that sort: mbarfast.py computes the same chain per
CTA, and a wait whose phase is over on every lane returns one scalar True.
"""
from __future__ import annotations

import numpy as np

from ..engine import waits
from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Imm, Reg, Sym
from .addressing import SHARED_WINDOW, WINDOW_SPAN
from .addressing import address, take_space
from .operands import Mods, unsupported
from . import mbarfast
from .mbarstate import FIELD, STEPS, decode, encode, is_valid, phase_of, unpack
from .registry import LaunchState, family, provide

_U64 = np.uint64
_SCOPE_MODS = {"relaxed", "acquire", "release", "cta", "cluster"}
_REMOTE_FORMS = {"arrive", "arrive_drop", "expect_tx", "complete_tx"}   # take .shared::cluster


# --- runtime --------------------------------------------------------------------------------

def _fault(C, active, bad, iid, what: str) -> None:
    """Raise for the first current lane in `bad` (a mask over the active lanes)."""
    j = int(np.flatnonzero(bad)[0])
    lanes = C.batch_lanes(active, None)
    ins = C.ck.instructions[iid]
    raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                      f"{C.name}: {what} (undefined behaviour on a GPU) by "
                      f"{C.who_batch(int(lanes[j]))}, PTX line {ins.line}: {ins.text}")


def _lanes(C, x, active, dtype):
    x = np.broadcast_to(np.asarray(x, dtype), (C.n,))
    return x if active is None else x[active]


def _shared_offsets(C, addr, generic: bool, active, iid):
    """Shared-window offsets of the objects (over the current lanes); for .shared::cluster
    the cluster addresses as they are (the engine resolves the CTA)."""
    a = np.broadcast_to(np.asarray(addr, np.uint64), (C.n,))
    if generic is not True:
        return a
    mine = _lanes(C, a, active, np.uint64)
    outside = (mine < _U64(SHARED_WINDOW)) | (mine >= _U64(SHARED_WINDOW + WINDOW_SPAN))
    if outside.any():
        _fault(C, active, outside, iid,
               f"mbarrier object at generic address {int(mine[np.argmax(outside)]):#x}, "
               f"outside shared memory")
    return a - _U64(SHARED_WINDOW)


def _check_state(C, active, words, iid, what: str) -> None:
    valid = is_valid(_lanes(C, words, active, np.uint64))
    if not valid.all():
        _fault(C, active, ~valid, iid, what)


def mbar_update(C, kind: str, generic, addr, b, nocomplete: bool, iid: int, guard):
    """One init/inval/arrive/arrive_drop/expect_tx/complete_tx instruction; returns the
    states (the objects before each thread's step) over the current lanes. `generic`:
    True for a generic address, False for .shared::cta, "cluster" for .shared::cluster."""
    states = mbarfast.arrive(C, kind, generic, addr, b, nocomplete, guard)
    if states is not None:
        return states
    active, any_active = C.active_with(guard)
    if not any_active:
        return np.zeros(C.n, np.uint64)
    off = _shared_offsets(C, addr, generic, active, iid)
    if kind == "init":
        count = _lanes(C, b, active, np.uint64)
        bad = (count < 1) | (count > _U64(FIELD))
        if bad.any():
            _fault(C, active, bad, iid, f"mbarrier.init with count {int(count[np.argmax(bad)])}, "
                                        f"outside 1..{FIELD}")
    C.mbar_updates += 1
    space = "shared::cluster" if generic == "cluster" else "shared"
    old = C.atom(space, off, STEPS[kind], "b64", b, None, iid, guard)
    if kind == "init":
        return old
    _check_state(C, active, old, iid, "mbarrier object not initialised by mbarrier.init "
                                      "(or invalidated)")
    if kind == "inval":
        return old
    _, pending, _, _, tx = decode(_lanes(C, old, active, np.uint64))
    count, dtx = unpack(_lanes(C, b, active, np.uint64))
    if (count > pending).any():
        bad = count > pending
        j = int(np.argmax(bad))
        _fault(C, active, bad, iid, f"mbarrier arrive with count {int(count[j])} while only "
                                    f"{int(pending[j])} arrivals are pending")
    out_of_range = np.abs(tx + dtx) > FIELD
    if out_of_range.any():
        _fault(C, active, out_of_range, iid, "mbarrier tx-count outside "
                                              f"-{FIELD}..{FIELD}")
    if nocomplete:
        completes = (pending == count) & (tx + dtx == 0)
        if completes.any():
            _fault(C, active, completes, iid, "mbarrier.arrive.noComplete completed the phase")
    return old


def is_wait(ins) -> bool:
    """test_wait / try_wait: alone in a basic block, so a failed one can yield (engine/waits.py)."""
    return ins.opcode == "mbarrier" and ("test_wait" in ins.mods or "try_wait" in ins.mods)


def mbar_wait(C, generic: bool, addr, token, parity: bool, iid: int, guard):
    """test_wait/try_wait: True where the phase of `token` (a state, or a parity) is over.
    Tells the scheduler which lanes failed (engine/waits.py)."""
    C.wait_failed = None
    quick = mbarfast.wait(C, generic, addr, token, parity, guard)
    if quick is not None:
        done, failed = quick
        if failed is not None and np.array_equal(failed, _all(C, C.active)):
            waits.converged_stall(C, iid)
        return done
    active, any_active = C.active_with(guard)
    if not any_active:
        return np.zeros(C.n, bool)
    off = _shared_offsets(C, addr, generic, active, iid)
    words = C.load_space("shared", off, 8, 1, iid, guard)
    _check_state(C, active, words, iid, "mbarrier object not initialised by mbarrier.init "
                                        "(or invalidated)")
    if parity:
        phase_of_token = np.asarray(token, np.uint32).astype(np.int64) & 1
    else:
        _check_state(C, active, token, iid, "mbarrier wait on a state that no mbarrier.arrive "
                                            "returned")
        phase_of_token = phase_of(token)
    done = np.broadcast_to(phase_of(words) != phase_of_token, (C.n,))
    failed = ~done if active is None else ~done & active
    if C.mbarrier_state.landing:                # bulk copies counted on it (bulkcopy.py)
        _land_bulk(C, off, ~failed if active is None else active & ~failed, iid)
    if C.lanes is not None:                     # divergent path: failed lanes park
        C.wait_failed = failed
    elif guard is None and failed.any() and np.array_equal(failed, _all(C, active)):
        waits.converged_stall(C, iid)
    return done


def _land_bulk(C, off, succeeded, iid) -> None:
    """Let the bulk copies counted on the barriers these waits saw complete land."""
    if succeeded.any():
        bars = C.window_index("shared", off[succeeded], 8, 1, iid, "load", succeeded, None)
        _land(C, bars)


def land_on_completion(C, bar, phases, dst, write) -> None:
    """Writes that land when a wait sees the phase of their barrier over (cp.async.bulk,
    st.async: complete_tx counted them): bar, phases, dst: the barrier byte index, its
    phase when counted, and the destination byte index, per thread; write(C, dst, m) lands
    the writes of the threads picked by mask m."""
    state = C.mbarrier_state
    state.landings.append((bar, phases, dst, write, np.ones(bar.size, bool)))
    state.landing = True


def _land(C, bars) -> None:
    """Land the pending writes counted on barriers (byte indices `bars`) in a phase that
    is over, in issue order."""
    state = C.mbarrier_state
    if not state.landings:
        return
    want = np.unique(np.asarray(bars, np.int64))
    keep = []
    for bar, phase, dst, write, left in state.landings:
        lands = left & np.isin(bar, want)
        if lands.any():             # the object's phase now, from its 8 bytes
            words = C.smem[bar[lands][:, None] + np.arange(8)].view(np.uint64)[:, 0]
            lands[lands] = decode(words)[3] != phase[lands]
            if lands.any():
                write(C, dst[lands], lands)
                left = left & ~lands
        if left.any():
            keep.append((bar, phase, dst, write, left))
    state.landings[:] = keep


class MbarrierState(LaunchState):
    """What the mbarrier instructions keep for a launch: the fast path's caches
    (mbarfast.py: where each CTA's object is, each lane's arrivals before it, the states
    the last converged arrive returned), and the writes waiting for a phase to complete
    (`landings`, of the batch running; `landing`: some were counted in this launch, so
    waits take the exact path that lands them)."""
    __slots__ = ("objects", "rank_step", "states", "landing", "landings")

    def __init__(self, launch) -> None:
        self.objects = None         # (key, element index of the object in each CTA)
        self.rank_step = None       # (key, each lane's arrivals before it, times a step)
        self.states = None          # (states array, its phase)
        self.landing = False
        self.landings = []

    def new_batch(self, launch) -> None:
        self.landings = []


def _all(C, active):
    return np.ones(C.n, bool) if active is None else active


def mbar_pending(C, state, iid: int, guard):
    active, any_active = C.active_with(guard)
    if any_active:
        _check_state(C, active, state, iid, "mbarrier.pending_count of a state that no "
                                            "mbarrier.arrive returned")
    return decode(state)[1].astype(np.uint32)


provide(_mbar_update=mbar_update, _mbar_wait=mbar_wait, _mbar_pending=mbar_pending)


# --- emitters -------------------------------------------------------------------------------

_FORMS = {"init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait",
          "try_wait", "pending_count"}


def _mods(ins):
    """(form, space, variant modifiers) after refusing what the emulator cannot run."""
    m = Mods(ins)
    form = m.take(*_FORMS)
    if form is None:
        raise unsupported(ins, "mbarrier form")
    extra = {x for x in ("expect_tx", "noComplete", "parity") if m.take(x)}
    m.take_all(_SCOPE_MODS)
    space = take_space(ins, m, "shared", cluster_ok=form in _REMOTE_FORMS)
    m.one_type({"b64"})
    m.done()
    if space == "shared::cluster" and "noComplete" in extra:
        raise PtxError(ins.line, f"mbarrier .noComplete takes no .shared::cluster address: {ins.text}")
    return form, space, extra


def _address(g, ins, op, space):
    if not isinstance(op, Addr):
        raise PtxError(ins.line, f"mbarrier needs an [address] operand: {ins.text}")
    g.ck.uses_shared = True
    return address(g, ins, op, space or "generic")


def _space_arg(space) -> str:
    """How mbar_update is told the address's space (see its docstring)."""
    return {None: "True", "shared": "False", "shared::cluster": "'cluster'"}[space]


def _value(g, ins, op, ptype="u32"):
    if isinstance(op, Imm) and op.is_float:
        raise PtxError(ins.line, f"mbarrier takes integer operands: {ins.text}")
    return g.read(ins, op, ptype)


def _sink(op):
    return None if isinstance(op, Sym) and op.name == "_" else op


def emit_mbarrier(g, ins) -> None:
    form, space, extra = _mods(ins)
    ops = list(ins.operands)
    guard = g.guard(ins)
    gexpr = guard if guard is not None else "None"
    generic = space is None
    if form == "pending_count":
        if len(ops) != 2:
            raise PtxError(ins.line, f"mbarrier.pending_count takes count, state: {ins.text}")
        iid = g.ns["_register_instruction"](ins)
        g.write(ins, ops[0], f"_mbar_pending(C, {_value(g, ins, ops[1], 'b64')}, {iid}, {gexpr})",
                "u32", guard)
        return
    if form in ("test_wait", "try_wait"):
        _emit_wait(g, ins, form, ops, extra, generic, gexpr, guard, space)
        return
    dest = None
    if form in ("arrive", "arrive_drop"):
        if len(ops) not in (2, 3):
            raise PtxError(ins.line, f"mbarrier.{form} takes state, [addr] and an optional "
                                     f"count: {ins.text}")
        dest = _sink(ops.pop(0))
        if space == "shared::cluster" and dest is not None:
            raise PtxError(ins.line, f"mbarrier.{form} on a .shared::cluster address returns no "
                                     f"state: its destination must be the sink '_': {ins.text}")
    want = {"init": 2, "inval": 1, "expect_tx": 2, "complete_tx": 2}.get(form)
    if want is not None and len(ops) != want:
        raise PtxError(ins.line, f"mbarrier.{form} takes {want} operands: {ins.text}")
    a = _address(g, ins, ops[0], space)
    arg = _value(g, ins, ops[1]) if len(ops) > 1 else None
    b, kind = _packed(g, ins, form, extra, arg)
    iid = g.ns["_register_instruction"](ins)
    call = (f"_mbar_update(C, {kind!r}, {_space_arg(space)}, {a}, {b}, {'noComplete' in extra}, "
            f"{iid}, {gexpr})")
    if dest is None:
        g.emit(call)
    else:
        g.write(ins, dest, call, "u64", guard)


def _packed(g, ins, form, extra, arg):
    """(expression of count | tx << 32, update kind) of an updating form."""
    if form == "init":
        return f"_U64({arg})", "init"
    if form == "inval":
        return g.const(np.uint64(0)), "inval"
    if form in ("expect_tx", "complete_tx"):
        tx = f"_U64({arg})" if form == "expect_tx" else f"(_U64(0) - _U64({arg}))"
        return f"(({tx} & _U64(0xFFFFFFFF)) << _U64(32))", "arrive"
    if "expect_tx" in extra:                       # arrive.expect_tx: count 1, txCount
        if arg is None or "noComplete" in extra:
            raise PtxError(ins.line, f"mbarrier.{form}.expect_tx takes state, [addr], "
                                     f"txCount: {ins.text}")
        return f"(_U64(1) | (_U64({arg}) << _U64(32)))", form
    if "noComplete" in extra and arg is None:
        raise PtxError(ins.line, f"mbarrier.{form}.noComplete needs a count: {ins.text}")
    if arg is None:
        return g.const(np.uint64(1)), form
    guard = g.guard(ins)
    return (f"_mbar_count(C, {arg}, {g.ns['_register_instruction'](ins)}, "
            f"{guard if guard is not None else 'None'})"), form


def mbar_count(C, count, iid: int, guard):
    """An arrive's count operand, checked to lie in 1..2^20-1 on the arriving lanes."""
    c = np.asarray(count, np.uint32)
    active, any_active = C.active_with(guard)
    if any_active:
        bad = _lanes(C, (c < 1) | (c > FIELD), active, bool)
        if bad.any():
            _fault(C, active, bad, iid, f"mbarrier arrive count outside 1..{FIELD}")
    return c.astype(np.uint64)


provide(_mbar_count=mbar_count)


def _emit_wait(g, ins, form, ops, extra, generic, gexpr, guard, space):
    if len(ops) not in ((3, 4) if form == "try_wait" else (3,)):
        raise PtxError(ins.line, f"mbarrier.{form} takes waitComplete, [addr], "
                                 f"{'phaseParity' if 'parity' in extra else 'state'}"
                                 f"{', suspendTimeHint' if form == 'try_wait' else ''}: {ins.text}")
    if "expect_tx" in extra or "noComplete" in extra:
        raise unsupported(ins, "modifier on a wait")
    if len(ops) == 4:
        _value(g, ins, ops[3])                    # the time hint: every wait here is brief
    dest = ops[0]
    if not isinstance(dest, Reg):
        raise PtxError(ins.line, f"mbarrier.{form} writes a predicate: {ins.text}")
    a = _address(g, ins, ops[1], space)
    parity = "parity" in extra
    token = _value(g, ins, ops[2], "u32" if parity else "b64")
    iid = g.ns["_register_instruction"](ins)
    g.write(ins, dest, f"_mbar_wait(C, {generic}, {a}, {token}, {parity}, {iid}, {gexpr})",
            "pred", guard)


def emit_cp_async_arrive(g, ins, m) -> None:
    """cp.async.mbarrier.arrive{.noinc}: an arrive-on triggered when the thread's earlier
    cp.async copies complete: they land first (asyncopy.py), then it arrives: with .noinc it is an arrive with count 1; without, the ISA first adds 1 to the pending
    count, so the pair leaves the counts as they were (the object must still be valid)."""
    noinc = m.take("noinc")
    space = take_space(ins, m, "shared")
    m.one_type({"b64"})
    m.done()
    if len(ins.operands) != 1:
        raise PtxError(ins.line, f"cp.async.mbarrier.arrive takes [addr]: {ins.text}")
    guard = g.guard(ins)
    a = _address(g, ins, ins.operands[0], space)
    b = g.const(np.uint64(1 if noinc else 0))
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_cp_async_land_all(C, {guard if guard is not None else 'None'})")
    g.emit(f"_mbar_update(C, 'arrive', {_space_arg(space)}, {a}, {b}, False, {iid}, "
           f"{guard if guard is not None else 'None'})")


FAMILY = family("mbarrier", __name__, state=MbarrierState, parts=("mbarfast",))
FAMILY.declare("mbarrier", emit=emit_mbarrier, waits=is_wait, stalls="a phase that no thread can complete")

__all__ = ["encode", "decode", "emit_mbarrier", "emit_cp_async_arrive", "mbar_update", "mbar_wait"]

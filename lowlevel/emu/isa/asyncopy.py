"""Asynchronous copies from global to shared memory (sm_80 `cp.async`, `__pipeline_memcpy_async`).

    cp.async.ca.shared{::cta}.global{.L2::cache_hint}{.L2::64B|128B|256B}
                                      [dst], [src], cp-size{, src-size | ignore-src}{, policy};
    cp.async.cg.shared{::cta}.global...  [dst], [src], 16{, src-size | ignore-src}{, policy};
    cp.async.commit_group;  cp.async.wait_group N;  cp.async.wait_all;

The source is read when the instruction issues, and the copy lands in shared memory only
when the thread waits for it: cp-size (4, 8 or 16; .cg: 16) bytes at dst, of which the
first src-size (an immediate or a .u32 register; all of them when absent) come from global
memory at src and the rest are zeros; an ignore-src predicate that is true copies zeros
only. Until then the copy is pending in the thread's current group: commit_group closes the
group, wait_group N lands every committed group but the newest N, wait_all lands them all
(and the copies not yet committed), and cp.async.mbarrier.arrive lands the thread's copies
before it arrives. So a kernel that reads the destination before its wait reads what was
there before, as it may on a GPU, where the copy can land at any time in between (landing
at issue would hide the missing wait).

Checks, as for a global load and a shared store: src and dst aligned to cp-size
(CUDA_ERROR_MISALIGNED_ADDRESS), the src-size bytes read inside one allocation and the
cp-size bytes written inside the CTA's shared window (CUDA_ERROR_ILLEGAL_ADDRESS); a lane
that reads no bytes (src-size 0, or ignore-src) does not touch global memory and is not
checked there. Faults name the kernel, block, thread, PTX line and address.

cp.async.mbarrier.arrive{.noinc}: mbarrier.py (it lands the thread's copies, then arrives).
cp.async.bulk (sm_90's bulk copies completed through an mbarrier): bulkcopy.py; its .tensor
forms (TMA) and bulk groups: tma.py.
Refused at load: anything else.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from . import bulkcopy, mbarrier, tma
from .operands import Mods, operands, unsupported
from .registry import MEMORY, LaunchState, family, provide
from ..engine.memory import AccessFault
from ..ptx.ir import Addr, Imm, Instruction, Reg
from .addressing import address, operands_less_policy, take_space

_U64 = np.uint64


def emit_cp(g, ins: Instruction) -> None:
    m = Mods(ins)
    if m.take("async") is None:
        raise unsupported(ins)
    if m.take("bulk"):              # bulkcopy.py; TMA (.tensor) and the bulk groups: tma.py
        form = m.take("tensor", "commit_group", "wait_group")
        emit = bulkcopy.emit_bulk if form is None else tma.bulk_form_emitter(form)
        emit(g, ins, m)
        return
    if m.take("commit_group"):
        m.done()
        operands(ins, 0)
        _emit_group_call(g, ins, "_cp_async_commit(C, {guard})")
        return
    if m.take("wait_group"):
        m.done()
        (n,) = operands(ins, 1)
        if not isinstance(n, Imm) or n.is_float or n.value < 0:
            raise PtxError(ins.line, f"cp.async.wait_group takes an integer constant: {ins.text}")
        _emit_group_call(g, ins, f"_cp_async_wait(C, {int(n.value)}, {{guard}})")
        return
    if m.take("wait_all"):
        m.done()
        operands(ins, 0)
        _emit_group_call(g, ins, "_cp_async_wait(C, None, {guard})")
        return
    if m.take("mbarrier"):
        if m.take("arrive") is None:
            raise unsupported(ins, "cp.async.mbarrier form")
        mbarrier.emit_cp_async_arrive(g, ins, m)
        return
    for x in ins.mods:
        if x.startswith("bulk"):
            raise unsupported(ins, f".{x} copies")
    cache = m.take("ca", "cg")
    if cache is None:
        raise unsupported(ins, "form (expected .ca or .cg, or commit_group / wait_group / "
                               "wait_all)")
    dst_space = take_space(ins, m, "shared")
    src_space = m.take("global")
    for x in list(m.left):                        # the policy operand: operands_less_policy
        if x in ("L2::cache_hint", "L2::64B", "L2::128B", "L2::256B"):
            m.left.remove(x)
    m.done()
    if dst_space is None or src_space is None:
        raise PtxError(ins.line, f"cp.async copies .global to .shared: {ins.text}")
    ops = operands_less_policy(g, ins, 3)
    if len(ops) not in (3, 4):
        raise PtxError(ins.line, f"cp.async takes [dst], [src], cp-size and an optional "
                                 f"src-size or ignore-src: {ins.text}")
    dst, src, size = ops[:3]
    if not isinstance(dst, Addr) or not isinstance(src, Addr):
        raise PtxError(ins.line, f"cp.async needs [dst] and [src] addresses: {ins.text}")
    if not isinstance(size, Imm) or size.is_float or size.value not in (4, 8, 16):
        raise PtxError(ins.line, f"cp.async cp-size must be 4, 8 or 16: {ins.text}")
    cp = int(size.value)
    if cache == "cg" and cp != 16:
        raise PtxError(ins.line, f"cp.async.cg copies 16 bytes: {ins.text}")
    src_size = ignore = "None"
    if len(ops) == 4:
        extra = ops[3]
        if isinstance(extra, Imm):
            if extra.is_float or not 0 <= extra.value <= cp:
                raise PtxError(ins.line, f"cp.async src-size must be 0..{cp}: {ins.text}")
            if extra.value != cp:
                src_size = g.const(np.int64(extra.value))
        elif isinstance(extra, Reg) and g.ck.kernel.registers.get(extra.name) == "pred":
            ignore = g.read(ins, extra, "pred")
        elif isinstance(extra, Reg):
            src_size = g.read(ins, extra, "u32")
        else:
            raise PtxError(ins.line, f"bad src-size / ignore-src operand {extra}: {ins.text}")
    guard = g.guard(ins)
    g.ck.uses_shared = True
    d = address(g, ins, dst, "shared")
    s = address(g, ins, src, "global")
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_cp_async(C, {d}, {s}, {cp}, {src_size}, {ignore}, {iid}, "
           f"{guard if guard is not None else 'None'})")


def _emit_group_call(g, ins: Instruction, call: str) -> None:
    guard = g.guard(ins)
    g.ck.uses_shared = True
    g.emit(call.format(guard=guard if guard is not None else "None"))


def cp_async(C, dst, src, cp: int, src_size, ignore, iid: int, guard) -> None:
    """The copy of the current lanes that are active (and whose guard holds): the source
    read now, the shared bytes pending in each thread's current group."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    n = C.n

    def lanes_of(x, dtype):
        x = np.broadcast_to(np.asarray(x, dtype), (n,))
        return x if active is None else x[active]

    d = lanes_of(dst, np.uint64)
    s = lanes_of(src, np.uint64)
    j = np.arange(cp)
    mem = C.memory
    if src_size is None and ignore is None:
        off = C.global_index(s, cp, 1, iid, "load", active, None, "global")
        data = mem.u8[off[:, None] + j]
    else:
        if ignore is not None:
            k = np.where(lanes_of(ignore, bool), 0, cp)
        else:
            k = np.minimum(lanes_of(src_size, np.int64), cp)
        data = np.zeros((d.size, cp), np.uint8)
        reading = k > 0
        if reading.any():
            _check_source(C, s, k, cp, reading, iid, active)
            base = mem.offsets(s[reading], 1)          # checked: where each source starts
            take = j[None, :] < k[reading][:, None]
            rows = data[reading]
            rows[take] = mem.u8[(base[:, None] + j)[take]]
            data[reading] = rows
    C.require_space("shared")
    idx = C.window_index("shared", d, cp, 1, iid, "store", active, None)
    idx = idx[:, None] + j
    lanes = C.batch_lanes(active, None)
    if C.observers:
        C.notify("shared_access", True, idx, 1, lanes, iid)
    committed = _groups(C)
    C.asyncopy_state.pending.append((lanes, committed[lanes].copy(), idx, data))


class CopyGroups(LaunchState):
    """cp.async in the batch of CTAs running: each lane's count of committed groups (made on
    the first cp.async of the batch), and the copies not landed yet, in issue order:
    (lanes, group of each, shared indices, bytes)."""
    __slots__ = ("committed", "pending")

    def __init__(self, launch) -> None:
        self.new_batch(launch)

    def new_batch(self, launch) -> None:
        self.committed = None
        self.pending = []


def _groups(C):
    """The batch's count of committed groups per lane."""
    state = C.asyncopy_state
    if state.committed is None:
        state.committed = np.zeros(C.n_lanes, np.int64)
    return state.committed


def _waiting_lanes(C, guard):
    active, any_active = C.active_with(guard)
    return C.batch_lanes(active, None) if any_active else None


def cp_async_commit(C, guard) -> None:
    """cp.async.commit_group: the thread's pending copies so far form a group."""
    lanes = _waiting_lanes(C, guard)
    if lanes is not None:
        _groups(C)[lanes] += 1


def cp_async_wait(C, newest: int | None, guard) -> None:
    """cp.async.wait_group `newest` (wait_all: None): land the waiting lanes' copies of
    every committed group but the newest `newest` (wait_all: every copy)."""
    lanes = _waiting_lanes(C, guard)
    if lanes is None:
        return
    committed = _groups(C)
    if newest is None:
        committed[lanes] += 1               # wait_all commits the copies not yet committed
    _land(C, lanes, committed[lanes] - (newest or 0))


def cp_async_land_all(C, guard) -> None:
    """What cp.async.mbarrier.arrive waits for: every copy the thread issued so far."""
    lanes = _waiting_lanes(C, guard)
    if lanes is not None:
        _groups(C)
        _land(C, lanes, np.iinfo(np.int64).max)


def _land(C, lanes, below) -> None:
    """Write to shared memory, in issue order, the pending copies of `lanes` whose group is
    below `below` (per lane, or one bound for all); the other lanes' copies stay pending."""
    limit = np.full(C.n_lanes, -1, np.int64)     # lanes that do not wait land nothing
    limit[lanes] = below
    still = []
    for lane_of, group, idx, data in C.asyncopy_state.pending:
        done = group < limit[lane_of]
        if done.any():
            C.smem[idx[done]] = data[done]
        if not done.all():
            keep = ~done
            still.append((lane_of[keep], group[keep], idx[keep], data[keep]))
    C.asyncopy_state.pending = still


def _check_source(C, s, k, cp, reading, iid, active) -> None:
    """Alignment of src to cp-size, and its first k bytes inside one allocation. The
    arena's allocations start 512-aligned, so a cp-aligned span whose first and last
    bytes lie in allocations lies in one."""
    bad = reading & ((s & _U64(cp - 1)) != 0)
    if bad.any():
        i = int(np.argmax(bad))
        C.fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", cp, "global", "load",
                 int(s[i]), i, active, None, iid)
    rows = np.flatnonzero(reading)
    for ends in (s[rows], s[rows] + (k[rows] - 1).astype(_U64)):
        try:
            C.memory.offsets(ends, 1)
        except AccessFault as f:
            i = int(rows[f.index])
            C.fault(f.code_name, "out-of-bounds", int(k[i]), "global", "load",
                     int(s[i]), i, active, None, iid)


FAMILY = family("asyncopy", __name__, state=CopyGroups)
FAMILY.declare("cp", emit=emit_cp, pipe=MEMORY)
provide(_cp_async=cp_async, _cp_async_commit=cp_async_commit, _cp_async_wait=cp_async_wait,
        _cp_async_land_all=cp_async_land_all)

__all__ = ["emit_cp", "cp_async", "cp_async_commit", "cp_async_wait", "cp_async_land_all"]

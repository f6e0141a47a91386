"""What makes wgmma asynchronous and warpgroup-collective, checked as strictly as the PTX ISA
states it (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate": "Register
accesses of wgmma.mma_async", wgmma.fence, wgmma.commit_group, wgmma.wait_group).

Collective: every wgmma instruction is executed by whole warpgroups, four warps 4k .. 4k+3
of a block (128 threads), all of them converged at it; anything else (a block of 96
threads, a warp that took another branch, lanes predicated off) is a launch fault
naming the instruction.

Asynchronous: the accumulators d of a wgmma.mma_async, and its A registers when A comes
from registers, belong to the tensor core until a wgmma.wait_group N that covers its group
(commit_group closes the thread's open group; wait_group N retires every committed group
but the newest N). The emulator computes the product when the instruction issues and
writes d at once, so it must make sure nothing can see that early: an instruction that
reads or writes such a register before the covering wait faults (CUDA_ERROR_ILLEGAL_INSTRUCTION,
naming the instruction, its PTX line, the register and the wgmma). Another mma_async may use
a pending accumulator as its own accumulator with the same shape and types (the chained
accumulation the ISA orders by itself), and read pending A registers as its own A. The
shared-memory operands were read at issue too; a GPU may read them until the wait, so the
wait that completes a group checks that the bytes its mma_asyncs read are unchanged, and
faults if they were written in between.

The fence: wgmma.fence must come between any other access to a register and a mma_async
that uses it as accumulator or A (and before the first mma_async of a warpgroup). A
mma_async whose registers were touched since the thread's last wgmma.fence (or that runs
with no fence before it at all) faults naming the register.

State is per thread of the batch (WarpgroupState, the wgmma family's per-launch state,
`C.wgmma_state`); the registers it tracks are the ones some mma_async of the kernel uses
(`tracked`), and `watch_registers` (the family's before_emit hook, which the decoder calls
before every emitter) puts a check in front of every other instruction that names one of
them: kernels without wgmma pay nothing.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.ir import Addr, ArgList, PredPair, Reg, Vec
from .registry import LaunchState, provide

WARPGROUP = 128
TRACKED = "_wgmma_tracked"          # the kernel namespace's {register name: index}
FAULT = "CUDA_ERROR_ILLEGAL_INSTRUCTION"


class WarpgroupState(LaunchState):
    """The wgmma bookkeeping of the batch of CTAs running, per thread of the batch (made on
    the first wgmma instruction of the batch: `start`)."""
    __slots__ = ("names", "committed", "retired", "busy", "dirty", "role", "issuer", "reads")

    def __init__(self, launch) -> None:
        self.new_batch(launch)

    def new_batch(self, launch) -> None:
        self.names = None               # no wgmma instruction ran in this batch yet
        self.committed = self.retired = self.busy = self.dirty = None
        self.role = self.issuer = self.reads = None

    def start(self, n_lanes: int, names: list[str]) -> None:
        self.names = names
        self.committed = np.zeros(n_lanes, np.int64)    # groups closed by commit_group
        self.retired = np.zeros(n_lanes, np.int64)      # groups below this are complete
        # per tracked register: the group of the pending mma_async using it (-1: none)
        self.busy = np.full((len(names), n_lanes), -1, np.int64)
        # touched by another instruction since the thread's last wgmma.fence (or never fenced)
        self.dirty = np.ones((len(names), n_lanes), bool)
        self.role = [None] * len(names)                 # ("d", shape, types) or ("a",)
        self.issuer = [0] * len(names)                  # instruction id of that mma_async
        # the shared bytes pending mma_asyncs read: (first lanes, group, iid, indices, values)
        self.reads = []


def state(C) -> WarpgroupState:
    st = C.wgmma_state
    if st.names is None:
        st.start(C.n_lanes, list(C.ck.namespace.get(TRACKED, {})))
    return st


def fault(C, iid: int, why: str, lane: int | None = None) -> KernelFault:
    ins = C.ck.instructions[iid]
    who = f"; {C.who_batch(lane)}" if lane is not None else ""
    return KernelFault(FAULT, f"{C.name}: {why}{who}, PTX line {ins.line}: {ins.text}")


def warpgroups(C, guard, what: str, iid: int):
    """The current lanes that execute a wgmma instruction (indices into the current lanes)
    and their batch lanes, whole warpgroups in order; faults unless they are."""
    active, any_active = C.active_with(guard)
    if not any_active:
        active = np.zeros(C.n, bool)
    cur = np.arange(C.n) if active is None else np.flatnonzero(active)
    lanes = cur if C.lanes is None else C.lanes[cur]
    cta, thread = lanes // C.padded, lanes % C.padded
    key = cta * 64 + thread // WARPGROUP
    groups, first, counts = np.unique(key, return_index=True, return_counts=True)
    short = (counts != WARPGROUP) | ((groups % 64 + 1) * WARPGROUP > C.threads_per_cta)
    if short.any():
        i = int(np.argmax(short))
        lane = int(lanes[first[i]])
        size = min(WARPGROUP, C.threads_per_cta - int(groups[i] % 64) * WARPGROUP)
        raise fault(C, iid, f"{what} is warpgroup-collective (.sync.aligned): the four warps "
                            f"4k..4k+3 of a block (128 threads, all converged) must execute it "
                            f"together, but {int(counts[i])} threads of warpgroup "
                            f"{int(groups[i] % 64)} (of {size} in the block) are here", lane)
    return cur, lanes


def fence(C, guard, iid: int) -> None:
    """wgmma.fence: the executing threads' register accesses so far are ordered before
    their later mma_asyncs."""
    _, lanes = warpgroups(C, guard, "wgmma.fence", iid)
    st = state(C)
    if lanes.size and st.dirty.size:
        st.dirty[:, lanes] = False


def commit(C, guard, iid: int) -> None:
    """wgmma.commit_group: the thread's mma_asyncs not yet committed form a group."""
    _, lanes = warpgroups(C, guard, "wgmma.commit_group", iid)
    state(C).committed[lanes] += 1


def wait(C, newest: int, guard, iid: int) -> None:
    """wgmma.wait_group N: every committed group but the newest N is complete."""
    _, lanes = warpgroups(C, guard, "wgmma.wait_group", iid)
    st = state(C)
    st.retired[lanes] = np.maximum(st.retired[lanes], st.committed[lanes] - newest)
    _check_reads(C, st, iid)


def pending_reads(C, first_lanes, reads: list, iid: int) -> None:
    """A mma_async of the warpgroups led by `first_lanes` read these shared bytes
    (wgmma_desc.read_matrix): they belong to it until a wait covers its group."""
    st = state(C)
    group = st.committed[first_lanes]
    st.reads += [(first_lanes, group, iid, idx, raw) for idx, raw in reads]


def _check_reads(C, st, wait_iid: int) -> None:
    """The emulator read the operands of a mma_async when it issued; a GPU may read them
    any time until the wait. So shared memory they came from must be unchanged when a wait
    completes the group: else the product is undefined, and this faults."""
    keep = []
    for first, group, mma_iid, idx, raw in st.reads:
        done = group < st.retired[first]
        if done.any():
            changed = (C.smem[idx[done]] != raw[done]).any(axis=1)
            if changed.any():
                mma = C.ck.instructions[mma_iid]
                raise fault(C, wait_iid, f"shared memory that the wgmma.mma_async at PTX line "
                                        f"{mma.line} reads was written before a wgmma.wait_group "
                                        f"completed it (undefined on a GPU)",
                            int(first[done][np.argmax(changed)]))
        if not done.all():
            keep.append((first[~done], group[~done], mma_iid, idx[~done], raw[~done]))
    st.reads = keep


def _pending(st, idx, lanes):
    """(register position in idx, lane) of the first pending register, or None."""
    if not idx:
        return None
    busy = st.busy[np.ix_(idx, lanes)] >= st.retired[lanes]
    if not busy.any():
        return None
    r, j = np.unravel_index(int(np.argmax(busy)), busy.shape)
    return int(r), int(lanes[j])


def _pending_fault(C, st, t: int, lane: int, iid: int, how: str) -> KernelFault:
    mma = C.ck.instructions[st.issuer[t]]
    return fault(C, iid, f"{how} {st.names[t]} while the wgmma.mma_async at PTX line {mma.line} "
                         f"that uses it is pending (undefined on a GPU until a "
                         f"wgmma.wait_group covers its group)", lane)


def touch(C, idx: tuple, guard, iid: int) -> None:
    """Another instruction reads or writes the tracked registers `idx`: none may be pending;
    each now needs a wgmma.fence before a mma_async uses it."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    lanes = C.batch_lanes(active, None)
    st = state(C)
    hit = _pending(st, list(idx), lanes)
    if hit is not None:
        raise _pending_fault(C, st, idx[hit[0]], hit[1], iid, "access to")
    st.dirty[np.ix_(list(idx), lanes)] = True


def issue(C, lanes, d_idx: tuple, a_idx: tuple, role: tuple, iid: int) -> None:
    """The checks and bookkeeping of a mma_async issued by `lanes` (batch lanes)."""
    st = state(C)
    for idx in (d_idx, a_idx):
        if idx:
            dirty = st.dirty[np.ix_(list(idx), lanes)]
            if dirty.any():
                r, j = np.unravel_index(int(np.argmax(dirty)), dirty.shape)
                raise fault(C, iid, f"wgmma.mma_async uses {st.names[idx[r]]}, which was accessed "
                                    f"since the last wgmma.fence (or no wgmma.fence came before "
                                    f"this mma_async): the PTX ISA requires wgmma.fence between "
                                    f"them", int(lanes[j]))
    if d_idx:                       # a pending accumulator chains only into the same shape
        busy = st.busy[np.ix_(list(d_idx), lanes)] >= st.retired[lanes]
        for r in np.flatnonzero(busy.any(axis=1)):
            if st.role[d_idx[r]] != role:
                lane = int(lanes[int(np.argmax(busy[r]))])
                raise _pending_fault(C, st, d_idx[r], lane, iid, "wgmma.mma_async uses")
    hit = _pending(st, [t for t in a_idx if st.role[t] != ("a",)], lanes)
    if hit is not None:
        t = [t for t in a_idx if st.role[t] != ("a",)][hit[0]]
        raise _pending_fault(C, st, t, hit[1], iid, "wgmma.mma_async reads A from")
    open_group = st.committed[lanes]
    for idx, what in ((d_idx, role), (a_idx, ("a",))):
        for t in idx:
            st.busy[t, lanes] = open_group
            st.role[t] = what
            st.issuer[t] = iid


# --- the before_emit hook: checks in front of the other instructions ------------------------


def register_names(x) -> set[str]:
    """The registers an operand (or a list of them) names."""
    if isinstance(x, Reg):
        return {x.name}
    if isinstance(x, (Vec, ArgList)):
        return set().union(*(register_names(e) for e in x.elems)) if x.elems else set()
    if isinstance(x, Addr):
        return register_names(x.base)
    if isinstance(x, PredPair):
        return register_names(x.p) | register_names(x.q)
    if isinstance(x, (list, tuple)):
        return set().union(*(register_names(e) for e in x)) if x else set()
    return set()


def tracked(g) -> dict[str, int]:
    """{register: index} of the registers the kernel's mma_asyncs use (found once)."""
    table = g.ns.get(TRACKED)
    if table is None:
        names: dict[str, int] = {}
        for ins in g.ck.kernel.body:
            if not isinstance(ins, str) and ins.opcode == "wgmma" and "mma_async" in ins.mods:
                regs = register_names(ins.operands[:1])
                if len(ins.operands) > 1 and isinstance(ins.operands[1], Vec):
                    regs |= register_names(ins.operands[1])
                for name in sorted(regs):
                    names.setdefault(name, len(names))
        table = g.ns[TRACKED] = names
    return table


def watch_registers(g, ins) -> None:
    """Put a `touch` check in front of an instruction that names a tracked register."""
    if ins.opcode == "wgmma":
        return
    table = tracked(g)
    if not table:
        return
    hit = sorted({table[n] for n in register_names([*ins.operands, ins.guard]) if n in table})
    if hit:
        iid = g.ns["_register_instruction"](ins)
        guard = g.guard(ins)
        g.emit(f"_wgmma_touch(C, {tuple(hit)!r}, {guard if guard is not None else 'None'}, {iid})")


provide(_wgmma_touch=touch, _wgmma_fence=fence, _wgmma_commit=commit, _wgmma_wait=wait)

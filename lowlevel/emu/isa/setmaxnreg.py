"""setmaxnreg.{inc,dec}.sync.aligned.u32 imm (sm_90a): a warpgroup trades registers with
its CTA's pool, as warp-specialised kernels (Triton, CUTLASS) do: producers release
registers (.dec) that consumers claim (.inc).

What the PTX ISA says, and what the emulated GPU checks of it:

- imm is a constant in [24, 256], a multiple of 8; .target sm_90a (or another arch-specific
  target of sm_90 or later), PTX ISA 8.0: refused at load, as ptxas refuses them.
- The per-CTA pool: every warp starts with the kernel's register count at entry, which
  ptxas knows from `.maxnreg N`, or from `.maxntid` (or `.reqntid`) with `.minnctapersm`
  (the most registers that many CTAs of that size can have); allocated in units of 8 per
  thread. Without either, ptxas ignores setmaxnreg ("unable to determine register count at
  entry"), and so does the emulator: it does nothing.
- `.sync.aligned`, warpgroup-collective: the four warps of a warpgroup (128 consecutive
  threads) execute the same setmaxnreg together, every thread of them; a warpgroup of which
  some threads are elsewhere, have exited, are switched off by the guard, or lie past the
  end of the block (a block that is not whole warpgroups) is undefined on a GPU: a fault.
- .dec to imm at or below the warp's current count (else undefined: a fault) returns the
  difference to the pool; .inc to imm at or above it (likewise) takes the difference from
  the pool, and blocks until the pool has it: the warpgroup waits there like a thread at a
  failed mbarrier wait (engine/waits.py), and goes on once other warpgroups have released
  enough. If no thread can run and warpgroups still wait here, the CTA has deadlocked, as
  the GPU would: a fault naming the instruction.

The registers an .inc adds have undefined contents; the emulator keeps every register of a
thread whatever its count (a kernel cannot tell which are the new ones from PTX).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Imm
from .operands import Mods, operands
from .registry import INTEGER, LaunchState, family, provide
from .warpmask import current_lanes

WARPGROUP = 128
WARP = 32
REGISTERS_PER_SM = 65536
GRANULE = 8             # registers per thread are allocated in units of 8 (256 per warp)


def is_wait(ins) -> bool:
    """setmaxnreg.inc may block: alone in its basic block, so a blocked warpgroup parks there."""
    return ins.opcode == "setmaxnreg" and "inc" in ins.mods


def entry_registers(kernel) -> int | None:
    """Registers per thread at entry as ptxas fixes them for setmaxnreg, or None where it
    cannot tell (then it drops setmaxnreg)."""
    if kernel.maxnreg:
        return min(int(kernel.maxnreg), 255)
    dims = kernel.maxntid or kernel.reqntid
    if dims and kernel.minnctapersm:
        threads = -(-int(np.prod(dims)) // WARP) * WARP
        return min(255, REGISTERS_PER_SM // (int(kernel.minnctapersm) * threads) // GRANULE * GRANULE)
    return None


def emit_setmaxnreg(g, ins) -> None:
    m = Mods(ins)
    action = m.take("inc", "dec")
    aligned = bool(m.take("sync")) & bool(m.take("aligned"))
    typed = m.take("u32")
    m.done()
    if action is None or not aligned or not typed:
        raise PtxError(ins.line, f"setmaxnreg is .inc or .dec, .sync.aligned.u32: {ins.text}")
    (count,) = operands(ins, 1)
    if not isinstance(count, Imm) or not isinstance(count.value, int):
        raise PtxError(ins.line, f"setmaxnreg's register count must be an integer constant: {ins.text}")
    if count.value % GRANULE or not 24 <= count.value <= 256:
        raise PtxError(ins.line, f"setmaxnreg's register count {count.value} must be a multiple of 8 "
                                 f"in [24, 256]: {ins.text}")
    k = g.ck.kernel
    target = k.target
    if not target.endswith("a") or k.binary_version < 90:
        raise PtxError(ins.line, f"setmaxnreg requires an arch-specific .target sm_90a or later "
                                 f"(target {target}): {ins.text}")
    if k.ptx_version < 80:
        raise PtxError(ins.line, f"setmaxnreg requires PTX ISA .version 8.0 or later: {ins.text}")
    entry = entry_registers(k)
    guard = g.guard(ins)
    if entry is None:           # ptxas drops it: "unable to determine register count at entry"
        return
    iid = g.ns["_register_instruction"](ins)
    gexpr = guard if guard is not None else "None"
    g.emit(f"_setmaxnreg(C, {action == 'inc'}, {count.value}, {entry}, {gexpr}, {iid})")


class RegisterPool(LaunchState):
    """The setmaxnreg family's state: the batch's registers, per warp its count per thread,
    per CTA what is free; made by the batch's first setmaxnreg (`start`)."""

    __slots__ = ("count", "free")

    def __init__(self, launch) -> None:
        self.new_batch(launch)

    def new_batch(self, launch) -> None:
        self.count = None               # no setmaxnreg ran in this batch yet
        self.free = None

    def start(self, C, entry: int) -> None:
        """Every warp of the batch at the kernel's count at entry, every CTA's pool empty."""
        warps_per_cta = C.padded // WARP
        ctas = C.n_lanes // C.padded
        allocated = -(-entry // GRANULE) * GRANULE
        self.count = np.full(ctas * warps_per_cta, allocated, np.int64)
        self.free = np.zeros(ctas, np.int64)


def setmaxnreg(C, inc: bool, count: int, entry: int, guard, iid: int) -> None:
    """The warpgroups among the current lanes execute setmaxnreg; on .inc those the pool
    cannot serve yet block (C.wait_failed: the scheduler parks them)."""
    C.wait_failed = None
    lanes = current_lanes(C)
    on = np.ones(lanes.size, bool) if C.active is None else np.asarray(C.active, bool).copy()
    if guard is not None:
        on &= np.broadcast_to(guard, on.shape)
    mine = lanes[on]
    if mine.size == 0:
        return
    groups = _whole_warpgroups(C, mine, iid)
    pool = C.setmaxnreg_state
    if pool.count is None:
        pool.start(C, entry)
    blocked = []
    for group in groups:                          # the warpgroup's first batch lane
        warps = group // WARP + np.arange(WARPGROUP // WARP)
        current = pool.count[warps]
        if (count < current).any() if inc else (count > current).any():
            _fault(C, iid, group, f"setmaxnreg.{'inc' if inc else 'dec'} to {count} registers from "
                                  f"{int(current.max() if inc else current.min())} per thread (an .inc "
                                  f"may only raise the count and a .dec only lower it)")
        cta = group // C.padded
        change = int((count - current).sum()) * WARP
        if inc and change > pool.free[cta]:
            blocked.append(group)                 # waits until other warpgroups release
            continue
        pool.free[cta] -= change
        pool.count[warps] = count
    if blocked:
        C.wait_failed = np.isin(_group_starts(C, lanes), np.array(blocked)) & on


def _group_starts(C, lanes):
    """The first batch lane of the warpgroup of each of `lanes`."""
    return lanes - lanes % C.padded % WARPGROUP


def _whole_warpgroups(C, mine, iid: int):
    """The first batch lane of each warpgroup among `mine`, checked to be all here."""
    starts = np.unique(_group_starts(C, mine))
    for start in starts:
        if (start % C.padded) + WARPGROUP > C.threads_per_cta:
            _fault(C, iid, int(start), f"setmaxnreg in a block of {C.threads_per_cta} threads: "
                                       f"its last warpgroup is not four whole warps")
        here = np.count_nonzero((mine >= start) & (mine < start + WARPGROUP))
        if here != WARPGROUP:
            _fault(C, iid, int(start), f"setmaxnreg executed by {here} of the 128 threads of a "
                                       f"warpgroup (.sync.aligned: all four warps execute it together)")
    return starts


def _fault(C, iid: int, lane: int, what: str):
    ins = C.ck.instructions[iid]
    raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                      f"{C.name}: {what}; warpgroup of {C.who_batch(lane)}, PTX line {ins.line}: {ins.text}")


provide(_setmaxnreg=setmaxnreg)

FAMILY = family("setmaxnreg", __name__, state=RegisterPool)
FAMILY.declare("setmaxnreg", emit=emit_setmaxnreg, pipe=INTEGER, waits=is_wait,
               stalls="registers that no warpgroup of its CTA will release")

__all__ = ["emit_setmaxnreg", "entry_registers", "is_wait", "setmaxnreg", "RegisterPool"]

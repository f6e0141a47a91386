"""Threads that wait for other threads under the scheduler: failed mbarrier waits and
loops that poll memory yield.

A thread that polls an mbarrier (`mbarrier.try_wait` / `test_wait` in a loop, as
`cuda::barrier::wait` compiles) waits for other threads to arrive. Lowest-PC-first
scheduling would keep running the polling loop if its PC is lower than theirs, so each
wait sits alone in its basic block (decode.split_blocks), and on the divergent path lanes
whose wait failed park there like lanes at a bar.sync (pc = exit_pc + 1 + block). When no
lane can run, parked waiters go back to their wait block if anything happened since they
last failed (another block ran, or some wait succeeded); if nothing did, no thread can
ever complete their phase: a deadlock, reported as a KernelFault naming the waits.

Loops that poll memory (`ld.acquire` of a flag another warp sets, as cooperative groups'
multi-warp tile sync does) have no instruction to recognise: on the divergent path, after
YIELD_AFTER jumps back of the lowest lanes (since the path began or the last yield) the
warps of the lanes at the lowest block park, each runnable lane at its own block (pc =
exit_pc + 1 + blocks + block; whole warps, since their other lanes may wait for these at a
bar.warp.sync or shuffle), and the other lanes run; parked lanes resume at their blocks
when no lane can run. A long loop of only some lanes thus lets the others run ahead now
and then, which changes the order, never the result.

On the converged path every remaining thread of the batch runs the same wait: if all of
them fail twice at one wait with no mbarrier update in between, no thread can complete
the phase either (only mbarrier instructions change an mbarrier), and it is the same
deadlock.
"""
from __future__ import annotations

import numpy as np

from ..isa.registry import stalls_on
from .faults import KernelFault


YIELD_AFTER = 512
WARP = 32


def init_state(launch) -> None:
    """What a launch keeps for waits: the failed lanes of the last wait, whether anything
    ran since waiters parked, the converged path's last all-failed wait, how many mbarrier
    updates ran, the divergent path's jumps back since the last yield."""
    launch.wait_failed = None       # lanes of the last wait that failed (None: none did)
    launch.wait_progress = False
    launch.wait_stall = None
    launch.mbar_updates = 0
    launch.back_edges = 0


def back_edge(launch, pcs, pc: int) -> bool:
    """The lowest lanes (at block `pc`) jumped back; after YIELD_AFTER such jumps they
    park until no lane can run (release_yielded). Returns whether they did."""
    launch.back_edges += 1
    if launch.back_edges < YIELD_AFTER:
        return False
    launch.back_edges = 0
    ck = launch.ck
    warps = np.unique(np.flatnonzero(pcs == pc) // WARP)
    lanes = (warps[:, None] * WARP + np.arange(WARP)).ravel()
    lanes = lanes[pcs[lanes] < ck.exit_pc]
    pcs[lanes] += ck.exit_pc + 1 + len(ck.blocks)
    return True


def release_yielded(launch, pcs) -> bool:
    """No lane can run: the yielded lanes go back to their blocks; whether there were any."""
    base = launch.ck.exit_pc + 1 + len(launch.ck.blocks)
    yielded = pcs >= base
    if not yielded.any():
        return False
    pcs[yielded] -= base
    return True


def park_failed(launch, pcs, lanes, pc: int, next_pc: int) -> None:
    """After a wait block ran on `lanes` (divergent path): the failed ones park at it."""
    failed = launch.wait_failed
    launch.wait_failed = None
    if failed is None:
        pcs[lanes] = next_pc
        launch.wait_progress = True
        return
    pcs[lanes] = np.where(failed, launch.ck.exit_pc + 1 + pc, next_pc)
    if not failed.all():
        launch.wait_progress = True


def retry_waiters(launch, pcs, waiting, bblk) -> bool:
    """Send the parked waiters among `waiting` back to their waits, if anything happened
    since they failed; returns whether any went."""
    flags = _wait_flags(launch)
    mine = flags[bblk]
    if not mine.any() or not launch.wait_progress:
        return False
    pcs[waiting[mine]] = bblk[mine]
    launch.wait_progress = False
    return True


def waiter_mask(launch, bblk):
    return _wait_flags(launch)[bblk]


def _wait_flags(launch):
    ck = launch.ck
    if ck.wait_blocks is None:
        ck.wait_blocks = np.array([b.waits for b in ck.blocks], bool)
    return ck.wait_blocks


def split_blocked(launch, pc: int, next_pc: int, live):
    """On the converged path, some lanes of wait block `pc` could not go on (warpgroups that
    setmaxnreg.inc blocked: launch.wait_failed): the per-lane PCs of the divergent path,
    those parked at the wait, the others at `next_pc`."""
    blocked = launch.wait_failed
    launch.wait_failed = None
    exit_pc = launch.ck.exit_pc
    pcs = np.full(launch.n_lanes, exit_pc, dtype=np.int32)
    alive = np.ones(launch.n_lanes, bool) if live is None else live
    pcs[alive] = next_pc
    pcs[alive & blocked] = exit_pc + 1 + pc
    launch.wait_progress = not blocked[alive].all()
    return pcs


def parked_note(launch, pcs, cta: int) -> str:
    """For a barrier deadlock report: the threads of batch CTA `cta` parked at waits
    (setmaxnreg.inc, mbarrier waits) rather than at the barriers, and where."""
    exit_pc = launch.ck.exit_pc
    mine = pcs[cta * launch.padded:(cta + 1) * launch.padded]
    parked = mine[(mine > exit_pc) & (mine <= exit_pc + len(launch.ck.blocks))] - (exit_pc + 1)
    notes = []
    for b in np.unique(parked):
        block = launch.ck.blocks[int(b)]
        if block.waits:
            ins = block.instructions[0]
            notes.append(f", {int(np.count_nonzero(parked == b))} at {ins.text} (PTX line {ins.line})")
    return "".join(notes)


def deadlock(launch, pcs) -> None:
    """Every remaining lane waits at a wait that failed (an mbarrier wait, a setmaxnreg.inc
    the pool could not serve) since the last progress: each named with what it waits for,
    as its row in the registry says."""
    exit_pc = launch.ck.exit_pc
    parked = [launch.ck.blocks[b].instructions[0] for b in np.unique(pcs[pcs > exit_pc] - (exit_pc + 1))]
    kinds = " and ".join(dict.fromkeys(ins.opcode for ins in parked))
    waits = "; ".join(f"PTX line {ins.line} ({ins.text}) for {stalls_on(ins)}" for ins in parked)
    raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                      f"{launch.name}: {kinds} deadlock: every remaining thread waits: {waits}")


def converged_stall(launch, iid: int) -> None:
    """Every remaining lane failed wait `iid` on the converged path: a deadlock if they
    already did with no mbarrier update since."""
    mark = (iid, launch.mbar_updates)
    if launch.wait_stall == mark:
        ins = launch.ck.instructions[iid]
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{launch.name}: mbarrier deadlock: every remaining thread waits at "
                          f"PTX line {ins.line} ({ins.text}) for a phase that no thread can "
                          f"complete")
    launch.wait_stall = mark


__all__ = ["init_state", "back_edge", "release_yielded", "park_failed", "retry_waiters", "waiter_mask", "deadlock", "converged_stall", "split_blocked", "parked_note"]

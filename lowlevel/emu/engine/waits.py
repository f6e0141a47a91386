"""mbarrier waits (isa/mbarrier.py) under the scheduler: a failed wait yields.

A thread that polls an mbarrier (`mbarrier.try_wait` / `test_wait` in a loop, as
`cuda::barrier::wait` compiles) waits for other threads to arrive. Lowest-PC-first
scheduling would keep running the polling loop if its PC is lower than theirs, so each
wait sits alone in its basic block (decode.split_blocks), and on the divergent path lanes
whose wait failed park there like lanes at a bar.sync (pc = exit_pc + 1 + block). When no
lane can run, parked waiters go back to their wait block if anything happened since they
last failed (another block ran, or some wait succeeded); if nothing did, no thread can
ever complete their phase: a deadlock, reported as a KernelFault naming the waits.

On the converged path every remaining thread of the batch runs the same wait: if all of
them fail twice at one wait with no mbarrier update in between, no thread can complete
the phase either (only mbarrier instructions change an mbarrier), and it is the same
deadlock.
"""
from __future__ import annotations

import numpy as np

from .faults import KernelFault


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


def deadlock(launch, pcs) -> None:
    """Every remaining lane waits at an mbarrier wait that failed since the last progress."""
    exit_pc = launch.ck.exit_pc
    parked = np.unique(pcs[pcs > exit_pc] - (exit_pc + 1))
    lines = ", ".join(f"PTX line {launch.ck.blocks[b].instructions[0].line}" for b in parked)
    raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                      f"{launch.name}: mbarrier deadlock: every remaining thread waits at an "
                      f"mbarrier wait ({lines}) for a phase that no thread can complete")


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


__all__ = ["park_failed", "retry_waiters", "waiter_mask", "deadlock", "converged_stall"]

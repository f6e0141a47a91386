"""Lanes that wait at a *.sync warp instruction for the lanes its member mask names
(sm_70 and later, PTX ISA: a lane waits until every non-exited lane of its mask has
executed a bar.warp.sync, or a *.sync instruction with the same qualifiers, with the same
mask).

isa/warpmask.check_members raises WarpWait on the divergent path when named lanes are
elsewhere; the executing lanes that name them park at the instruction's block (pc =
exit_pc + 1 + block, as at a bar.sync) with their masks and the values they give (shfl,
match and redux's a, vote's predicate), and everything else runs first:

- a data instruction (shfl/vote/match/redux/elect.sync): when lanes of the warp reach the
  same block again, its parked lanes rejoin them (merge) and all run it together;
- when no lane can run, a bar.warp.sync waiter passes to the next block once every live
  lane its mask names waits at a bar.warp.sync (any of them: each side of an if/else may
  have its own) with the same mask; a data waiter runs its instruction again once every
  live lane it names waits at the same instruction with the same mask (the others exited),
  or at other instructions with the same qualifiers and mask: then the group is paired
  (_pair), each lane goes back to its own instruction, and reads the values the group's
  lanes at the others left when they parked (check_members returns them as partners);
- otherwise the named lanes can never arrive (they wait at a CTA barrier or an mbarrier
  for these lanes, at an instruction with other qualifiers, or with another mask):
  CUDA_ERROR_LAUNCH_FAILED naming instruction, mask, PTX line and where the named lanes
  wait (a hang on a GPU), never a hang.
"""
from __future__ import annotations

import numpy as np

from .faults import KernelFault

WARP = 32
_LANE32 = np.arange(WARP, dtype=np.int64)
_KIND = {None: 0, "bar": 1, "data": 2}


def exiting(ck):
    """bool per PC (exit_pc included, False): the block is an unguarded ret/exit, so a
    lane there is as good as exited (on a GPU a warp instruction waiting for it sees it
    exit)."""
    table = ck.exiting_blocks
    if table is None:
        table = np.zeros(ck.exit_pc + 1, bool)
        for blk in ck.blocks:
            ins = blk.instructions
            table[blk.index] = len(ins) == 1 and ins[0].opcode in ("ret", "exit") \
                and ins[0].guard is None
        ck.exiting_blocks = table
    return table


def live_lanes(ck, pcs):
    """bool per entry of `pcs` (divergent path): the lane has not exited, nor is about to
    (an unguarded ret/exit)."""
    exit_pc = ck.exit_pc
    return (pcs != exit_pc) & ~exiting(ck)[np.minimum(pcs, exit_pc)]


def init_state(launch) -> None:
    """What a launch keeps for lanes waiting at warp instructions (made on the first wait):
    each parked lane's member mask and the value it gives, the block and step of the last
    park, and the lanes paired across instructions (group, pending, value given; read by
    isa/warpmask.py), how many groups were made and how many lanes are still pending."""
    launch.warp_masks = launch.warp_values = launch.warp_skip = launch.warp_pair = None
    launch.warp_groups = 0
    launch.warp_pending = 0


def kinds(ck):
    """int8 per block: 0, 1 (bar.warp.sync) or 2 (a data warp instruction)."""
    if ck.warp_blocks is None:
        ck.warp_blocks = np.array([_KIND[b.warp_sync] for b in ck.blocks], np.int8)
    return ck.warp_blocks


def park(launch, pcs, wait, blk: int) -> None:
    """Park the lanes of WarpWait `wait` at warp block `blk` with their member masks and
    the values they give."""
    saved = launch.warp_masks
    if saved is None or saved.size != pcs.size:
        saved = launch.warp_masks = np.zeros(pcs.size, np.uint32)
        launch.warp_values = np.zeros(pcs.size, np.uint64)
    saved[wait.lanes] = wait.masks
    if wait.values is not None:
        launch.warp_values[wait.lanes] = wait.values
    pcs[wait.lanes] = launch.ck.exit_pc + 1 + blk
    launch.warp_skip = (blk, launch.stats.block_steps)


def merge(launch, pcs, lowest: int) -> None:
    """Lanes reach warp block `lowest`: those of their warps parked there rejoin them,
    except right after a park (the lanes left there then are the ones that did not wait)."""
    if launch.warp_masks is None:
        return                  # no lane has waited at a warp instruction in this launch
    if launch.warp_skip == (lowest, launch.stats.block_steps):
        return
    parked = np.flatnonzero(pcs == launch.ck.exit_pc + 1 + lowest)
    if parked.size == 0:
        return
    warps = np.unique(np.flatnonzero(pcs == lowest) // WARP)
    pcs[parked[np.isin(parked // WARP, warps)]] = lowest


def _needs(launch, pcs, lanes):
    """For waiter `lanes`: (batch (n, 32) lane numbers of their warps, the live lanes
    their masks name other than themselves, the saved masks of all)."""
    masks = launch.warp_masks
    batch = (lanes // WARP)[:, None] * WARP + _LANE32
    named = ((masks[lanes][:, None] >> _LANE32.astype(np.uint32)) & np.uint32(1)) != 0
    need = named & live_lanes(launch.ck, pcs[batch]) & (batch != lanes[:, None])
    return batch, need, masks[batch] == masks[lanes][:, None]


def _blocking(launch, pcs, lanes, kind):
    """(batch lanes of the waiters' warps, bool (n, 32): the named live lanes that have not
    arrived: a bar.warp.sync waiter's at no bar.warp.sync with the same mask, a data
    waiter's not at its instruction with the same mask)."""
    ck = launch.ck
    batch, need, same = _needs(launch, pcs, lanes)
    at = pcs[batch]
    parked_at = np.where(at > ck.exit_pc, at - (ck.exit_pc + 1), 0)
    at_bar = (at > ck.exit_pc) & (kinds(ck)[np.minimum(parked_at, len(ck.blocks) - 1)] == 1)
    arrived = np.where((kind == 1)[:, None], at_bar, at == pcs[lanes][:, None]) & same
    return batch, need & ~arrived


def release(launch, pcs, waiting, bblk):
    """No lane can run: release the warp waiters among `waiting` (parked lanes, at blocks
    `bblk`) whose named lanes have all arrived. Returns (any released, bool per waiting:
    a warp waiter)."""
    ck = launch.ck
    kind = kinds(ck)[bblk]
    mine = kind > 0
    if not mine.any():
        return False, mine
    lanes, blk, kind = waiting[mine], bblk[mine], kind[mine]
    batch, blocking = _blocking(launch, pcs, lanes, kind)
    ok = ~blocking.any(axis=1)
    if not ok.any():
        ok = _pair(launch, pcs, lanes, blk, kind, batch, blocking)
        if not ok.any():
            return False, mine
    pcs[lanes[ok]] = np.where(kind[ok] == 1, blk[ok] + 1, blk[ok])
    return True, mine


def _signature(ck):
    """Per block: the opcode and qualifiers of its warp instruction ('' for none): data
    instructions pair up across instructions only with the same ones (PTX ISA)."""
    sig = ck.warp_signatures
    if sig is None:
        sig = np.array([".".join([b.instructions[0].opcode, *b.instructions[0].mods])
                        if b.warp_sync == "data" else "" for b in ck.blocks], object)
        ck.warp_signatures = sig
    return sig


def _pair(launch, pcs, lanes, blk, kind, batch, blocking):
    """Data waiters whose missing lanes all wait at other instructions with the same
    qualifiers and mask: each such group (per warp and mask) is paired, and every lane goes
    back to run its own instruction, reading the values the others left when they parked
    (isa/warpmask.py). Returns which waiters go."""
    ck = launch.ck
    at = pcs[batch]
    parked = (at > ck.exit_pc) & (at <= ck.exit_pc + len(ck.blocks))
    where = np.where(parked, at - (ck.exit_pc + 1), 0)
    sig = _signature(ck)
    same_kind = parked & (sig[where] == sig[blk][:, None]) & (kinds(ck)[where] == 2)
    masks = launch.warp_masks
    same_mask = masks[batch] == masks[lanes][:, None]
    ok = (kind == 2) & ~(blocking & ~(same_kind & same_mask)).any(axis=1)
    if not ok.any():
        return ok
    pair = launch.warp_pair
    if pair is None or pair[0].size != pcs.size:         # per batch
        n = pcs.size
        pair = launch.warp_pair = (np.full(n, -1, np.int64), np.zeros(n, bool),
                                   np.zeros(n, np.uint64))
        launch.warp_groups = 0
    group, pending, given = pair
    go = lanes[ok]
    key = (go // WARP).astype(np.int64) * (1 << 32) + masks[go].astype(np.int64)
    _, ids = np.unique(key, return_inverse=True)
    group[go] = launch.warp_groups + ids
    launch.warp_groups += int(ids.max()) + 1
    pending[go] = True
    launch.warp_pending = int(np.count_nonzero(pending))
    given[go] = launch.warp_values[go]
    return ok


def deadlock(launch, pcs, waiters) -> None:
    """Warp waiters remain and nothing else can complete: the lanes they name never come."""
    ck = launch.ck
    lane = int(waiters[0])
    blk = int(pcs[lane]) - (ck.exit_pc + 1)
    ins = ck.blocks[blk].instructions[0]
    batch, blocking = _blocking(launch, pcs, np.array([lane]), kinds(ck)[[blk]])
    mask = int(launch.warp_masks[lane])
    places: dict[str, list[int]] = {}
    for b in batch[0][blocking[0]]:
        place = _place(launch, int(pcs[b]), int(pcs[lane]), int(launch.warp_masks[b]))
        places.setdefault(place, []).append(int(b) % WARP)
    where = [f"lanes {names} {place}" for place, names in places.items()]
    t = lane % launch.padded
    what = ins.opcode + "." + ".".join(ins.mods)
    head = (f"{launch.name}: {what} in block {launch.block_name(lane // launch.padded)}, "
            f"warp {t // WARP}, lane {t % WARP}: it waits at PTX line {ins.line} ({ins.text}) "
            f"with member mask {mask:#010x} for lanes that never arrive: {', '.join(where)}")
    raise KernelFault(
        "CUDA_ERROR_LAUNCH_FAILED",
        f"{head}. A deadlock: they wait for threads that wait here, so none can proceed "
        f"(a hang on a GPU)")


def _place(launch, pc: int, own: int, mask: int) -> str:
    ck = launch.ck
    if pc <= ck.exit_pc or pc > ck.exit_pc + len(ck.blocks):
        return "still running"
    blk = ck.blocks[pc - (ck.exit_pc + 1)]
    if blk.warp_sync is not None:
        ins = blk.instructions[0]
        if pc == own:
            return f"waiting here with member mask {mask:#010x}"
        name = ".".join([ins.opcode, *ins.mods])
        return (f"waiting at another {name} with member mask {mask:#010x} "
                f"(PTX line {ins.line}: {ins.text})")
    ins = blk.instructions[0] if blk.waits else blk.instructions[-1]
    return f"waiting at PTX line {ins.line} ({ins.text})"


__all__ = ["kinds", "park", "merge", "release", "deadlock"]

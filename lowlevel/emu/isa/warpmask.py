"""The member mask of the *.sync warp instructions (bar.warp.sync, shfl/vote/match/redux/
elect.sync) and the lane bookkeeping warp.py shares.

The PTX ISA's rule: each executing lane has its own bit in its member mask, and it waits
until every non-exited lane its mask names has executed the instruction (a bar.warp.sync,
or the same *.sync with the same qualifiers) with the same mask. For .target sm_6x and
below they must all execute the same instruction in convergence (no wait exists there).

On the emulated GPU a lane that is gathered with the executing ones but predicated off,
a lane missing from its own mask, and lanes naming each other with different masks are
refused (CUDA_ERROR_LAUNCH_FAILED naming kernel, block, warp, lane, PTX line, mask and the
lanes; on a GPU: undefined, garbage or a hang). Named lanes that are elsewhere in the
kernel (an if/else whose sides each reach their own __syncwarp or shuffle, lanes a loop
iteration apart) are waited for on sm_70 and later: the check raises WarpWait before the
block has done anything (a warp instruction starts its block, decode.split_blocks), and
the scheduler parks the lanes that name them there until the named lanes arrive
(engine/warpwait.py), at this instruction or, paired, at another with the same qualifiers
and mask, whose lanes' values this one then reads; for sm_6x targets they are refused.
The converged path with the full mask and no guard costs nothing (unless lanes paired
across instructions have yet to run theirs).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault, WarpWait
from ..engine.warpwait import live_lanes

WARP = 32
U32, I64 = np.uint32, np.int64

_LANE32 = np.arange(WARP, dtype=I64)
_FULL_MASK = 0xFFFFFFFF
DATA_OPS = ("shfl", "vote", "match", "redux", "elect")


def sync_kind(ins):
    """'bar' for bar.warp.sync, 'data' for the *.sync instructions that exchange values
    between lanes, None for anything else: what decides where a warp instruction's block
    starts and how its waiting lanes are released (engine/warpwait.py)."""
    if ins.opcode in ("bar", "barrier") and "warp" in ins.mods:
        return "bar"
    if ins.opcode in DATA_OPS and "sync" in ins.mods:
        return "data"
    return None


def current_lanes(C):
    """Batch lane number of each current lane."""
    if C.lanes is None:
        return np.arange(C.n, dtype=I64)
    return C.lanes.astype(I64, copy=False)


def participating(C, guard):
    """bool array over the current lanes: running now and guard true."""
    act = C.active
    if act is None:
        act = np.ones(C.n, bool)
    if guard is not None:
        if isinstance(guard, np.ndarray):
            act = act & guard
        elif not guard:
            act = np.zeros(C.n, bool)
    return act


def to_batch(C, x, fill, dtype):
    """An array over the current lanes scattered into one over the whole batch (lanes not
    current hold `fill`)."""
    if C.lanes is None:
        return x
    full = np.full(C.n_lanes, fill, dtype)
    full[C.lanes] = x
    return full


def words(bits):
    """Per-warp u32 words of a bool array over the batch."""
    return np.packbits(bits.reshape(-1, WARP), axis=1, bitorder="little").view("<u4")[:, 0]


def check_members(C, what, mask, guard, iid, value=None):
    """The member-mask rule (module docstring): returns when the executing lanes may run
    the instruction now, raises WarpWait when (sm_70+, divergent path) some must wait for
    named lanes elsewhere, KernelFault when the mask is wrong. Only the warps of executing
    lanes are looked at, so a small divergent group costs little in a large batch.
    `value` (per current lane) is what each lane gives the others (shfl/match/redux's a,
    vote's predicate); a waiting lane leaves it for lanes of another instruction of the
    same kind to read (engine/warpwait.py pairs them). Returns None, or the partners:
    (batch lanes, their values) of lanes paired with these at another instruction."""
    uniform = not isinstance(mask, np.ndarray)
    pairs = C.warp_pending > 0         # lanes paired across instructions
    if uniform and guard is None and C.lanes is None and int(mask) & _FULL_MASK == _FULL_MASK \
            and not pairs:
        return                  # converged, every live lane here, the full mask: nothing to check
    part = participating(C, guard)
    lanes = current_lanes(C)[part]                     # batch lanes that execute it
    if lanes.size == 0:
        return
    warps, slot = np.unique(lanes // WARP, return_inverse=True)
    col = lanes % WARP
    batch = warps[:, None] * WARP + _LANE32             # (K, 32) batch lane numbers
    exe = np.zeros(batch.shape, bool)
    exe[slot, col] = True
    if C.lanes is None:
        live = np.ones(batch.shape, bool) if C.active is None else C.active[batch]
        here = live
    else:
        at = C.pcs[batch]
        live = live_lanes(C.ck, at)
        here = at == C.pcs[C.lanes[0]]                  # gathered now (guard true or not)
    M = np.zeros(batch.shape, U32)
    M[slot, col] = U32(int(mask) & _FULL_MASK) if uniform else np.asarray(mask).astype(U32)[part]
    own = exe & (((M >> _LANE32.astype(U32)) & U32(1)) == 0)
    off = words(live & here) & ~words(exe)             # per warp: gathered, predicated off
    away = words(live & ~here)                         # per warp: elsewhere in the kernel
    independent = C.ck.independent_threads
    missing = np.where(exe, M & (off if independent else off | away)[:, None], U32(0))
    other = np.full(batch.shape, -1, I64)
    if not uniform:             # a lane named in the mask runs it with another mask
        named = (((M[:, :, None] >> _LANE32.astype(U32)) & U32(1)) != 0) & exe[:, None, :] \
            & exe[:, :, None]
        differs = named & (M[:, :, None] != M[:, None, :])
        other = np.where(differs.any(axis=2), np.argmax(differs, axis=2), -1)
    bad = own | (missing != 0) | (other >= 0)
    if not bad.any():
        if independent and (C.lanes is not None or pairs):
            wait = exe & ((M & away[:, None]) != 0)
            paired, partners = _paired(C, batch, exe, here, M & away[:, None]) if pairs \
                else (np.zeros(batch.shape, bool), None)
            wait &= ~paired
            if wait.any():
                _wait(C, batch[wait], M[wait], value)
            return partners
        return None
    _refuse(C, what, iid, batch, M, own, missing, other, bad, independent)


def _wait(C, lanes, masks, value):
    """Raise WarpWait for the executing lanes whose masks name lanes elsewhere. Lanes of
    their mask that run it now have the same mask (else refused), so they wait too; the
    other lanes gathered here run it without them (CUB's logical warps)."""
    given = None
    if value is not None:
        idx = np.searchsorted(C.lanes, lanes)
        given = (value[idx] if isinstance(value, np.ndarray) else np.full(idx.size, value))
        given = given.astype(np.uint64)
    raise WarpWait(lanes, masks, given)


def _paired(C, batch, exe, here, away_named):
    """(bool per lane of `batch`: an executing lane that warpwait.release paired with lanes
    at another instruction of the same kind and mask, whose lanes named elsewhere are all
    of its group; the partners: (batch lanes of those groups not here, the values they
    left), or None). Paired lanes run now, and are marked as done with the pairing; the
    group's lanes that ran before, or exited since, still count with their values."""
    pair = C.warp_pair
    if pair is None:
        return np.zeros(batch.shape, bool), None
    group, pending, given = pair
    mine = group[batch]                                 # (K, 32)
    pend = exe & pending[batch]
    if not pend.any():
        return pend, None
    named = ((away_named[:, :, None] >> _LANE32.astype(U32)) & U32(1)) != 0   # (K, 32 me, 32)
    outside = named & (mine[:, None, :] != mine[:, :, None])
    paired = pend & ~outside.any(axis=2)
    pending[batch[paired]] = False
    C.warp_pending -= int(np.count_nonzero(paired))
    ids = np.where(paired, mine, -1)
    theirs = (mine[:, :, None] == ids[:, None, :]).any(axis=2) & ~here & (mine >= 0)
    if not theirs.any():
        return paired, None
    partner = batch[theirs]
    return paired, (partner, given[partner])


def _refuse(C, what, iid, batch, M, own, missing, other, bad, independent):
    k, j = np.unravel_index(int(np.argmax(bad)), bad.shape)
    b = int(batch[k, j])
    mb = int(M[k, j])
    ins = C.ck.instructions[iid]
    if own[k, j]:
        why = f"the lane's own bit is not set in its member mask {mb:#010x}"
    elif missing[k, j]:
        names = [x for x in range(WARP) if (int(missing[k, j]) >> x) & 1]
        if independent:
            why = (f"member mask {mb:#010x} names lanes {names} of the warp, which run with "
                   f"it now but have a false guard predicate, so they never execute it")
        else:
            why = (f"member mask {mb:#010x} names lanes {names} of the warp, which have not "
                   f"exited but do not execute this instruction now (they are elsewhere in "
                   f"the kernel, or their guard predicate is false); for .target "
                   f"{C.ck.target} they must execute it in convergence")
    else:
        o = int(other[k, j])
        why = (f"member mask {mb:#010x} names lane {o}, which executes it with another mask "
               f"{int(M[k, o]):#010x}")
    t = b % C.padded
    raise KernelFault(
        "CUDA_ERROR_LAUNCH_FAILED",
        f"{C.name}: {what} with an invalid member mask in block {C.block_name(b // C.padded)}, "
        f"warp {t // WARP}, lane {t % WARP} (thread {C.who_batch(b).split(' thread ')[1]}), "
        f"PTX line {ins.line}: {ins.text}: {why}. The result is undefined on a GPU: each "
        f"executing thread must be in the mask, and every non-exited thread it names must "
        f"execute the same instruction with the same mask")


__all__ = ["sync_kind", "current_lanes", "participating", "to_batch", "words",
           "check_members", "converged", "DATA_OPS"]


def converged(C, what: str, text: str):
    """The .aligned rule is per warp: every lane of each warp that executes the instruction
    is here, converged. Warps that have left (a CTA- or warp-uniform early exit, as
    persistent-CTA GEMMs do) take no part; a warp with only some of its lanes here (divergence
    inside the warp, an exit of some lanes, a partial last warp) is refused, as the result
    is undefined on a GPU. Returns the lanes that take part: None for all, else a bool
    array over the current lanes (whole warps)."""
    if C.lanes is not None:                 # divergent path: the gathered lanes, in order
        lanes = C.lanes
        rows = lanes.reshape(-1, WARP) if lanes.size % WARP == 0 else None
        if rows is None or (rows[:, 0] % WARP).any() or (np.diff(rows, axis=1) != 1).any():
            raise _not_converged(what, text)
        return None
    if C.active is None:
        return None
    per_warp = C.active.reshape(-1, WARP)
    here = per_warp.any(axis=1)
    if (per_warp.all(axis=1) != here).any():
        raise _not_converged(what, text)
    return C.active


def _not_converged(what: str, text: str) -> KernelFault:
    return KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                       f"{what} is warp-collective (.aligned): every lane of the warp must "
                       f"execute it, converged ({text})")

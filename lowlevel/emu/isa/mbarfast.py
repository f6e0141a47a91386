"""The converged path's mbarrier arrive and wait when every arriving lane of a CTA names
the same object at one offset of its CTA's shared memory (`cuda::barrier` in a loop: the
address is a constant, every thread arrives once): per CTA arithmetic on the objects,
per lane one subtraction for the states, with no sort and no per-lane address checks.

Each function returns None where its case does not hold (gathered lanes, observers, a
guard, per-lane addresses, an offset the window check would refuse, an arrive that is not
plain arithmetic up to its CTA's last thread, an object mbarrier.init did not set up): the
exact path of isa/mbarrier.py then runs and faults or serializes as it always did. Where
it holds the result is the one that path computes: the lane-order chain of states
(mbarstate.Arrive._uniform's arithmetic, per CTA instead of per sorted run).
"""
from __future__ import annotations

import numpy as np

from .addressing import SHARED_WINDOW, WINDOW_SPAN
from .mbarstate import FIELD, TAG, TAG_SHIFT

_U64 = np.uint64
_FIELD = _U64(FIELD)
_PHASE = 1 << 40
_KEEP = ((1 << 64) - 1) ^ FIELD ^ (FIELD << 20)      # the tag, parity and tx-count
_TAGGED = TAG << (TAG_SHIFT - 41)                   # bits 41-63 of a valid object, tx 0


def _scalar(x):
    """The Python int of a scalar operand, or None for a per-lane array."""
    if isinstance(x, np.ndarray):
        if x.ndim:
            return None
        x = x[()]
    return int(x)


def _objects(C, generic, addr):
    """(uint64 view of shared memory, element index of the object in each CTA), or None."""
    if C.lanes is not None or C.observers or C.smem is None or C.smem.size == 0:
        return None
    off = _scalar(addr)
    if off is None or generic not in (True, False):
        return None
    if generic is True:
        if not SHARED_WINDOW <= off < SHARED_WINDOW + WINDOW_SPAN:
            return None
        off -= SHARED_WINDOW
    if off % 8 or off + 8 > C.smem_window:
        return None
    key = (off, C.smem.size, C.smem_stride, C.padded, C.n)
    state = C.mbarrier_state
    cached = state.objects
    if cached is None or cached[0] != key:
        count = C.smem.size // C.smem_stride
        if count * C.padded != C.n:
            return None
        idx = (np.arange(count, dtype=np.int64) * C.smem_stride + off) >> 3
        cached = state.objects = (key, idx)
    return C.smem.view(_U64), cached[1]


def arrive(C, kind: str, generic, addr, b, nocomplete: bool, guard):
    """mbarrier.arrive / arrive_drop (count b, no tx) of the converged lanes: the states,
    or None where the exact path must decide."""
    if kind not in ("arrive", "arrive_drop") or nocomplete or guard is not None:
        return None
    bits = _scalar(b)
    if bits is None or bits >> 32:
        return None
    where = _objects(C, generic, addr)
    if where is None:
        return None
    view, idx = where
    word = view[idx]
    drop = kind == "arrive_drop"
    c = bits
    step = c + (c << 20) * drop
    if C.active is None and (word == word[0]).all():
        # lock-step CTAs (one launch's CTAs at one barrier): one object's arithmetic
        final = _arrive_one(int(word[0]), C.padded, c, drop)
        if final is None:
            return None
        states = word[0] - _rank_times(C, idx.size, step)
        view[idx] = _U64(final)
        C.mbar_updates += 1
        # Every state is this object less some arrivals (no borrow out of the pending
        # count): valid, of its phase. Register arrays are never written in place (the
        # scheduler copies before it scatters), so a wait handed this very array can
        # take both from here instead of testing 8192 states.
        C.mbarrier_state.states = (states, (int(word[0]) >> 40) & 1)
        return states
    # the tag of a valid object above a tx-count of 0 (bits 41-63), in one comparison
    if not (word >> _U64(41) == _U64(_TAGGED)).all():
        return None
    pending = word & _FIELD
    arrivals, rank = _ranks(C, idx.size)
    need = arrivals * _U64(c)
    # no phase may complete before a CTA's last arrival (pending > 0 and count <= pending
    # for every arrival before it) and none may over-arrive
    if not ((need <= pending) & (pending > _U64(0))).all():
        return None
    states = np.repeat(word, C.padded) - rank * _U64(step)
    if C.active is not None:
        states[~C.active] = 0
    expected = ((word >> _U64(20)) & _FIELD) - need * _U64(drop)
    # the last arrival completes the phase: parity flips, pending reloads from expected
    completed = ((word & _U64(_KEEP)) ^ _U64(_PHASE)) | (expected << _U64(20)) | expected
    done = (need == pending) & (arrivals > _U64(0))
    view[idx] = np.where(done, completed, word - arrivals * _U64(step))
    C.mbar_updates += 1
    return states


def _arrive_one(word: int, n: int, c: int, drop: bool):
    """The object after n arrivals of count c (the same rules as the vectorized path), or
    None where that is not plain arithmetic."""
    pending = word & FIELD
    if word >> 41 != _TAGGED or not 0 < n * c <= pending:
        return None
    expected = ((word >> 20) & FIELD) - n * c * drop
    if n * c == pending:
        return ((word & _KEEP) ^ _PHASE) | expected << 20 | expected
    return word - n * (c + (c << 20) * drop)


def _rank_times(C, ctas: int, step: int):
    """Each lane's arrivals before it in its CTA, times `step` (uint64; every lane arrives)."""
    key = (ctas, C.padded, step)
    state = C.mbarrier_state
    cached = state.rank_step
    if cached is None or cached[0] != key:
        rank = np.tile(np.arange(C.padded, dtype=np.uint64), ctas) * _U64(step)
        cached = state.rank_step = (key, rank)
    return cached[1]


def _ranks(C, ctas: int):
    """(arrivals per CTA, each lane's arrivals before it in its CTA), uint64: the active
    lanes arrive, in lane order."""
    active = C.active
    if active is None:
        return np.full(ctas, C.padded, np.uint64), _rank_times(C, ctas, 1)
    ranks = np.cumsum(active.reshape(ctas, C.padded), axis=1, dtype=np.uint64)
    return ranks[:, -1].copy(), ranks.ravel() - _U64(1)


def wait(C, generic, addr, token, parity: bool, guard):
    """test_wait / try_wait of the converged lanes on their CTA's object: (done, failed)
    over the lanes, or None where the exact path must decide (it also faults). Where every
    active lane's phase is over, done is one True for all and failed None: the branch on it
    stays scalar (the inactive lanes' values are never looked at)."""
    state = C.mbarrier_state
    if guard is not None or state.landing:
        return None
    where = _objects(C, generic, addr)
    if where is None:
        return None
    view, idx = where
    word = view[idx]
    active = C.active
    if (word == word[0]).all():
        w = int(word[0])
        if w >> TAG_SHIFT != TAG:
            return None
        phase = (w >> 40) & 1
    else:
        if not ((word >> _U64(TAG_SHIFT)) == _U64(TAG)).all():
            return None
        phase = ((word >> _U64(40)) & _U64(1)).astype(np.uint8)[:, None]
    if parity:
        mine = np.asarray(token, np.uint32) & np.uint32(1)
    else:
        known = state.states
        if known is not None and known[0] is token and isinstance(phase, int):
            if known[1] != phase:
                return np.True_, None
            failed = np.ones(C.n, bool) if active is None else active.copy()
            return np.zeros(C.n, bool), failed
        t = np.asarray(token, np.uint64)
        if not _valid_states(t if active is None or t.ndim == 0 else t[active]):
            return None
        if isinstance(phase, int) and active is None:
            bits = t & _U64(_PHASE)
            # a state's phase is over where its parity differs from the object's
            if (bits.all() if phase == 0 else not bits.any()):
                return np.True_, None
        mine = (t >> _U64(40)) & _U64(1)
    if isinstance(phase, int):
        done = np.broadcast_to(mine != phase, (C.n,))
    else:
        done = (np.broadcast_to(mine, (C.n,)).reshape(idx.size, C.padded) != phase).ravel()
    failed = ~done if active is None else ~done & active
    if not failed.any():
        return np.True_, None
    return done, failed


def _valid_states(t) -> bool:
    """Whether every state carries the tag of a valid object (bits 62-63 are 0b10)."""
    if t.size == 0:
        return True
    return int(t.min()) >> TAG_SHIFT == TAG and int(t.max()) >> TAG_SHIFT == TAG


__all__ = ["arrive", "wait"]

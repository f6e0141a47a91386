"""The mbarrier object's encoding and the updates of one thread, for isa/mbarrier.py (its
docstring defines both), and the same updates for many threads on one object at once.

Threads of one instruction that hit the same object are serialized in lane order by the
engine's atomics (engine/atomics.py), which hands each object's run of threads to `group`
of the step: between two events (a phase completing, an arrive beyond the pending count,
a tx-count leaving its range) a run is plain arithmetic, one cumulative sum over all the
objects' runs; each event is one vectorized step of the one-thread update. So a block of
threads arriving on its barrier costs a few numpy calls, not one step per thread, and every
returned state is the one the lane-order chain gives.
"""
from __future__ import annotations

import numpy as np

_U64 = np.uint64
FIELD = (1 << 20) - 1                 # pending and expected counts, and |tx-count|
_TX_BITS = 21
TAG, TAG_SHIFT = 2, 62


def encode(pending, expected, phase, tx):
    """The object's 64 bits (vectorized over uint64 arrays)."""
    pending, expected, phase = (np.asarray(x, np.uint64) for x in (pending, expected, phase))
    tx = np.asarray(tx, np.int64).astype(np.uint64) & _U64((1 << _TX_BITS) - 1)
    return (pending | expected << _U64(20) | phase << _U64(40) | tx << _U64(41)
            | _U64(TAG << TAG_SHIFT))


def decode(word):
    """(valid, pending, expected, phase, tx) of 64-bit words."""
    w = np.asarray(word, np.uint64)
    valid = (w >> _U64(TAG_SHIFT)) == _U64(TAG)
    pending = (w & _U64(FIELD)).astype(np.int64)
    expected = ((w >> _U64(20)) & _U64(FIELD)).astype(np.int64)
    phase = ((w >> _U64(40)) & _U64(1)).astype(np.int64)
    tx = ((w >> _U64(41)) & _U64((1 << _TX_BITS) - 1)).astype(np.int64)
    tx = np.where(tx >= 1 << (_TX_BITS - 1), tx - (1 << _TX_BITS), tx)
    return valid, pending, expected, phase, tx


def is_valid(word):
    """Whether 64-bit words are objects mbarrier.init set up (decode's first field)."""
    return (np.asarray(word, np.uint64) >> _U64(TAG_SHIFT)) == _U64(TAG)


def phase_of(word):
    """The phase parity of 64-bit words (decode's fourth field)."""
    return ((np.asarray(word, np.uint64) >> _U64(40)) & _U64(1)).astype(np.int64)


def unpack(b):
    """(count, tx change) packed by the emitter into one uint64 per lane."""
    b = np.asarray(b, np.uint64)
    return (b & _U64(0xFFFFFFFF)).astype(np.int64), (b >> _U64(32)).astype(np.uint32).view(np.int32).astype(np.int64)


def update(old, b, drop: bool):
    """The object after one thread's arrive/expect_tx/complete_tx (b: count | tx << 32);
    an invalid object or an arrive beyond the pending count is left as it was (the check
    after the atomic faults on it)."""
    valid, pending, expected, phase, tx = decode(old)
    count, dtx = unpack(b)
    ok = valid & (count <= pending)
    pending = pending - count
    if drop:
        expected = np.maximum(expected - count, 0)
    tx = tx + dtx
    done = (pending == 0) & (tx == 0)
    new = encode(np.where(done, expected, pending), expected, phase ^ done, np.where(done, 0, tx))
    return np.where(ok, new, np.asarray(old, np.uint64))


class Arrive:
    """arrive (drop=False; also expect_tx and complete_tx) or arrive_drop: a function of
    (old, b) for one thread per object, and `group` for runs of threads per object."""

    def __init__(self, drop: bool):
        self.drop = drop

    def __call__(self, old, b):
        return update(old, b, self.drop)

    def group(self, view, addr, starts, lens, bs, old_sorted) -> None:
        """Objects view[addr], run k = threads starts[k]:starts[k]+lens[k] of `bs` (sorted
        by address, lane order kept): fill old_sorted, store the final objects."""
        if self._uniform(view, addr, starts, lens, bs, old_sorted):
            return
        count, dtx = unpack(bs)
        cc, cd = np.cumsum(count), np.cumsum(dtx)           # inclusive, over all runs
        word = view[addr].copy()
        if self._quick(view, addr, starts, lens, bs, old_sorted, word, count, dtx, cc, cd):
            return
        seg = np.repeat(np.arange(starts.size), lens)
        pos, end = starts.copy(), starts + lens
        live = decode(word)[0]
        for k in np.flatnonzero(~live):                      # invalid: left as it is
            old_sorted[starts[k]:end[k]] = word[k]
        idx = np.arange(bs.size)
        while live.any():
            _, p, e, ph, t = decode(word)
            base_c = np.where(pos > 0, cc[pos - 1], 0)       # sums before each run's position
            base_d = np.where(pos > 0, cd[pos - 1], 0)
            mine = live[seg] & (idx >= pos[seg])
            c_in = cc - base_c[seg]                          # through this thread
            c_ex = c_in - count
            t_in = t[seg] + cd - base_d[seg]
            p_in = p[seg] - c_in
            event = mine & ((count > p[seg] - c_ex) | ((p_in == 0) & (t_in == 0))
                            | (np.abs(t_in) > FIELD))
            first = np.full(starts.size, -1)
            hit = np.flatnonzero(event)
            if hit.size:
                s_hit = seg[hit]
                keep = np.ones(hit.size, bool)
                keep[1:] = s_hit[1:] != s_hit[:-1]
                first[s_hit[keep]] = hit[keep]
            stop = np.where(first >= 0, first, end)          # threads before it: arithmetic
            quiet = mine & (idx < stop[seg])
            q = np.flatnonzero(quiet)
            qs = seg[q]
            sub = self.drop * c_ex[q]
            old_sorted[q] = encode(p[qs] - c_ex[q], e[qs] - sub, ph[qs], t_in[q] - dtx[q])
            ev = np.flatnonzero(first >= 0)
            fe = first[ev]
            before = encode(p[ev] - c_ex[fe], e[ev] - self.drop * c_ex[fe], ph[ev],
                            t_in[fe] - dtx[fe])
            old_sorted[fe] = before
            done = np.flatnonzero(live & (first < 0))
            last = end[done] - 1
            if done.size:
                word[done] = update(old_sorted[last], bs[last], self.drop)
            word[ev] = update(before, bs[fe], self.drop)
            pos[ev] = fe + 1
            live[done] = False
            live &= pos < end
        view[addr] = word

    def _uniform(self, view, addr, starts, lens, bs, old_sorted):
        """Every thread the same plain arrive (count c, no tx) on valid objects with no
        tx-count, none completing before its run's last thread: the k-th thread of a run
        sees the object less k * c arrivals, bit arithmetic on the words. False if not so."""
        if not (bs == bs[0]).all():
            return False
        c, dtx = (int(x[0]) for x in unpack(bs[:1]))
        word = view[addr]
        valid, p, _, _, t = decode(word)
        if dtx != 0 or not valid.all() or (t != 0).any() or (p - (lens - 1) * c <= 0).any():
            return False
        k = np.arange(bs.size) - np.repeat(starts, lens)
        step = _U64(c + (c << 20) * self.drop)
        old_sorted[:] = np.repeat(word, lens) - k.astype(_U64) * step
        last = starts + lens - 1
        view[addr] = update(old_sorted[last], bs[last], self.drop)
        return True

    def _quick(self, view, addr, starts, lens, bs, old_sorted, word, count, dtx, cc, cd):
        """The common run: valid objects, and no event before each run's last thread
        (a block arriving once each, the last completing the phase). False if not so."""
        valid, p, e, ph, t = decode(word)
        if not valid.all():
            return False
        first = starts == 0
        base_c = np.repeat(np.where(first, 0, cc[starts - 1]), lens)
        c_ex = cc - base_c - count
        p_in = np.repeat(p, lens) - c_ex - count
        t_in = np.repeat(t - np.where(first, 0, cd[starts - 1]), lens) + cd
        event = (p_in < 0) | ((p_in == 0) & (t_in == 0)) | (np.abs(t_in) > FIELD)
        last = starts + lens - 1
        event[last] = False
        if event.any():
            return False
        old_sorted[:] = encode(p_in + count, np.repeat(e, lens) - self.drop * c_ex,
                               np.repeat(ph, lens), t_in - dtx)
        view[addr] = update(old_sorted[last], bs[last], self.drop)
        return True


def _init(old, b):
    count = np.asarray(b, np.uint64)
    return encode(count, count, np.zeros_like(count), np.zeros(count.shape, np.int64))


def _inval(old, b):
    return np.zeros(np.shape(old), np.uint64)


STEPS = {"arrive": Arrive(False), "arrive_drop": Arrive(True), "init": _init, "inval": _inval}

__all__ = ["FIELD", "TAG", "TAG_SHIFT", "encode", "decode", "is_valid", "phase_of", "unpack", "update", "Arrive", "STEPS"]

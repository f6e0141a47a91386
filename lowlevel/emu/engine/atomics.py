"""Atomic read-modify-write over many threads at once, serialized exactly.

`atomic_rmw(view, idx, op, b, c)` applies one `atom`/`red` instruction for a set of threads
(in lane order) to the elements `view[idx]` and returns the old value each thread saw.
The result is exactly that of executing the threads one after the other in lane order:
threads that hit different addresses do not interact; threads that hit the same address
see the values left by the threads before them (so the returned old values form a chain).

Strategies, all exact for that serialization:
- no two threads share an address: one gather, one elementwise op, one scatter;
- integer add and xor (groups): sort by address, exclusive prefix per address with one
  cumsum / cumulative xor, all vectorized;
- an op (a function of (old, b)) with a `group(view, addr, starts, lens, b, old)` method
  (the mbarrier updates of isa/mbarrier.py): that method, given the threads sorted by
  address (segment starts and lengths), fills their old values and stores the finals;
- everything else (float add, which must round after every step in the element's type,
  min/max/and/or, exch, cas, inc, dec): either `rounds` (step r applies the r-th thread of
  every conflicting address, vectorized over addresses) or one pass per conflicting
  address (`ufunc.accumulate` in the element's dtype, which is a sequential scan, or a
  scalar loop for cas/inc/dec), whichever needs fewer Python-level steps.
"""
from __future__ import annotations

import numpy as np

from ..isa.numerics import flush_f32

_ACCUMULATE = {"add": np.add, "min": np.minimum, "max": np.maximum,
               "and": np.bitwise_and, "or": np.bitwise_or}
_F32_MIN_NORMAL = np.float32(2.0 ** -126)


def _flush(x):
    """Subnormal f32 values -> zero of the same sign (atom.add.f32 on global memory)."""
    return flush_f32(np.asarray(x, np.float32))


def _step(op, old, b, c, ftz):
    """The new value after one thread's operation (vectorized). `op` may be a function
    of (old, b) over the raw bits (the half-precision adds of isa/halfatomic.py)."""
    if callable(op):
        return np.asarray(op(old, b)).astype(old.dtype, copy=False)
    if op == "add":
        if ftz:
            return _flush(_flush(old) + _flush(b))
        return (old + b).astype(old.dtype, copy=False)
    if op == "min":
        return np.minimum(old, b)
    if op == "max":
        return np.maximum(old, b)
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return b
    if op == "cas":
        return np.where(old == b, c, old)
    if op == "inc":
        return np.where(old >= b, old.dtype.type(0), old + old.dtype.type(1))
    if op == "dec":
        return np.where((old == 0) | (old > b), b, old - old.dtype.type(1))
    raise ValueError(op)


def atomic_rmw(view: np.ndarray, idx: np.ndarray, op: str, b, c=None, ftz: bool = False):
    """Apply `op` for each thread (position in idx) to view[idx[i]] in order; return the
    old values (view.dtype). b, c: arrays or scalars of view.dtype."""
    dt = view.dtype
    n = idx.size
    if n == 0:
        return np.zeros(0, dt)
    b = np.broadcast_to(np.asarray(b, dt), (n,))
    if c is not None:
        c = np.broadcast_to(np.asarray(c, dt), (n,))
    if n == 1:
        old = view[idx]
        view[idx] = _step(op, old, b, c, ftz)
        return old
    order = np.argsort(idx, kind="stable")        # ties keep lane order: the serialization
    s = idx[order]
    newseg = np.empty(n, bool)
    newseg[0] = True
    np.not_equal(s[1:], s[:-1], out=newseg[1:])
    if newseg.all():                               # no conflicts
        old = view[idx]
        view[idx] = _step(op, old, b, c, ftz)
        return old
    starts = np.flatnonzero(newseg)
    lens = np.diff(np.append(starts, n))
    addr = s[starts]
    bs = b[order]
    cs = c[order] if c is not None else None
    old_sorted = np.empty(n, dt)
    if getattr(op, "group", None) is not None:     # the op scans a segment itself
        op.group(view, addr, starts, lens, bs, old_sorted)
    elif dt.kind in "iu" and op in ("add", "xor"):
        _group_scan(view, op, addr, starts, lens, bs, old_sorted)
    elif op == "exch":
        first = view[addr]
        old_sorted[1:] = bs[:-1]
        old_sorted[starts] = first
        view[addr] = bs[starts + lens - 1]
    else:
        _sequential(view, op, addr, starts, lens, bs, cs, old_sorted, ftz)
    old = np.empty(n, dt)
    old[order] = old_sorted
    return old


def _group_scan(view, op, addr, starts, lens, bs, old_sorted):
    """Integer add / xor: exclusive prefix per address, vectorized."""
    dt = view.dtype
    udt = np.dtype(f"u{dt.itemsize}")
    u = bs.view(udt).astype(np.uint64)
    mem = view.view(udt)[addr].astype(np.uint64)
    if op == "add":
        incl = np.cumsum(u, dtype=np.uint64)           # wraps mod 2^64: exact mod 2^k
        excl = incl - u
        before = excl[starts]
        seg_excl = excl - np.repeat(before, lens)
        old = np.repeat(mem, lens) + seg_excl
        total = incl[starts + lens - 1] - before
        final = mem + total
    else:
        incl = np.bitwise_xor.accumulate(u)
        excl = incl ^ u
        before = excl[starts]
        old = np.repeat(mem, lens) ^ excl ^ np.repeat(before, lens)
        final = mem ^ incl[starts + lens - 1] ^ before
    old_sorted[:] = old.astype(udt).view(dt)
    view.view(udt)[addr] = final.astype(udt)


def _sequential(view, op, addr, starts, lens, bs, cs, old_sorted, ftz):
    dt = view.dtype
    # Threads alone at their address: one vectorized step.
    single = lens == 1
    if single.any():
        p = starts[single]
        a = addr[single]
        o = view[a]
        old_sorted[p] = o
        view[a] = _step(op, o, bs[p], None if cs is None else cs[p], ftz)
    multi = ~single
    m_starts, m_lens, m_addr = starts[multi], lens[multi], addr[multi]
    maxlen = int(m_lens.max())
    scalar = op in ("cas", "inc", "dec")
    cost_rounds = maxlen * 20.0
    cost_segments = float(m_lens.sum()) * 0.6 if scalar else m_starts.size * 10.0
    if callable(op) or cost_rounds <= cost_segments:
        for r in range(maxlen):
            sel = m_lens > r
            p = m_starts[sel] + r
            a = m_addr[sel]
            o = view[a]
            old_sorted[p] = o
            view[a] = _step(op, o, bs[p], None if cs is None else cs[p], ftz)
        return
    if scalar:
        t = dt.type
        for st, ln, a in zip(m_starts.tolist(), m_lens.tolist(), m_addr.tolist()):
            o = int(view[a])
            bl = bs[st:st + ln].tolist()
            cl = cs[st:st + ln].tolist() if cs is not None else None
            olds = []
            for i in range(ln):
                olds.append(o)
                if op == "cas":
                    if o == bl[i]:
                        o = cl[i]
                elif op == "inc":
                    o = 0 if o >= bl[i] else o + 1
                else:
                    o = bl[i] if (o == 0 or o > bl[i]) else o - 1
            old_sorted[st:st + ln] = np.array(olds, dtype=np.uint64 if dt.kind == "u" else np.int64).astype(dt)
            view[a] = t(o)
        return
    ufunc = _ACCUMULATE[op]
    for st, ln, a in zip(m_starts.tolist(), m_lens.tolist(), m_addr.tolist()):
        seq = np.empty(ln + 1, dt)
        seq[0] = view[a]
        seq[1:] = bs[st:st + ln]
        if ftz:
            seq = _flush(seq)
        acc = ufunc.accumulate(seq, dtype=dt)
        if ftz and np.any((acc != 0) & (np.abs(acc) < _F32_MIN_NORMAL)):
            o = seq[0]                                 # a subnormal step: flush each one
            for i in range(ln):
                acc[i] = o
                o = _flush(np.array([o + seq[i + 1]], dt))[0]
            acc[ln] = o
        old_sorted[st:st + ln] = acc[:-1]
        view[a] = acc[-1]


__all__ = ["atomic_rmw"]

"""fma.rn.f32 on arrays, the engine's hottest arithmetic (sgemm's inner loop): float32
a*b + c rounded once, in a handful of numpy passes.

a*b is exact in float64 (24 + 24 significant bits fit in 53). s = fl64(a*b + c) rounded
to float32 is then the correctly rounded result everywhere except
  1. where s lies exactly on a float32 midpoint and a*b + c does not (the float64 rounding
     moved it there: a double rounding). Float32 midpoints are float64 numbers and
     rounding is monotonic, so s is on the wrong side of a midpoint only if it sits on it:
     bits 0..28 of s (what float64 -> float32 drops of a normal) are exactly 1 << 28;
  2. below float32's normal range, where more bits are dropped (and the midpoints are
     elsewhere): |s| < 2^-126.
Both are found from the bits of s alone; only there the exact error of s is computed
(Knuth's two-sum), s is rounded to odd with it (sticky bit), and that rounds to float32
correctly (Boldo & Melquiond, IEEE TC 2008: float64 keeps more than two extra bits).
tests/emu/isa/test_fma_f32.py checks against exact rationals.

The decoder widens fma operands to float64 once per run of fmas (engine/decode.py,
BlockGen.widened), so sgemm's register-blocked loop converts each of them once, not four
times: fma_f32_wide takes those.
"""
import threading

import numpy as np

from ..ptx.ir import Reg

F32, F64, U32, U64, I32, I64 = np.float32, np.float64, np.uint32, np.uint64, np.int32, np.int64

_DROPPED = U64((1 << 29) - 1)             # what float64 -> float32 drops of a normal
_HALF = U64(1 << 28)                      # ... exactly half an ulp of the float32
_ABS = (1 << 63) - 1
_MIN_NORMAL = int(F64(2.0 ** -126).view(U64))
_ABS32 = (1 << 31) - 1
_MIN_NORMAL32 = int(F32(2.0 ** -126).view(U32))


def round_sum_f32(p, c):
    """float32 rounding of p + c, where p is a float64 array (an exact product of two
    float32) and c a float32 array of the same shape."""
    return _round_sum(p, p + c, lambda i: c[i].astype(F64))


def _round_sum(p, s, c_at, low=None):
    """float32 rounding of p + c given s = fl64(p + c); c_at(flat indices): those c;
    `low`: a uint64 scratch array of s's shape, or None."""
    r = s.astype(F32)
    bits = s.view(U64)
    risky = np.bitwise_and(bits, _DROPPED, out=low) == _HALF
    # Any |s| < 2^-126 rounds to |r| <= 2^-126 (zero included), so r's smallest magnitude
    # gates the closer look (r has half the bytes of s). It comes without a temporary: the
    # smallest bits over the unsigned view (the smallest positive, or with none, the
    # smallest negative) and over the signed one (the smallest negative, or with none, the
    # smallest positive).
    rb = r.view(U32)
    if s.size and min(int(rb.min()) & _ABS32, int(rb.view(I32).min()) & _ABS32) <= _MIN_NORMAL32:
        magnitude = bits & U64(_ABS)                        # rare: look closer
        # 0 < |s| < 2^-126 (the unsigned wrap of 0 - 1 leaves zeros out)
        risky |= (magnitude - U64(1)) < U64(_MIN_NORMAL - 1)
    if np.count_nonzero(risky):
        i = np.flatnonzero(risky)
        r.reshape(-1)[i] = _round_exactly(p.reshape(-1)[i], c_at(i))
    return r


def _round_exactly(p, c):
    """RN32(p + c) through round-to-odd: the error e of s = fl(p + c) sets s's last bit."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c
        bb = s - p
        e = (p - (s - bb)) + (c - bb)                     # two-sum: s + e == p + c
        e = np.where(np.isfinite(e), e, F64(0))            # inf/NaN: s is the answer
        odd_needed = (e != 0) & ((s.view(U64) & U64(1)) == 0)
        s = np.where(odd_needed, np.nextafter(s, np.where(e > 0, F64(np.inf), F64(-np.inf))), s)
    return s.astype(F32)


def fma_f32_wide(a64, b64, c, general):
    """fma.rn.f32 of a and b given widened to float64 (exactly, from float32 registers)
    and c float32; `general` (numerics.fma_f32) takes what is not an array of one shape
    (uniform registers are numpy scalars)."""
    p = a64 * b64                                    # exact: 48 significant bits at most
    p_lanes, c_lanes = np.ndim(p), np.ndim(c)
    if p_lanes and c_lanes and p.shape == c.shape:
        return round_sum_f32(p, c)
    if p_lanes == 1 and c_lanes == 0:                # a uniform c (a polynomial's constant)
        return round_sum_f32(p, np.full(p.shape, c, F32))
    if p_lanes == 0 and c_lanes == 1:                # uniform a and b
        return round_sum_f32(np.full(c.shape, p, F64), c)
    return general(F32(a64) if np.ndim(a64) == 0 else a64.astype(F32),
                   F32(b64) if np.ndim(b64) == 0 else b64.astype(F32), c, "rn")


def fma_f32_group(a64s, b64s, cs, general):
    """Several independent fma.rn.f32 at once (a run that the decoder queued: no member
    reads what an earlier one writes), as rows of one array: a handful of numpy calls for
    the whole run instead of for each member. Returns the results in order."""
    n = cs[0].shape if type(cs[0]) is np.ndarray else None
    if n is None or len(n) != 1 or not all(
            type(v) is np.ndarray and v.shape == n for v in (*a64s, *b64s, *cs)):
        # uniform (scalar) registers, or what is not one lane array: member by member
        return [fma_f32_wide(a, b, c, general) for a, b, c in zip(a64s, b64s, cs)]
    shape = (len(cs), n[0])
    if shape[0] * shape[1] > _GROUP_ELEMENTS:
        return [fma_f32_wide(a, b, c, general) for a, b, c in zip(a64s, b64s, cs)]
    p, s, low = _scratch(shape)
    for i, (a, b) in enumerate(zip(a64s, b64s)):
        np.multiply(a, b, out=p[i])               # exact, as in fma_f32_wide
    np.stack(cs, out=s, casting="same_kind")      # c widened, exactly: one call, not one each
    np.add(p, s, out=s)
    return list(_round_sum(p, s, lambda i: np.concatenate(cs).astype(F64)[i], low))


# Work arrays of a group, kept per thread (streams run launches on their own threads) for
# the last shape: fresh ones of this size would each come from mmap (above glibc's
# threshold) and page-fault on every use, costing more than the arithmetic.
_GROUP_ELEMENTS = 1 << 17                # larger groups go member by member
_work = threading.local()


def _scratch(shape):
    arrays = getattr(_work, "arrays", None)
    if arrays is None or arrays[0].shape != shape:
        arrays = _work.arrays = (np.empty(shape, F64), np.empty(shape, F64), np.empty(shape, U64))
    return arrays


# --- code generation (arith.py's fma): runs of fmas queued on the BlockGen -------------

def queue(g, ins, d, a, b, c) -> None:
    """fma.rn.f32 d, a, b, c (unguarded): widen a and b (BlockGen.widened) and queue it;
    a member that reads what a queued one writes first flushes the queue."""
    reads = {g.slot(ins, o) for o in (a, b, c) if isinstance(o, Reg)}
    if reads & g.fma_dests:
        flush(g)
    x, y = g.widened(ins, a), g.widened(ins, b)
    g.fmas.append((ins, d, x, y, g.read(ins, c, "f32")))
    g.fma_dests.add(g.slot(ins, d))


def flush(g) -> None:
    """Emit the queued fmas: one call for the run (fma_f32_group), then their writes (the
    reads all happen first, so a member may overwrite what an earlier one read)."""
    q = g.fmas
    if len(q) == 1:
        ins, d, x, y, z = q[0]
        g.write(ins, d, f"_fma_f32_wide({x}, {y}, {z}, _fma_f32)", "f32", None)
    elif q:
        names = [g.fresh() for _ in q]
        cols = ["(" + ", ".join(m[j] for m in q) + ",)" for j in (2, 3, 4)]
        g.emit(f"{', '.join(names)}, = _fma_f32_group({', '.join(cols)}, _fma_f32)")
        for (ins, d, *_), name in zip(q, names):
            g.write(ins, d, name, "f32", None)
    q.clear()
    g.fma_dests.clear()


__all__ = ["fma_f32_group", "fma_f32_wide", "flush", "queue", "round_sum_f32"]

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
import numpy as np

F32, F64, U32, U64, I64 = np.float32, np.float64, np.uint32, np.uint64, np.int64

_DROPPED = U64((1 << 29) - 1)             # what float64 -> float32 drops of a normal
_HALF = U64(1 << 28)                      # ... exactly half an ulp of the float32
_ABS = (1 << 63) - 1
_MIN_NORMAL = int(F64(2.0 ** -126).view(U64))


def round_sum_f32(p, c):
    """float32 rounding of p + c, where p is a float64 array (an exact product of two
    float32) and c a float32 array of the same shape."""
    s = p + c
    r = s.astype(F32)
    bits = s.view(U64)
    risky = (bits & _DROPPED) == _HALF
    # the smallest magnitude without a temporary: the smallest bits over the unsigned view
    # (the smallest positive, or with none, the smallest negative) and over the signed one
    # (the smallest negative, or with none, the smallest positive)
    if s.size and min(int(bits.min()) & _ABS, int(bits.view(I64).min()) & _ABS) < _MIN_NORMAL:
        magnitude = bits & U64(_ABS)                        # rare: look closer
        # 0 < |s| < 2^-126 (the unsigned wrap of 0 - 1 leaves zeros out)
        risky |= (magnitude - U64(1)) < U64(_MIN_NORMAL - 1)
    if np.count_nonzero(risky):
        i = np.flatnonzero(risky)
        r[i] = _round_exactly(p[i], c[i].astype(F64))
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
    if isinstance(p, np.ndarray) and isinstance(c, np.ndarray) and p.shape == c.shape:
        return round_sum_f32(p, c)
    return general(F32(a64) if np.ndim(a64) == 0 else a64.astype(F32),
                   F32(b64) if np.ndim(b64) == 0 else b64.astype(F32), c, "rn")


__all__ = ["fma_f32_wide", "round_sum_f32"]

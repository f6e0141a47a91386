"""PTX arithmetic that numpy does not do directly, on whole arrays (or numpy scalars).

Everything here works elementwise on values that are either numpy arrays or numpy
scalars (a register that is uniform across the batch stays a scalar). Functions return
the same kind: a 0-d result of np.where is turned back into a scalar by `scalar()`.

Rounding: numpy computes f32 and f64 arithmetic with IEEE round-to-nearest-even. The
directed modes (.rz .rm .rp) are derived from the round-to-nearest result plus the exact
error term of the operation (error-free transforms): if the nearest result lies on the
wrong side of the exact value, step one ulp with nextafter.
"""
import math
from fractions import Fraction

import numpy as np

from .fma32 import round_sum_f32

F32, F64 = np.float32, np.float64
U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
I8, I16, I32, I64 = np.int8, np.int16, np.int32, np.int64
UINT = {1: U8, 2: U16, 4: U32, 8: U64}
SINT = {1: I8, 2: I16, 4: I32, 8: I64}
FLOAT = {4: F32, 8: F64}


def scalar(x):
    """0-d arrays (from np.where on scalars) back to numpy scalars."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    return x


def select(p, a, b):
    """p ? a : b elementwise; p may be a numpy bool scalar."""
    if isinstance(p, np.bool_):
        return a if p else b
    return np.where(p, a, b)


# --- integers -----------------------------------------------------------------------

def udiv(a, b):
    """Unsigned division; x/0 gives all ones (what NVIDIA GPUs return; the ISA leaves
    it unspecified)."""
    zero = b == 0
    q = a // select(zero, b.dtype.type(1), b)
    return scalar(select(zero, a.dtype.type(-1 & np.iinfo(a.dtype).max), q))


def urem(a, b):
    """Unsigned remainder; x%0 gives x."""
    zero = b == 0
    return scalar(select(zero, a, a % select(zero, b.dtype.type(1), b)))


def _magnitude(a):
    """|a| of a signed value as the unsigned type (|INT_MIN| is exact there)."""
    u = a.view(UINT[a.dtype.itemsize]) if isinstance(a, (np.ndarray, np.generic)) else a
    neg = a < 0
    return scalar(select(neg, (u.dtype.type(0) - u), u)), neg


def sdiv(a, b):
    """Signed division truncating toward zero; INT_MIN/-1 wraps to INT_MIN; x/0 is
    computed as |x|/0 = all ones with the sign of x applied (-1 for x >= 0, 1 for x < 0),
    as the hardware's unsigned-core division does."""
    ua, na = _magnitude(a)
    ub, nb = _magnitude(b)
    uq = udiv(ua, ub)
    q = scalar(select(na != nb, uq.dtype.type(0) - uq, uq))
    return q.view(a.dtype)


def srem(a, b):
    """Signed remainder with the sign of the dividend; x%0 gives x."""
    ua, na = _magnitude(a)
    ub, _ = _magnitude(b)
    ur = urem(ua, ub)
    r = scalar(select(na, ur.dtype.type(0) - ur, ur))
    return r.view(a.dtype)


def mulhi_u64(a, b):
    """High 64 bits of the 128-bit product of two uint64 values."""
    m32 = U64(0xFFFFFFFF)
    s32 = U64(32)
    al, ah = a & m32, a >> s32
    bl, bh = b & m32, b >> s32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    hh = ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    return hh + (lh >> s32) + (hl >> s32) + (mid >> s32)


def mulhi_s64(a, b):
    """High 64 bits of the signed 128-bit product (a, b int64)."""
    ua, ub = a.view(U64), b.view(U64)
    hi = mulhi_u64(ua, ub)
    hi = hi - scalar(select(a < 0, ub, U64(0))) - scalar(select(b < 0, ua, U64(0)))
    return hi.view(I64)


def shift_left(a, n, width):
    """shl: amounts >= width give 0 (PTX clamps the amount to the width)."""
    t = a.dtype.type
    big = n >= width
    r = a << scalar(select(big, t(0), n.astype(a.dtype)))
    return scalar(select(big, t(0), r))


def shift_right(a, n, width):
    """shr: logical for unsigned, arithmetic for signed; amount clamped to width
    (so a signed value shifted by >= width becomes all sign bits)."""
    t = a.dtype.type
    big = n >= width
    if np.issubdtype(a.dtype, np.signedinteger):
        return a >> scalar(select(big, t(width - 1), n.astype(a.dtype)))
    r = a >> scalar(select(big, t(0), n.astype(a.dtype)))
    return scalar(select(big, t(0), r))


# --- floating point: rounding helpers ---------------------------------------------

def two_sum(a, b):
    """s, e with s = fl(a+b) and s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


_SPLIT = F64(134217729.0)        # 2^27 + 1, Veltkamp splitting of a double


def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a, b):
    """p, e with p = fl(a*b) and p + e == a*b exactly (Dekker), barring over/underflow."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def directed(s, e, mode):
    """Round the exact value s + e (s = its round-to-nearest, same dtype) in `mode`. An
    infinite s stays: an infinite operand gives infinity in every mode, and an overflow
    of finite operands is round_overflow's."""
    if mode == "rn":
        return s
    with np.errstate(invalid="ignore"):
        if mode == "rz":
            step = (e != 0) & ((e < 0) != (s < 0)) & (s != 0)
            target = 0.0
        elif mode == "rm":
            step = e < 0
            target = -np.inf
        else:
            step = e > 0
            target = np.inf
        step = step & np.isfinite(s)
    return scalar(select(step, np.nextafter(s, s.dtype.type(target)), s))


def round_overflow(r, finite, mode):
    """r rounded to nearest; where it overflowed to infinity from a finite exact value
    (`finite`), a directed mode gives infinity only rounding away from zero (rp for a
    positive, rm for a negative value) and the largest finite value otherwise."""
    if mode == "rn":
        return r
    keep = (r > 0) if mode == "rp" else (r < 0) if mode == "rm" else False
    big = np.finfo(r.dtype).max
    return scalar(select(np.isinf(r) & finite & ~keep, np.copysign(big, r), r))


def exact_zero_sign(r, x, y, exact_zero, mode):
    """The sum x + y is exactly zero where `exact_zero`: IEEE 754 gives -0 under rm unless
    both addends are +0 (numpy's round-to-nearest sum is right in the other modes)."""
    if mode != "rm":
        return r
    both_plus = (x == 0) & ~np.signbit(x) & (y == 0) & ~np.signbit(y)
    return scalar(select(exact_zero & ~both_plus, r.dtype.type(-0.0), r))


def round_f64_to_f32(x, mode, e=None):
    """Round float64 x (+ exact residual e, if given) to float32 in `mode`.

    For mode rn with a residual, x is first made "round to odd" (sticky bit set when
    e != 0), which makes the final rounding to the 24-bit format correct: f64 keeps more
    than 2 extra bits.
    """
    if e is not None and mode == "rn":
        bits = x.view(U64)
        odd_needed = (e != 0) & ((bits & U64(1)) == 0)
        toward = scalar(select(e > 0, F64(np.inf), F64(-np.inf)))
        x = scalar(select(odd_needed, np.nextafter(x, toward), x))
        return x.astype(F32)
    y = x.astype(F32)
    if mode == "rn":
        return y
    y64 = y.astype(F64)
    with np.errstate(invalid="ignore"):
        if e is None:
            above = y64 > x          # y is above the exact value
            below = y64 < x
        else:
            above = (y64 > x) | ((y64 == x) & (e < 0))
            below = (y64 < x) | ((y64 == x) & (e > 0))
        if mode == "rz":
            fix = scalar(select(y64 > 0, above, below)) & np.isfinite(x)
            fix = fix | (np.isinf(y) & np.isfinite(x))
            return scalar(select(fix, np.nextafter(y, F32(0)), y))
        if mode == "rm":
            return scalar(select(above, np.nextafter(y, F32(-np.inf)), y))
        return scalar(select(below, np.nextafter(y, F32(np.inf)), y))


def f32_op_directed(op, a, b, mode):
    """add/sub/mul of float32 values with a directed rounding mode, via exact f64."""
    a64, b64 = a.astype(F64), b.astype(F64)
    if op == "mul":
        return round_f64_to_f32(a64 * b64, mode)      # a 24x24-bit product is exact
    if op == "sub":
        b64 = -b64
    s, e = two_sum(a64, b64)
    with np.errstate(invalid="ignore"):
        s = exact_zero_sign(s, a64, b64, (s == 0) & (e == 0), mode)
    return round_f64_to_f32(s, mode, e)


def f64_op_directed(op, a, b, mode):
    if op == "mul":                     # a*b + 0 with the zero that keeps a*b's sign
        return fma_f64(a, b, F64(0.0 if mode == "rm" else -0.0), mode)
    if op == "sub":
        b = -b
    with np.errstate(all="ignore"):
        s, e = two_sum(a, b)
        r = exact_zero_sign(directed(s, e, mode), a, b, (s == 0) & (e == 0), mode)
        return round_overflow(r, np.isfinite(a) & np.isfinite(b), mode)


def fma_f32(a, b, c, mode="rn"):
    """Fused multiply-add of float32 with a single rounding.

    The product of two floats is exact in float64; the sum with c is computed with its
    exact error term, and the final rounding to float32 uses both (round-to-odd for rn;
    for rn on arrays, fma32.round_sum_f32 does that only where it matters).
    """
    if mode == "rn" and (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
                         or isinstance(c, np.ndarray)):
        p = np.multiply(a, b, dtype=F64)
        # a uniform operand (a constant c of a polynomial step) becomes a lane array, so
        # every rn fma takes round_sum_f32's few passes, not the general error-term path
        p_lanes, c_lanes = np.ndim(p), np.ndim(c)
        if p_lanes == 1 and c_lanes == 0:
            c = np.full(p.shape, c, F32)
        elif p_lanes == 0 and c_lanes == 1:
            p = np.full(np.shape(c), p, F64)
        if np.ndim(p) and np.shape(p) == np.shape(c):
            return round_sum_f32(p, c)
    p = a.astype(F64) * b.astype(F64)
    c64 = c.astype(F64)
    s, e = two_sum(p, c64)
    with np.errstate(invalid="ignore"):
        s = exact_zero_sign(s, p, c64, (s == 0) & (e == 0), mode)
        e = scalar(select(np.isfinite(e), e, F64(0)))
    return round_f64_to_f32(s, mode, e)


_HUGE = F64(2.0 ** 995)
_TINY = F64(2.0 ** -960)


def fma_f64(a, b, c, mode="rn"):
    """Fused multiply-add of float64 with a single rounding.

    Round to nearest (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
    proved algorithms using rounding to odd", IEEE TC 2008): a*b = uh + ul exactly
    (Dekker), uh + c = th + tl exactly (Knuth), v = tl + ul rounded to odd, and
    RN(th + v) is a*b + c correctly rounded, wherever nothing over- or underflows. The
    directed modes round r + resid, the exact value as a float64 and a residual, and are
    exact where the residual is far from a rounding boundary. The other elements (the
    range guard, non-finite operands, directed near-boundary cases) are computed exactly
    with rationals; tests/emu/isa/test_fma_f64.py checks hard cases against Fraction.
    """
    scalar_in = not any(isinstance(v, np.ndarray) for v in (a, b, c))
    # at least 1-d: immediates are numpy scalars, and np.nonzero refuses 0-d arrays
    a, b, c = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, F64)) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        p, ep = two_prod(a, b)
        if mode == "rn":
            th, tl = two_sum(c, p)
            r = th + round_to_odd_sum(tl, ep)
            safe = True
        else:
            s, es = two_sum(p, c)
            t, et = two_sum(ep, es)
            r, er = two_sum(s, t)
            resid = er + et                       # exact value = r + er + et
            ulp = np.abs(r - np.nextafter(r, F64(0)))
            r = exact_zero_sign(r, p, c, (r == 0) & (resid == 0), mode)
            r = directed(r, resid, mode)
            safe = np.asarray((np.abs(resid) < ulp * 0.25) & (er == 0) | (resid == 0))
        fine_range = (np.abs(a) < _HUGE) & (np.abs(b) < _HUGE) & (np.abs(c) < _HUGE) \
            & (np.abs(p) > _TINY) & ((np.abs(c) > _TINY) | (c == 0)) & np.isfinite(r)
        zero_product = ((a == 0) | (b == 0)) & np.isfinite(a) & np.isfinite(b)
        zero = a * b                          # exact: a signed zero
        out = np.where(zero_product, exact_zero_sign(zero + c, zero, c, c == 0, mode), r)
        hard = ~zero_product & ~(safe & fine_range)
    if hard.any():
        out = np.array(out, copy=True)
        for i in zip(*np.nonzero(hard)):
            out[i] = fma_exact(float(a[i]), float(b[i]), float(c[i]), mode)
    out = out.astype(F64)
    return out[0] if scalar_in else out


def round_to_odd_sum(x, y):
    """x + y rounded to odd: exact sums stay, an inexact one becomes whichever of the
    two floats around it has an odd last bit (float64 arrays)."""
    v, e = two_sum(x, y)
    even = (v.view(np.int64) & 1) == 0
    bump = (e != 0) & even
    if not bump.any():
        return v
    return np.where(bump, np.nextafter(v, np.where(e > 0, F64(np.inf), F64(-np.inf))), v)


def fma_exact(a, b, c, mode):
    """a*b + c for one element: IEEE rules for infinities and NaN, exact rationals for the
    rest (a finite product never overflows here, unlike a*b in float64)."""
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return F64(np.nan)
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return F64(np.nan)                # inf * 0
        p = math.copysign(math.inf, a) * math.copysign(1.0, b)
        return F64(np.nan) if math.isinf(c) and c != p else F64(p)
    if math.isinf(c):
        return F64(c)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:                            # cancellation (a zero product is the fast path's)
        return F64(-0.0 if mode == "rm" else 0.0)
    return round_fraction_f64(exact, mode)


def round_fraction_f64(exact, mode):
    """A nonzero rational rounded to float64 in `mode`."""
    try:
        r = float(exact)                      # correctly rounded (CPython int division)
    except OverflowError:                     # rounds (to nearest) beyond the largest double
        r = np.inf if exact > 0 else -np.inf
        return round_overflow(F64(r), True, mode)
    rf = Fraction(r)
    if mode == "rn" or rf == exact:
        return F64(r)
    return directed(F64(r), F64(1.0 if exact > rf else -1.0), mode)


def flush_f32(x):
    """.ftz: subnormal float32 inputs/results become zero of the same sign."""
    return _flush(x, F32(1.1754943508222875e-38))


def flush_f64(x):
    """.ftz on the f64 approximations (rcp.approx.ftz.f64): subnormals to signed zero."""
    return _flush(x, F64(2.2250738585072014e-308))


def _flush(x, tiny):
    """x with its subnormals (0 < |x| < tiny) made zeros of their sign; x itself where it
    has none. Fast-math code flushes every float operand and result, almost never finding
    one: the common case is two numpy calls and a reduction, zeros one more test."""
    zero = type(tiny)(0)
    if not isinstance(x, np.ndarray):
        return np.copysign(zero, x) if abs(x) < tiny and x != 0 else x
    small = np.abs(x) < tiny
    if not small.any():
        return x
    small &= x != 0
    if not small.any():
        return x
    return np.where(small, np.copysign(zero, x), x)


def saturate_f(x):
    """.sat for floats: clamp to [0, 1], NaN becomes 0."""
    t = x.dtype.type
    with np.errstate(invalid="ignore"):
        y = np.minimum(np.maximum(x, t(0)), t(1))
    return scalar(select(np.isnan(x), t(0), y))


def fmin_ptx(a, b):
    """min.f: NaN loses to a number; -0.0 counts as less than +0.0."""
    r = np.fmin(a, b)
    both_zero = (a == 0) & (b == 0)
    return scalar(select(both_zero, scalar(select(np.signbit(a), a, b)), r))


def fmax_ptx(a, b):
    r = np.fmax(a, b)
    both_zero = (a == 0) & (b == 0)
    return scalar(select(both_zero, scalar(select(np.signbit(a), b, a)), r))


# --- conversions --------------------------------------------------------------------

_ROUND_INT = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def float_to_int(x, rnd, dtype):
    """cvt to an integer type: round as asked, saturate to the range, NaN -> 0."""
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        r = _ROUND_INT[rnd](x.astype(F64))
        lo, hi = F64(info.min), F64(info.max)
        nan = np.isnan(r)
        r = scalar(select(nan, F64(0), r))
        too_big = r >= hi            # hi may round up in f64 (2^63, 2^64): test first
        too_small = r <= lo
        clipped = np.clip(r, lo, hi)
        out = clipped.astype(dtype) if dtype().itemsize < 8 else \
            scalar(select(too_big | too_small, F64(0), clipped)).astype(dtype)
    out = scalar(select(too_big, dtype(info.max), out))
    out = scalar(select(too_small, dtype(info.min), out))
    return out


def int_to_float(x, mode, dtype):
    """cvt from an integer type to f32/f64 with rounding mode `mode`."""
    if x.dtype.itemsize <= 4:
        exact = x.astype(F64)                 # every 32-bit integer is exact in f64
        if dtype is F64:
            return exact
        return round_f64_to_f32(exact, mode)
    y = x.astype(dtype)                       # round to nearest (hardware conversion)
    if mode == "rn":
        return y
    # Compare in long double, which holds every 64-bit integer exactly on x86-64 and
    # aarch64 Linux (the codegen refuses directed 64-bit int->float elsewhere).
    xl = x.astype(np.longdouble)
    yl = y.astype(np.longdouble)
    above, below = yl > xl, yl < xl
    if mode == "rz":
        fix = scalar(select(y > 0, above, below))
        return scalar(select(fix, np.nextafter(y, dtype(0)), y))
    if mode == "rm":
        return scalar(select(above, np.nextafter(y, dtype(-np.inf)), y))
    return scalar(select(below, np.nextafter(y, dtype(np.inf)), y))


LONG_DOUBLE_EXACT_64 = np.finfo(np.longdouble).nmant >= 63


def round_float_to_integral(x, rnd):
    """cvt.rni.f32.f32 etc.: round to an integral value in the same format."""
    return _ROUND_INT[rnd](x)

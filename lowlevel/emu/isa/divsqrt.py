"""Directed rounding (.rz .rm .rp) of division and square root, on whole arrays: the
round-to-nearest result, moved one ulp where the sign of the exact residual says so."""
from fractions import Fraction

import numpy as np

from .numerics import F32, F64, directed, round_overflow, two_prod


# --- directed rounding of division and square root ------------------------------------------
#
# The candidate q is the round-to-nearest result (for f32 computed in f64 and rounded); the
# sign of the exact value minus q decides whether a directed mode moves q one ulp. For f32
# the residual x - q*y (or x - q*q) is computed in f64, where q*y is exact (24x24 bits) and
# the subtraction keeps its sign. For f64 the product is split exactly with two_prod; where
# that could over/underflow the element is decided with exact rationals instead.

_SAFE_LO, _SAFE_HI = 2.0 ** -900, 2.0 ** 900


def _in_safe(v):
    a = np.abs(v)
    return (a >= _SAFE_LO) & (a <= _SAFE_HI)


def _residual_sign_f64(x, y, q, kind):
    """Sign (as a float) of exact(x/y) - q or exact(sqrt(x)) - q, for float64 arrays."""
    with np.errstate(all="ignore"):
        if kind == "div":
            p, pe = two_prod(q, y)
            r = (x - p) - pe
            r = np.where(y < 0, -r, r)
            ok = _in_safe(q) & _in_safe(y) & _in_safe(x)
        else:
            p, pe = two_prod(q, q)
            r = (x - p) - pe
            ok = _in_safe(q) & _in_safe(x)
        fin = np.isfinite(x) & np.isfinite(q) & (np.isfinite(y) if kind == "div" else True)
        if kind == "div":
            fin = fin & (y != 0)
        hard = fin & ~ok & (x != 0)
    if np.any(hard):
        r = np.array(r, dtype=F64, copy=True)
        xs, ys, qs = np.broadcast_arrays(x, y, q)
        for i in zip(*np.nonzero(hard)):
            xf, qf = Fraction(float(xs[i])), Fraction(float(qs[i]))
            if kind == "div":
                diff = xf / Fraction(float(ys[i])) - qf
            else:
                diff = xf - qf * qf           # same sign as sqrt(x) - q for q >= 0
            r[i] = 0.0 if diff == 0 else (1.0 if diff > 0 else -1.0)
    return r


def div_directed(x, y, mode):
    """x / y rounded in mode rz/rm/rp (float32 or float64 operands)."""
    x, y = np.asarray(x), np.asarray(y)
    scalar_in = x.ndim == 0 and y.ndim == 0
    x, y = np.atleast_1d(x), np.atleast_1d(y)
    with np.errstate(all="ignore"):
        if x.dtype == F32:
            x64, y64 = x.astype(F64), y.astype(F64)
            q = (x64 / y64).astype(F32)
            r = x64 - q.astype(F64) * y64
            e = np.where(y64 < 0, -r, r)
        else:
            q = x / y
            e = _residual_sign_f64(x, np.broadcast_to(y, q.shape), q, "div")
        # only the sign of the residual matters: as q's dtype it could underflow to zero
        e = np.sign(np.where(np.isnan(e), 0.0, e)).astype(q.dtype)
        out = np.asarray(directed(q, e, mode))
        out = round_overflow(out, np.isfinite(x) & np.isfinite(y) & (y != 0), mode)
    out = np.asarray(out)
    return out.reshape(-1)[0] if scalar_in else out


def sqrt_directed(x, mode):
    x = np.asarray(x)
    scalar_in = x.ndim == 0
    x = np.atleast_1d(x)
    with np.errstate(all="ignore"):
        if x.dtype == F32:
            x64 = x.astype(F64)
            q = np.sqrt(x64).astype(F32)
            e = x64 - q.astype(F64) * q.astype(F64)
        else:
            q = np.sqrt(x)
            e = _residual_sign_f64(x, None, q, "sqrt")
        e = np.where(np.isnan(e) | np.isinf(q) | (q == 0), 0.0, e)
        out = np.asarray(directed(q, np.sign(e).astype(q.dtype), mode))
    return out.reshape(-1)[0] if scalar_in else out

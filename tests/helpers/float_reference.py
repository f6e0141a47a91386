"""An independent reference for IEEE 754 binary arithmetic in every rounding mode, for the
tests of tests/emu: exact values are Python Fractions (integers for square roots), rounded
once to the format by the textbook rules. No numpy arithmetic, nothing from lowlevel.

Formats are f16, bf16, f32, f64; values travel as raw bit patterns (Python ints). Modes:
rn (nearest, ties to even), rz (toward zero), rm (toward -inf), rp (toward +inf).
Overflow of a finite exact value gives infinity where the mode rounds away from zero
(rn; rp for positives; rm for negatives) and the largest finite value otherwise; an
infinite operand gives an infinite result in every mode (IEEE 754 section 6.1).
"""
from __future__ import annotations

import math
from fractions import Fraction

# precision (bits, hidden one included), exponent bits
FORMATS = {"f16": (11, 5), "bf16": (8, 8), "f32": (24, 8), "f64": (53, 11)}
NAN = "nan"


class Fmt:
    def __init__(self, name):
        self.name = name
        self.p, self.ebits = FORMATS[name]
        self.bits = self.p + self.ebits
        self.emax = (1 << (self.ebits - 1)) - 1
        self.emin = 1 - self.emax
        self.max = (2 - Fraction(1, 1 << (self.p - 1))) * Fraction(2) ** self.emax

    # -- bits <-> values: a Fraction, ("inf", sign), ("zero", sign) or NAN
    def decode(self, bits):
        sign = bits >> (self.bits - 1)
        exp = (bits >> (self.p - 1)) & ((1 << self.ebits) - 1)
        frac = bits & ((1 << (self.p - 1)) - 1)
        if exp == (1 << self.ebits) - 1:
            return NAN if frac else ("inf", sign)
        if exp == 0 and frac == 0:
            return ("zero", sign)
        if exp == 0:
            mag = Fraction(frac) * Fraction(2) ** (self.emin - (self.p - 1))
        else:
            mag = Fraction(frac + (1 << (self.p - 1))) * Fraction(2) ** (exp - self.emax - (self.p - 1))
        return -mag if sign else mag

    def inf(self, sign):
        return (sign << (self.bits - 1)) | (((1 << self.ebits) - 1) << (self.p - 1))

    def zero(self, sign):
        return sign << (self.bits - 1)

    def encode_mag(self, sign, mag):
        """Bits of sign * mag, mag an exactly representable positive Fraction."""
        e = _floor_log2(mag)
        if e < self.emin:                                   # subnormal
            frac = mag / Fraction(2) ** (self.emin - (self.p - 1))
            assert frac.denominator == 1
            return (sign << (self.bits - 1)) | int(frac)
        m = mag / Fraction(2) ** (e - (self.p - 1))
        assert m.denominator == 1
        return (sign << (self.bits - 1)) | ((e + self.emax) << (self.p - 1)) | (int(m) - (1 << (self.p - 1)))

    def round(self, q, mode, sticky=False):
        """Bits of the exact nonzero value q (plus a positive infinitesimal in magnitude
        when `sticky`: the exact value lies strictly between |q| and the next multiple of
        its last bit, which must be finer than the format's) rounded in `mode`."""
        sign = 1 if q < 0 else 0
        mag = -q if sign else q
        up = {"rz": False, "rm": bool(sign), "rp": not sign}.get(mode)   # away from zero?
        e = max(_floor_log2(mag), self.emin)
        ulp = Fraction(2) ** (e - (self.p - 1))
        m = mag / ulp
        lo = math.floor(m)
        rest = m - lo
        if mode == "rn":
            if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and (sticky or lo % 2)):
                lo += 1
        elif up and (rest or sticky):
            lo += 1
        r = lo * ulp
        if r > self.max:
            return self.inf(sign) if mode == "rn" or up else self.encode_mag(sign, self.max)
        if r == 0:
            return self.zero(sign)
        return self.encode_mag(sign, r)


def _floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    return e


def _sign(v):
    if isinstance(v, tuple):
        return v[1]
    return 1 if v < 0 else 0


def _exact_zero_sum(f, mode, signs):
    """The zero an exact sum of zero gives: both addends -0 (or rm with any -0 addend, or
    rm with nonzero addends cancelling) is -0, else +0 (IEEE 754 section 6.3)."""
    if signs is not None and signs[0] == signs[1]:
        return f.zero(signs[0])
    return f.zero(1 if mode == "rm" else 0)


def _value(v):
    return Fraction(0) if isinstance(v, tuple) else v


def add(f, mode, a, b):
    if NAN in (a, b):
        return NAN
    ia, ib = isinstance(a, tuple) and a[0] == "inf", isinstance(b, tuple) and b[0] == "inf"
    if ia and ib:
        return f.inf(a[1]) if a[1] == b[1] else NAN
    if ia or ib:
        return f.inf((a if ia else b)[1])
    s = _value(a) + _value(b)
    if s == 0:
        both_zero = isinstance(a, tuple) and isinstance(b, tuple)
        return _exact_zero_sum(f, mode, (a[1], b[1]) if both_zero else None)
    return f.round(s, mode)


def neg(v):
    if v == NAN:
        return v
    if isinstance(v, tuple):
        return (v[0], 1 - v[1])
    return -v


def mul_value(a, b):
    """The exact product as a value (a zero or infinity keeps its sign)."""
    if NAN in (a, b):
        return NAN
    sign = _sign(a) ^ _sign(b)
    kinds = {x[0] for x in (a, b) if isinstance(x, tuple)}
    if kinds == {"inf", "zero"}:
        return NAN
    if "inf" in kinds:
        return ("inf", sign)
    if "zero" in kinds:
        return ("zero", sign)
    return a * b


def mul(f, mode, a, b):
    p = mul_value(a, b)
    if p == NAN:
        return NAN
    if isinstance(p, tuple):
        return f.inf(p[1]) if p[0] == "inf" else f.zero(p[1])
    return f.round(p, mode)


def fma(f, mode, a, b, c):
    p = mul_value(a, b)
    if NAN in (p, c):
        return NAN
    return add(f, mode, p, c)


def div(f, mode, a, b):
    if NAN in (a, b):
        return NAN
    sign = _sign(a) ^ _sign(b)
    ka = a[0] if isinstance(a, tuple) else "num"
    kb = b[0] if isinstance(b, tuple) else "num"
    if ka == kb and ka in ("inf", "zero"):
        return NAN
    if ka == "inf" or kb == "zero":
        return f.inf(sign)
    if ka == "zero" or kb == "inf":
        return f.zero(sign)
    return f.round(a / b, mode)


def sqrt(f, mode, a):
    if a == NAN:
        return NAN
    if isinstance(a, tuple):
        if a[0] == "zero":
            return f.zero(a[1])
        return NAN if a[1] else f.inf(0)
    if a < 0:
        return NAN
    # sqrt(n / d) = sqrt(n * d * 4^k) / (d * 2^k): an integer square root with p + 8 bits
    n, d = a.numerator, a.denominator
    k = max(0, f.p + 8 - (n * d).bit_length() // 2)
    big = n * d << (2 * k)
    s = math.isqrt(big)
    return f.round(Fraction(s, d << k), mode, sticky=s * s != big)


def convert(f, mode, a):
    """A value of another format (or an integer) rounded to f."""
    if a == NAN:
        return NAN
    if isinstance(a, tuple):
        return f.inf(a[1]) if a[0] == "inf" else f.zero(a[1])
    if a == 0:
        return f.zero(0)
    return f.round(Fraction(a), mode)

"""fma.rn.f32's single rounding on the emulated GPU, against exact rationals rounded to
float32 by hand (ties to even, subnormals, overflow): ties and double-rounding traps,
cancellation, subnormal results, signed zeros, infinities and NaN, and the sgemm-like
accumulations the engine runs most.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from lowlevel.emu.isa.numerics import fma_f32

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # inf * 0 and the like


def round_to_f32(q: Fraction) -> float:
    """A rational rounded to the nearest float32 (ties to even), as a Python float."""
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    m = abs(q)
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1                                   # now 2^e <= m < 2^(e+1)
    quantum = Fraction(2) ** (max(e, -126) - 23)
    n, rem = divmod(m / quantum, 1)
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** 128:
        return sign * math.inf
    return sign * float(value)


def reference(a, b, c):
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan
        p = math.copysign(math.inf, a) * math.copysign(1.0, b)
        return math.nan if math.isinf(c) and c != p else p
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        negative_zero = (a == 0 or b == 0) and c == 0 and \
            math.copysign(1, a) * math.copysign(1, b) < 0 and math.copysign(1, c) < 0
        return -0.0 if negative_zero else 0.0
    return round_to_f32(exact)


def check(a, b, c):
    a, b, c = (np.asarray(x, np.float32) for x in (a, b, c))
    got = fma_f32(a, b, c)
    want = np.array([reference(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)],
                    np.float32)
    same = (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, [(a[i], b[i], c[i], got[i], want[i]) for i in bad[:5]]


def test_ties_and_double_rounding_traps(rng):
    """p + c a hair (2^-46 of half an ulp) beside a float32 midpoint: float64 rounds it
    onto the midpoint, and rounding that to float32 again would go the wrong way. Also
    exact ties (12-bit mantissas make exact products)."""
    n = 2000
    e = rng.integers(-30, 30, n)
    c = np.ldexp(rng.integers(1 << 23, 1 << 24, n).astype(np.float64), e - 23)
    k = rng.integers(-10, 10, n)
    a = np.ldexp(1 + 2.0 ** -23, k)
    b = np.ldexp(1 - 2.0 ** -23, e - 24 - k)          # a*b = half an ulp of c, less 2^-46 of it
    sign_c, sign_p = rng.choice([-1.0, 1.0], n), rng.choice([-1.0, 1.0], n)
    check(a, b * sign_p, c * sign_c)
    naive = (a.astype(np.float32).astype(np.float64) * (b * sign_p).astype(np.float32)
             + (c * sign_c).astype(np.float32)).astype(np.float32)
    assert (naive != fma_f32(*(np.asarray(x, np.float32) for x in (a, b * sign_p, c * sign_c)))).any()
    a12 = np.ldexp(rng.integers(1 << 11, 1 << 12, n).astype(np.float64), rng.integers(-20, 20, n))
    b12 = np.ldexp(rng.integers(1 << 11, 1 << 12, n).astype(np.float64), rng.integers(-20, 20, n))
    check(a12, b12, c * sign_c)


def test_accumulations_and_cancellation(rng):
    n = 4096
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32) * 16
    check(a, b, c)
    check(a, b, -(a.astype(np.float64) * b).astype(np.float32))   # what remains is the low part


def test_subnormal_overflow_zeros_and_specials():
    s = float(np.finfo(np.float32).smallest_subnormal)
    big = float(np.finfo(np.float32).max)
    cases = [(2.0 ** -70, 2.0 ** -70, 0.0), (2.0 ** -75, 2.0 ** -74, s), (s, 0.5, 0.0),
             (s, 1.5, 0.0), (s, 2.5, -s), (3 * 2.0 ** -75, 2.0 ** -75, s),
             (big, 2.0, -big), (big, 1.0, big), (2.0 ** 64, 2.0 ** 64, -big),
             (0.0, -5.0, -0.0), (-0.0, 5.0, 0.0), (0.0, 5.0, -0.0), (-0.0, 5.0, -0.0),
             (3.0, 1 / 3, -1.0), (math.inf, 0.0, 1.0), (math.inf, 2.0, -math.inf),
             (2.0, 3.0, math.inf), (math.nan, 1.0, 1.0), (1.0, 1.0, math.nan)]
    a, b, c = (np.array(x) for x in zip(*cases))
    check(a, b, c)

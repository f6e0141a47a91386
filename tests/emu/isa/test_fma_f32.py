"""fma.rn.f32's single rounding on the emulated GPU, against exact rationals rounded to
float32 by hand (ties to even, subnormals, overflow): ties and double-rounding traps,
cancellation, subnormal results, signed zeros, infinities and NaN, and the sgemm-like
accumulations the engine runs most.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.isa.fma32 import fma_f32_group, fma_f32_wide
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


# --- the decoder's widened operands (fma32.fma_f32_wide, BlockGen.widened) ----------------

def random_floats(rng, n):
    """float32 of every kind from random bit patterns: normals of all exponents,
    subnormals, zeros, infinities, NaN."""
    return rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def check_wide(a, b, c):
    a, b, c = (np.asarray(x, np.float32) for x in (a, b, c))
    got = fma_f32_wide(a.astype(np.float64), b.astype(np.float64), c, fma_f32)
    want = np.array([reference(float(x), float(y), float(z)) for x, y, z in
                     np.broadcast(a, b, c)], np.float32).reshape(np.broadcast(a, b, c).shape)
    same = (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, [(a.flat[i % a.size], b.flat[i % b.size], c.flat[i % c.size]) for i in bad[:5]]


def test_widened_operands_round_once(rng):
    """Random bit patterns, near-cancellations (c = -a*b, one ulp off either way), the
    double-rounding traps above, and results in the subnormal range."""
    n = 3000
    a, b, c = random_floats(rng, n), random_floats(rng, n), random_floats(rng, n)
    check_wide(a, b, c)
    g = rng.standard_normal((3, n)).astype(np.float32)
    near = (-(g[0].astype(np.float64) * g[1]) * rng.choice([1, 1 + 2.0 ** -23, 1 - 2.0 ** -24], n))
    check_wide(g[0], g[1], near.astype(np.float32))
    tiny = np.ldexp(g, rng.integers(-75, -60, (3, n))).astype(np.float32)
    check_wide(tiny[0], tiny[1], np.ldexp(g[2], -130).astype(np.float32))
    e = rng.integers(-30, 30, n)
    c = np.ldexp(rng.integers(1 << 23, 1 << 24, n).astype(np.float64), e - 23)
    k = rng.integers(-10, 10, n)
    check_wide(np.ldexp(1 + 2.0 ** -23, k), np.ldexp(1 - 2.0 ** -23, e - 24 - k), c)


def test_widened_operands_with_uniform_registers(rng):
    """A uniform register is a numpy scalar: the general path takes those."""
    a, b = random_floats(rng, 500), rng.standard_normal(500).astype(np.float32)
    check_wide(np.float32(1.5), b, a)
    check_wide(a, b, np.float32(0.0))
    check_wide(np.float32(3.0), np.float32(1 / 3), np.float32(-1.0))


def test_a_group_of_fmas_rounds_each_member_once(rng):
    """fma_f32_group (a queued run, as rows of one array): every member against the exact
    reference, with the risky elements (midpoints, subnormal results) spread over the rows
    so that the fallback must find each one's row and column; and with uniform (scalar)
    operands, which the members take one by one."""
    k, n = 5, 700
    a, b, c = (random_floats(rng, (k, n)) for _ in range(3))
    tiny = np.ldexp(rng.standard_normal((2, n)), rng.integers(-75, -60, (2, n))).astype(np.float32)
    a[3], b[3] = tiny                                # row 3: subnormal results
    c[1] = (-(a[1].astype(np.float64) * b[1]) * (1 + 2.0 ** -23)).astype(np.float32)
    for args in ((list(a), list(b), list(c)),
                 ([np.float32(1.5)] + list(a[1:]), list(b), list(c)),
                 (list(a), list(b), list(c[:4]) + [np.float32(2.0)])):
        got = fma_f32_group([np.float64(x) if np.ndim(x) == 0 else x.astype(np.float64) for x in args[0]],
                            [x.astype(np.float64) for x in args[1]], args[2], fma_f32)
        assert len(got) == k
        for row, (x, y, z) in enumerate(zip(*args)):
            want = np.array([reference(float(p), float(q), float(r)) for p, q, r in np.broadcast(x, y, z)],
                            np.float32)
            same = (got[row].view(np.int32) == want.view(np.int32)) | (np.isnan(got[row]) & np.isnan(want))
            assert same.all(), (row, np.flatnonzero(~same)[:5])


FMA_RUN = HEADER + """
.visible .entry k(.param .u64 in, .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<12>;
    .reg .b64 %rd<6>;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd1, %r1, 16;
    ld.param.u64 %rd2, [in];
    add.u64 %rd2, %rd2, %rd1;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd2];
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 1;
    fma.rn.f32 %f5, %f1, %f2, %f3;        // f5 = a b + c
    fma.rn.f32 %f6, %f1, %f3, %f4;        // f6 = a c + d: f1 reused
    fma.rn.f32 %f1, %f5, %f2, %f1;        // f1 = f5 b + a: f1 overwritten ...
    fma.rn.f32 %f7, %f1, %f2, %f6;        // ... and read again: the new value
    @%p1 fma.rn.f32 %f2, %f7, %f3, %f2;   // odd threads only
    fma.rn.f32 %f8, %f2, %f3, %f4;        // f2 old or new by the guard
    mov.f32 %f3, 0f40400000;              // a plain move between fmas ...
    fma.rn.f32 %f9, %f2, %f3, %f8;        // ... f3 = 3
    fma.rn.f32 %f10, %f9, 0f3EAAAAAB, %f4;   // an immediate (1/3)
    mul.wide.u32 %rd3, %r1, 24;
    ld.param.u64 %rd4, [out];
    add.u64 %rd4, %rd4, %rd3;
    st.global.v2.f32 [%rd4], {%f5, %f6};
    st.global.v2.f32 [%rd4+8], {%f1, %f7};
    st.global.v2.f32 [%rd4+16], {%f9, %f10};
    ret;
}
"""


def test_a_run_of_fmas_sees_every_write(mem, rng):
    """Widened operands are reused within a run of fmas and forgotten when the register
    is written (also under a guard) or another instruction comes."""
    n = 64
    x = (rng.standard_normal((n, 4)) * 4).astype(np.float32)
    inp, out = Buf(mem, x), Buf(mem, n=(n, 6), dtype=np.float32)
    launch(load_ptx(FMA_RUN), "k", 1, n, inp, out, mem=mem)
    f = lambda a, b, c: np.float32(reference(float(a), float(b), float(c)))   # noqa: E731
    want = []
    for t, (a, b, c, d) in enumerate(x):
        f5 = f(a, b, c)
        f6 = f(a, c, d)
        f1 = f(f5, b, a)
        f7 = f(f1, b, f6)
        f2 = f(f7, c, b) if t % 2 else b
        f8 = f(f2, c, d)
        f9 = f(f2, np.float32(3.0), f8)
        want.append([f5, f6, f1, f7, f9, f(f9, np.float32(0.33333334), d)])
    np.testing.assert_array_equal(out.read(), np.array(want, np.float32))


def test_double_rounding_onto_a_subnormal_midpoint(rng):
    """a*b = 2^-150 (1 - 2^-46) added to c = k 2^-149 (k odd, subnormal): the exact sum lies
    just below the midpoint (2k + 1) 2^-150, float64 rounds it onto the midpoint, and
    float32's ties-to-even would then round up: the subnormal range needs its own look."""
    n = 400
    k = rng.integers(1 << 20, 1 << 22, n) * 2 + 1
    sign = rng.choice([-1.0, 1.0], n)
    c = (sign * np.ldexp(k.astype(np.float64), -149)).astype(np.float32)
    a = np.full(n, np.ldexp(1 + 2.0 ** -23, -75), np.float32)
    b = (sign * np.ldexp(1 - 2.0 ** -23, -75)).astype(np.float32)
    check(a, b, c)
    check_wide(a, b, c)
    got = fma_f32_group([a.astype(np.float64)] * 2, [b.astype(np.float64)] * 2, [c, c[::-1].copy()], fma_f32)
    for row, cc in zip(got, (c, c[::-1])):
        want = np.array([reference(float(x), float(y), float(z)) for x, y, z in zip(a, b, cc)], np.float32)
        np.testing.assert_array_equal(row.view(np.int32), want.view(np.int32))
    naive = (a.astype(np.float64) * b + c).astype(np.float32)
    assert (naive != fma_f32(a, b, c)).all()      # the trap is real for every element


@pytest.mark.parametrize("uniform", ["c", "ab", "c 0-d"])
def test_uniform_operands_round_once(rng, uniform):
    """A uniform c (a polynomial's constant) or uniform a and b beside lane arrays, on the
    hard cases: random bit patterns (subnormals, infinities, NaN), near-cancellations and
    double-rounding traps, through both entries (the decoder's widened one and the
    general one)."""
    n = 600
    lanes = random_floats(rng, (3, n))
    g = rng.standard_normal(n).astype(np.float32)
    k = np.float32(rng.standard_normal())
    hard = [lanes, (g, np.full(n, k), -(g.astype(np.float64) * k).astype(np.float32)
                    * np.float32(1 + 2.0 ** -23))]
    e = rng.integers(-30, 30, n)
    c_trap = np.ldexp(rng.integers(1 << 23, 1 << 24, n).astype(np.float64), e - 23)
    hard.append((np.full(n, np.ldexp(1 + 2.0 ** -23, 3)), np.ldexp(1 - 2.0 ** -23, e - 27), c_trap))
    for a, b, c in hard:
        for j in range(0, n, 150):                     # a few different uniform values
            if uniform == "ab":
                x, y, z = np.float32(a[j]), np.float32(b[j]), np.asarray(c, np.float32)
            else:
                x, y = np.asarray(a, np.float32), np.asarray(b, np.float32)
                z = np.float32(c[j]) if uniform == "c" else np.asarray(np.float32(c[j]))
            check_wide(x, y, z)
            got = fma_f32(x, y, z)
            want = fma_f32_wide(np.float64(x) if np.ndim(x) == 0 else x.astype(np.float64),
                                np.float64(y) if np.ndim(y) == 0 else y.astype(np.float64), z, fma_f32)
            assert np.array_equal(got.view(np.int32), want.view(np.int32))

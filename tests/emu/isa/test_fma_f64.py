"""fma.f64's single rounding on the emulated GPU, against exact rationals: products whose
low bits make ties and near-ties, cancellation, results that are subnormal or overflow,
signed zeros, infinities and NaN; and a PTX kernel doing it through the engine.

The reference is Fraction arithmetic rounded by Python's float() (correctly rounded, ties
to even, subnormals included), independent of the emulator's own rounding helpers.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.isa.numerics import fma_f64

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _bracket(exact: Fraction):
    """The floats just below and above (or at) a finite nonzero rational."""
    try:
        f = float(exact)
    except OverflowError:
        f = (math.inf if exact > 0 else -math.inf)
    if math.isinf(f):
        big = math.copysign(np.finfo(np.float64).max, f)
        return (big, f) if f > 0 else (f, big)
    lo = f if Fraction(f) <= exact else math.nextafter(f, -math.inf)
    hi = f if Fraction(f) >= exact else math.nextafter(f, math.inf)
    return lo, hi


def reference(a, b, c, mode="rn"):
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
        if (a == 0 or b == 0) and c == 0:          # signed zeros: -0 only if both are
            product_negative = math.copysign(1, a) * math.copysign(1, b) < 0
            if product_negative and math.copysign(1, c) < 0:
                return -0.0
        return -0.0 if mode == "rm" else 0.0       # otherwise as x + (-x)
    if mode == "rn":
        try:
            return float(exact)
        except OverflowError:
            return (math.inf if exact > 0 else -math.inf)
    lo, hi = _bracket(exact)
    if mode == "rm":
        return lo
    if mode == "rp":
        return hi
    return lo if exact > 0 else hi


def check(a, b, c, mode="rn"):
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    got = fma_f64(a, b, c, mode)
    want = np.array([reference(float(x), float(y), float(z), mode) for x, y, z in zip(a, b, c)])
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, [(a[i], b[i], c[i], got[i], want[i]) for i in bad[:5]]


def test_ties_and_near_ties(rng):
    """27-bit mantissas: products of up to 54 bits, so rounding the sum often meets an
    exact tie or lands one unit of the product's low bits beside one."""
    n = 4000
    ma = rng.integers(1 << 26, 1 << 27, n).astype(np.float64)
    mb = rng.integers(1 << 26, 1 << 27, n).astype(np.float64)
    ea = rng.integers(-40, 40, n)
    a = np.ldexp(ma, ea) * rng.choice([-1, 1], n)
    b = np.ldexp(mb, -ea)
    shift = rng.integers(-60, 8, n)                  # c overlapping the product's bits
    c = np.ldexp(rng.integers(-(1 << 53), 1 << 53, n).astype(np.float64), 53 + shift - 53)
    check(a, b, c)
    check(a, b, -np.trunc(a * b))                    # heavy cancellation


def test_random_magnitudes_all_modes(rng):
    n = 3000
    a = rng.standard_normal(n) * np.exp2(rng.integers(-300, 300, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-300, 300, n))
    c = -a * b * (1 + rng.standard_normal(n) * np.exp2(-rng.integers(1, 60, n)))
    for mode in ("rn", "rz", "rm", "rp"):
        check(a, b, c, mode)


def test_subnormal_overflow_zeros_and_specials():
    tiny, big, inf, nan = 2.0 ** -1074, 2.0 ** 1000, math.inf, math.nan
    cases = [
        (2.0 ** -540, 2.0 ** -540, 0.0), (2.0 ** -540, 3.0 * 2 ** -540, tiny),
        (2.0 ** -1000, 2.0 ** -60, -2.0 ** -1061), (tiny, 0.5, 0.0), (tiny, -0.5, tiny),
        (big, big, -1e308), (big, 2.0 ** 24, -(2.0 ** 1023) * (2 - 2 ** -52)),
        (1e308, 10.0, -9.999999999999999e308), (big, big, 0.0),
        (0.0, -5.0, -0.0), (-0.0, 5.0, 0.0), (0.0, 5.0, -0.0), (-0.0, 5.0, -0.0),
        (3.0, 1.0 / 3.0, -1.0), (1.0 + 2 ** -52, 1.0 - 2 ** -53, -1.0),
        (inf, 0.0, 1.0), (inf, 2.0, -inf), (inf, -2.0, -inf), (2.0, 3.0, inf),
        (nan, 1.0, 1.0), (1.0, 1.0, nan), (-inf, -inf, 5.0),
    ]
    a, b, c = (np.array(x) for x in zip(*cases))
    for mode in ("rn", "rz", "rm", "rp"):
        check(a, b, c, mode)


def test_fma_rn_f64_kernel(mem, rng):
    mod = load_ptx(HEADER + r"""
.visible .entry k(.param .u64 pa, .param .u64 pout)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;
    .reg .f64 %fd<5>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 24;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f64 %fd1, [%rd4];
    ld.global.f64 %fd2, [%rd4+8];
    ld.global.f64 %fd3, [%rd4+16];
    fma.rn.f64 %fd4, %fd1, %fd2, %fd3;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd5, %rd2, %rd3;
    st.global.f64 [%rd5], %fd4;
    ret;
}""")
    n = 128
    abc = rng.standard_normal((n, 3))
    abc[:, 2] = -abc[:, 0] * abc[:, 1]                 # the cancellation a fused op keeps
    out = Buf(mem, n=n, dtype=np.float64)
    launch(mod, "k", 1, n, Buf(mem, abc), out, mem=mem)
    want = np.array([reference(*map(float, r)) for r in abc])
    np.testing.assert_array_equal(out.read(), want)
    assert np.count_nonzero(want) > n // 2             # the low parts, not zeros


def test_round_to_nearest_needs_no_rationals_in_range(rng, monkeypatch):
    """The rational fallback is for the range guard and specials only: with ordinary
    operands (ties and near-ties included) fma.rn.f64 stays vectorized."""
    from lowlevel.emu.isa import numerics
    calls = []
    monkeypatch.setattr(numerics, "fma_exact", lambda *args: calls.append(args) or 0.0)
    n = 2000
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    c = np.ldexp(np.trunc(np.ldexp(-a * b, 60)), -60)       # near-cancelling, on a grid
    fma_f64(a, b, c)
    assert not calls

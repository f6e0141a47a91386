"""Generate ptx/pow_f64.ptx: x ** y in float64, with the special cases of C99's pow (which
numpy.power and PyTorch follow).

|x|^y = e^(y ln|x|), but in plain float64 the product y ln|x| (up to 745 in size) would
carry an absolute error of about 745 * 2^-53, which e^ turns into a relative error of
hundreds of ulp. So ln|x| is computed in double-double (a pair hi + lo, some 64+ bits):

    x = 2^e m (tools/gen_math_f64_ptx.py's split_exponent), s = (m - 1) / (m + 1) as hi + lo
    (the residual of the division by one fma), ln m = 2 atanh s = 2s + (2/3) s^3 + (2/5) s^5 +
    ...: 2s exact, (2/3) s^3 in double-double (products split by fma), the rest a Horner
    polynomial in s^2; e ln 2 as e LN2_HI (exact) + e LN2_LO; the pieces summed with
    error-free two-sums;
    t = y ln|x| as hi + lo (the product's error by one fma);
    e^t = 2^n e^r with r = t - n ln 2 carried as hi + lo, e^(r_hi + r_lo) = e^r_hi (1 + r_lo),
    and the scaling of gen_math_f64_ptx.py's exp (overflow to inf, underflow to subnormals).

Then the sign (negative for a negative base, -0.0 and -inf included, and an odd integer
exponent) and C's special cases, by predicates: x^+-0 = 1 and 1^y = 1 even for NaN;
(-1)^+-inf = 1; a NaN operand otherwise gives NaN; a negative finite base with a finite
non-integer exponent gives NaN; for x = +-0, x = +-inf or y = +-inf the magnitude is 0 or inf
(inf where |x| > 1 and y > 0 agree), 1 for |x| = 1. tests/backends/test_math_f64.py checks
them against numpy and the random cases within the bound written in the file's header.

    python tools/gen_pow_f64_ptx.py          # rewrites ptx/pow_f64.ptx
"""
import pathlib
import sys
from fractions import Fraction

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from gen_math_f64_ptx import (INF, LN2_HI, LN2_LO, LOG2E, NAN, NLN2_HI, ONE, TWO, ZERO, Regs, d,  # noqa: E402
                              expm1_poly, scale, split_exponent)
from ptx_template import VERSION, addresses, grid_stride  # noqa: E402

PATH = pathlib.Path(__file__).resolve().parents[1] / "ptx" / "pow_f64.ptx"
MAX_ULP = 1              # measured over 3 * 10^4 random cases (results near overflow and in the
                         # subnormals included); tests/backends/test_math_f64.py allows one more
TWO_THIRDS = d(2 / 3)
TWO_THIRDS_LO = d(float(Fraction(2, 3) - Fraction(2 / 3)))
# 2/(2k+1) for k = 2..13: ln m - 2s - (2/3) s^3 = s^5 (2/5 + 2/7 s^2 + ...); the first term left
# out is below 2^-66 of ln m for |s| <= 0.1716
ATANH = [d(2 / (2 * k + 1)) for k in range(2, 14)]


def two_prod(rg: Regs, a: str, b: str, what: str):
    """(lines, hi, lo) with hi + lo = a * b exactly."""
    hi, lo = rg.new(), rg.new()
    return [(f"mul.rn.f64      {hi}, {a}, {b};", f"{hi[1:]} = {what}, rounded"),
            (f"neg.f64         {lo}, {hi};", f"{lo[1:]} = -that"),
            (f"fma.rn.f64      {lo}, {a}, {b}, {lo};", f"{lo[1:]} = its rounding error, exactly (one rounding)")], hi, lo


def two_sum(rg: Regs, a: str, b: str):
    """(lines, s, e) with s + e = a + b exactly (Knuth's two-sum: any magnitudes)."""
    s, bb, t, e = rg.new(), rg.new(), rg.new(), rg.new()
    return [(f"add.rn.f64      {s}, {a}, {b};", f"{s[1:]} = a + b, rounded"),
            (f"sub.rn.f64      {bb}, {s}, {a};", f"{bb[1:]} = the part of b that s holds"),
            (f"sub.rn.f64      {t}, {s}, {bb};", f"{t[1:]} = the part of a that s holds"),
            (f"sub.rn.f64      {t}, {a}, {t};", f"{t[1:]} = what s lost of a"),
            (f"sub.rn.f64      {e}, {b}, {bb};", f"{e[1:]} = what s lost of b"),
            (f"add.rn.f64      {e}, {t}, {e};", f"{e[1:]} = e = a + b - s (exact)")], s, e


def log_dd(rg: Regs, ax: str):
    """(lines, hi, lo): ln ax in double-double, for a finite ax > 0."""
    out, m, dk = split_exponent(rg, ax)
    f, den, s, r, slo, z = rg.new(), rg.new(), rg.new(), rg.new(), rg.new(), rg.new()
    out += [(f"sub.rn.f64      {f}, {m}, {ONE};", f"{f[1:]} = f = m - 1 (exact)"),
            (f"add.rn.f64      {den}, {f}, {TWO};", f"{den[1:]} = 2 + f, rounded"),
            (f"div.rn.f64      {s}, {f}, {den};", f"{s[1:]} = s = f / (2 + f), |s| <= 0.1716"),
            (f"add.rn.f64      {r}, {s}, {s};", f"{r[1:]} = 2s (exact)"),
            (f"sub.rn.f64      {r}, {f}, {r};", f"{r[1:]} = f - 2s (exact: 2s is within a factor 1.2 of f)"),
            (f"neg.f64         {slo}, {s};", f"{slo[1:]} = -s"),
            (f"fma.rn.f64      {r}, {slo}, {f}, {r};", f"{r[1:]} = f - 2s - s f = f - s (2 + f): the residual"),
            (f"div.rn.f64      {slo}, {r}, {den};", f"{slo[1:]} = s_lo: s = s_hi + s_lo to ~106 bits"),
            (f"mul.rn.f64      {z}, {s}, {s};", f"{z[1:]} = z = s^2 (for the small terms)")]
    lz, z_hi, z_lo = two_prod(rg, s, s, "s^2")
    l3, c_hi, c_lo = two_prod(rg, s, z_hi, "s^3")
    lt, t1, t1lo = two_prod(rg, TWO_THIRDS, c_hi, "(2/3) s^3")
    out += lz + l3 + [(f"fma.rn.f64      {c_lo}, {s}, {z_lo}, {c_lo};", f"{c_lo[1:]} = the low part of s^3")] + lt
    out += [(f"fma.rn.f64      {t1lo}, {TWO_THIRDS}, {c_lo}, {t1lo};", f"{t1lo[1:]} += (2/3) * low s^3"),
            (f"fma.rn.f64      {t1lo}, {TWO_THIRDS_LO}, {c_hi}, {t1lo};", f"{t1lo[1:]} += (2/3's low part) * s^3")]
    q, rest, corr, small, a = rg.new(), rg.new(), rg.new(), rg.new(), rg.new()
    out.append((f"mov.f64         {q}, {ATANH[-1]};", f"{q[1:]} = 2/27"))
    for k in range(len(ATANH) - 2, -1, -1):
        out.append((f"fma.rn.f64      {q}, {q}, {z}, {ATANH[k]};", f"{q[1:]} = {q[1:]} z + 2/{2 * k + 5}"))
    out += [(f"mul.rn.f64      {rest}, {c_hi}, {z};", f"{rest[1:]} = s^5"),
            (f"mul.rn.f64      {rest}, {rest}, {q};", f"{rest[1:]} = s^5 (2/5 + 2/7 s^2 + ...)"),
            (f"fma.rn.f64      {corr}, {z}, {z}, {z};", f"{corr[1:]} = z + z^2"),
            (f"add.rn.f64      {corr}, {corr}, {corr};", f"{corr[1:]} = 2z (1 + z) ~ d(ln m - 2s)/ds"),
            (f"mul.rn.f64      {corr}, {corr}, {slo};", f"{corr[1:]} = what s_lo adds to the small terms"),
            (f"mul.rn.f64      {a}, {dk}, {LN2_HI};", f"{a[1:]} = e LN2_HI (exact)"),
            (f"add.rn.f64      {small}, {s}, {s};", f"{small[1:]} = 2 s_hi (exact)")]
    l1, h1, e1 = two_sum(rg, a, small)
    l2, h2, e2 = two_sum(rg, h1, t1)
    lo = rg.new()
    out += l1 + l2 + [
        (f"add.rn.f64      {lo}, {e1}, {e2};", f"{lo[1:]} = the two sums' errors"),
        (f"fma.rn.f64      {lo}, {dk}, {LN2_LO}, {lo};", f"{lo[1:]} += e LN2_LO"),
        (f"fma.rn.f64      {lo}, {slo}, {TWO}, {lo};", f"{lo[1:]} += 2 s_lo"),
        (f"add.rn.f64      {lo}, {lo}, {t1lo};", f"{lo[1:]} += the low part of (2/3) s^3"),
        (f"add.rn.f64      {lo}, {lo}, {corr};", f"{lo[1:]} += the s_lo correction"),
        (f"add.rn.f64      {lo}, {lo}, {rest};", f"{lo[1:]} += s^5 (...): the low part, before renormalising")]
    hi, lo2 = rg.new(), rg.new()
    out += [(f"add.rn.f64      {hi}, {h2}, {lo};", f"{hi[1:]} = ln|x|, hi part (renormalised)"),
            (f"sub.rn.f64      {lo2}, {hi}, {h2};", f"{lo2[1:]} = what hi took of lo"),
            (f"sub.rn.f64      {lo2}, {lo}, {lo2};", f"{lo2[1:]} = ln|x|, lo part (fast two-sum: |h2| >= |lo|)")]
    return out, hi, lo2


def exp_dd(rg: Regs, th: str, tl: str):
    """(lines, e^(th + tl)) with the scaling of exp_f64."""
    tc, tl2, n, ni, r1, p, perr, r, rl = (rg.new(), rg.new(), rg.new(), rg.new("s32"), rg.new(), rg.new(), rg.new(),
                                          rg.new(), rg.new())
    out = [(f"max.f64         {tc}, {th}, {d(-750.0)};", f"{tc[1:]} = max(t, -750): e^-750 rounds to 0"),
           (f"min.f64         {tc}, {tc}, {d(710.0)};", f"{tc[1:]} = min(that, 710): e^710 overflows"),
           (f"setp.eq.f64     %p2, {tc}, {th};", "p2 = t was in range (the low part counts)"),
           (f"selp.f64        {tl2}, {tl}, {ZERO}, %p2;", f"{tl2[1:]} = t's low part, or 0 (it may be NaN: inf - inf)"),
           (f"mul.rn.f64      {n}, {tc}, {LOG2E};", f"{n[1:]} = t log2(e)"),
           (f"cvt.rni.f64.f64 {n}, {n};", f"{n[1:]} = n, the nearest integer"),
           (f"cvt.rni.s32.f64 {ni}, {n};", f"{ni[1:]} = n as an integer"),
           (f"fma.rn.f64      {r1}, {n}, {NLN2_HI}, {tc};", f"{r1[1:]} = t - n LN2_HI (exact)"),
           (f"mul.rn.f64      {p}, {n}, {LN2_LO};", f"{p[1:]} = n LN2_LO, rounded"),
           (f"neg.f64         {perr}, {p};", f"{perr[1:]} = -that"),
           (f"fma.rn.f64      {perr}, {n}, {LN2_LO}, {perr};", f"{perr[1:]} = its rounding error"),
           (f"sub.rn.f64      {r}, {r1}, {p};", f"{r[1:]} = r = t - n ln 2, hi part"),
           (f"sub.rn.f64      {rl}, {r1}, {r};", f"{rl[1:]} = r1 - r"),
           (f"sub.rn.f64      {rl}, {rl}, {p};", f"{rl[1:]} = what r lost of r1 - p"),
           (f"sub.rn.f64      {rl}, {rl}, {perr};", f"{rl[1:]} -= the error of n LN2_LO"),
           (f"add.rn.f64      {rl}, {rl}, {tl2};", f"{rl[1:]} = r's lo part, t's low part in it")]
    lp, em = expm1_poly(rg, r)
    q, pp = rg.new(), rg.new()
    out += lp + [(f"fma.rn.f64      {q}, {rl}, {em}, {rl};", f"{q[1:]} = r_lo (1 + (e^r - 1)) = e^r r_lo"),
                 (f"add.rn.f64      {q}, {em}, {q};", f"{q[1:]} = e^(r + r_lo) - 1 to first order in r_lo"),
                 (f"add.rn.f64      {pp}, {q}, {ONE};", f"{pp[1:]} = e^(r + r_lo)")]
    ls, y = scale(rg, pp, ni)
    return out + ls, y


def pow_body(rg: Regs, x: str, y: str):
    ax = rg.new()
    out = [(f"abs.f64         {ax}, {x};", f"{ax[1:]} = |x|")]
    ll_, lh, lo = log_dd(rg, ax)
    th, tl = rg.new(), rg.new()
    out += ll_ + [(f"mul.rn.f64      {th}, {y}, {lh};", f"{th[1:]} = t = y ln|x|, hi part"),
                  (f"neg.f64         {tl}, {th};", f"{tl[1:]} = -that"),
                  (f"fma.rn.f64      {tl}, {y}, {lh}, {tl};", f"{tl[1:]} = the product's rounding error"),
                  (f"fma.rn.f64      {tl}, {y}, {lo}, {tl};", f"{tl[1:]} = t's lo part, with y * ln's lo part")]
    le, res = exp_dd(rg, th, tl)
    out += le
    mag, ay, yt, yh, neg, bits = rg.new(), rg.new(), rg.new(), rg.new(), rg.new(), rg.new("s64")
    out += [  # the magnitude where x = +-0, x = +-inf or y = +-inf: 0, inf, or 1 for |x| = 1
        (f"setp.gt.f64     %p3, {ax}, {ONE};", "p3 = |x| > 1"),
        (f"setp.gt.f64     %p4, {y}, {ZERO};", "p4 = y > 0"),
        ("xor.pred        %p3, %p3, %p4;", "p3 = they disagree: the magnitude is 0"),
        (f"selp.f64        {mag}, {ZERO}, {INF}, %p3;", f"{mag[1:]} = 0 or inf"),
        (f"setp.eq.f64     %p3, {ax}, {ONE};", "p3 = |x| == 1"),
        (f"selp.f64        {mag}, {ONE}, {mag}, %p3;", f"{mag[1:]} = 1 there ((-1)^+-inf = 1)"),
        (f"abs.f64         {ay}, {y};", f"{ay[1:]} = |y|"),
        (f"setp.eq.f64     %p3, {ay}, {INF};", "p3 = y is +-inf"),
        (f"setp.eq.or.f64  %p3, {ax}, {INF}, %p3;", "or x is +-inf"),
        (f"setp.eq.or.f64  %p3, {x}, {ZERO}, %p3;", "or x is +-0"),
        (f"selp.f64        {res}, {mag}, {res}, %p3;", f"{res[1:]} = that magnitude there"),
        # the sign: negative for a sign bit on x and an odd integer y
        (f"cvt.rzi.f64.f64 {yt}, {y};", f"{yt[1:]} = trunc(y)"),
        (f"setp.eq.f64     %p4, {yt}, {y};", "p4 = y is an integer (or +-inf; false for NaN)"),
        (f"mul.rn.f64      {yh}, {y}, {d(0.5)};", f"{yh[1:]} = y / 2 (exact)"),
        (f"cvt.rzi.f64.f64 {yt}, {yh};", f"{yt[1:]} = trunc(y / 2)"),
        (f"setp.neu.f64    %p5, {yt}, {yh};", "p5 = y / 2 is not an integer"),
        ("and.pred        %p5, %p5, %p4;", "p5 = y is an odd integer"),
        (f"mov.b64         {bits}, {x};", f"{bits[1:]} = x's bits"),
        (f"setp.lt.s64     %p6, {bits}, 0;", "p6 = x's sign bit (-0.0 and -inf too)"),
        ("and.pred        %p6, %p6, %p5;", "p6 = the result is negative"),
        (f"neg.f64         {neg}, {res};", f"{neg[1:]} = -result"),
        (f"selp.f64        {res}, {neg}, {res}, %p6;", f"{res[1:]} = with its sign"),
        # no real result: a negative finite base, a non-integer exponent
        (f"setp.lt.f64     %p5, {x}, {ZERO};", "p5 = x < 0 (not -0.0)"),
        (f"setp.ne.and.f64 %p5, {ax}, {INF}, %p5;", "and x finite (pow(-inf, 0.5) = inf)"),
        ("not.pred        %p6, %p4;", "p6 = y is not an integer (NaN too)"),
        ("and.pred        %p5, %p5, %p6;", "p5 = a negative finite base, a non-integer exponent"),
        (f"setp.nan.or.f64 %p5, {x}, {y}, %p5;", "or either operand is NaN"),
        (f"selp.f64        {res}, {NAN}, {res}, %p5;", "then NaN"),
        # C's exact cases, last: x^+-0 = 1 and 1^y = 1, even for NaN
        (f"setp.eq.f64     %p5, {y}, {ZERO};", "p5 = y == +-0"),
        (f"setp.eq.or.f64  %p5, {x}, {ONE}, %p5;", "or x == 1"),
        (f"selp.f64        {res}, {ONE}, {res}, %p5;", f"{res[1:]} = 1 there")]
    return out, res


HEADER = f"""\
// pow_f64.ptx -- out[i] = x[i] ** y[i] in float64, with the special cases of C99's pow
// (which numpy.power and PyTorch follow).
// GENERATED by tools/gen_pow_f64_ptx.py: edit that, not this (its docstring explains
// the double-double logarithm and exponential).
//
//   C: extern "C" __global__ void pow_f64(double* out, const double* x, const double* y,
//                                        unsigned long long n)
//   Contiguous operands of n elements (a number exponent is broadcast first).
//   Launch: 1-D, any block up to 1024, any grid (grid-stride loop).
//
// Numerics: e^(y ln|x|) with ln|x| and the product carried in double-double, so
//   that the error does not grow with |y ln|x||: within {MAX_ULP} ulp of the correctly
//   rounded result over random bases and exponents, results near overflow and in
//   the subnormals included (measured; tests/backends/test_math_f64.py); the
//   special cases (zeros, infinities, NaN, negative bases, x^0, 1^y) exact.

{VERSION}"""


def generate() -> str:
    rg = Regs(inputs=2)
    lines, res = pow_body(rg, "%fd0", "%fd1")
    body = [*addresses(8, [("%rd20", "%rd11", "x[i]"), ("%rd21", "%rd12", "y[i]"), ("%rd22", "%rd10", "out[i]")]),
            ("ld.global.f64   %fd0, [%rd20];", "fd0 = x = the base"),
            ("ld.global.f64   %fd1, [%rd21];", "fd1 = y = the exponent"),
            *lines,
            (f"st.global.f64   [%rd22], {res};", "out[i] = x ** y")]
    params = [("out", "double* out"), ("x", "const double* x (base)"), ("y", "const double* y (exponent)")]
    regs = {t: n for t, n in rg.count.items() if n}
    return HEADER + grid_stride("pow_f64", "out[i] = x[i] ** y[i]", params, body, regs)


if __name__ == "__main__":
    PATH.write_text(generate())
    sys.stdout.write(f"wrote {PATH}\n")

"""Generate ptx/math_f64.ptx: the float64 math kernels (exp log log1p expm1 rsqrt tanh
sigmoid) of the CUDA backend.

PTX has no float64 transcendental instructions: ex2.approx and lg2.approx are float32
only. So each function is built here from IEEE float64 arithmetic (add, mul, fma, div,
all correctly rounded) and integer work on the bit pattern, as a C math library does:

    exp    range reduction x = n ln 2 + r, |r| <= ln2/2 (Cody and Waite: ln 2 in two parts,
           the first with trailing zeros so that n * LN2_HI is exact), a Taylor polynomial
           for e^r - 1, and the scaling by 2^n built in the exponent field, in two steps
           (2^n1 * 2^n2) so that overflow gives inf and underflow rounds into the subnormals
    log    x = 2^e m with m in [sqrt(2)/2, sqrt(2)) from the bit pattern (subnormals scaled by
           2^54 first), then fdlibm's e_log.c: f = m - 1, s = f / (2 + f),
           log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)) with its minimax polynomial R
    log1p  u = 1 + x rounded, c = x - (u - 1) = what the rounding lost (exact), and
           log1p(x) = log(u) + c / u
    expm1  the reduction of exp, then 2^n (e^r - 1) + (2^n - 1) with one fma: no
           cancellation for any n; x itself where x == 0 (keeps -0.0)
    tanh   e / (e + 2) with e = expm1(2x) (exact near 0); +-1 beyond |x| = 22
    sigmoid  with t = e^-|x|: 1 / (1 + t) for x >= 0, t / (1 + t) below (no overflow of
           e^-x, and the tiny results for x < -709 are kept)
    rsqrt  sqrt.rn.f64 then rcp.rn.f64

The measured errors against numpy (tests/backends/test_math_f64.py, which also checks the
special values) are written in the generated file's header. Every line a kernel emits is
an (instruction, comment) pair; tests/backends/test_generated_ptx.py checks the committed
file is what this script writes.

    python tools/gen_math_f64_ptx.py          # rewrites ptx/math_f64.ptx
"""
import math
import pathlib
import struct
import sys
from fractions import Fraction

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, addresses, grid_stride  # noqa: E402

PATH = pathlib.Path(__file__).resolve().parents[1] / "ptx" / "math_f64.ptx"


def d(x: float) -> str:
    """The PTX literal of a float64 (its bits, so no decimal rounding is involved)."""
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


ONE, TWO, HALF, ZERO, INF, NINF, NAN = d(1.0), d(2.0), d(0.5), d(0.0), d(math.inf), d(-math.inf), "0d7FF8000000000000"
LOG2E = d(1 / math.log(2))
# ln 2 = LN2_HI + LN2_LO, LN2_HI with 32 trailing zero bits (fdlibm's ln2_hi / ln2_lo)
LN2_HI, LN2_LO = "0d3FE62E42FEE00000", "0d3DEA39EF35793C76"
NLN2_HI, NLN2_LO = "0dBFE62E42FEE00000", "0dBDEA39EF35793C76"
SQRT2 = d(math.sqrt(2))
# fdlibm e_log.c's Lg1..Lg7: R(z) = z (Lg1 + z (Lg2 + ... + z Lg7)) ~ log(1+f) - f + f^2/2 - s (f^2/2)
LG = ["0d3FE5555555555593", "0d3FD999999997FA04", "0d3FD2492494229359", "0d3FCC71C51D8E78AF",
      "0d3FC7466496CB03DE", "0d3FC39A09D078C69F", "0d3FC2F112DF3E5244"]
# 1/k! for k = 2..13: e^r - 1 = r + r^2 (1/2! + r/3! + ... + r^11/13!); the first term left
# out, r^14/14!, is below 0.05 ulp of e^r - 1 for |r| <= ln2/2
TAYLOR = [d(float(Fraction(1, math.factorial(k)))) for k in range(2, 14)]


class Regs:
    """Hands out fresh float64 (%fd), int32 (%ri) and int64 (%rl) registers."""

    def __init__(self, inputs: int = 1):
        self.count = {"f64": inputs, "s32": 0, "s64": 0}    # %fd0 is x[i] (and %fd1 y[i])

    def new(self, kind: str = "f64") -> str:
        k = self.count[kind]
        self.count[kind] += 1
        return {"f64": "%fd", "s32": "%ri", "s64": "%rl"}[kind] + str(k)


def reduce_exp(rg: Regs, x: str):
    """(lines, n as a float64, n as an int32, r) with x = n ln 2 + r, |r| <= ln2/2 (plus a
    rounding): n = rint(x / ln 2); the first fma is exact (n * LN2_HI has trailing zeros)."""
    n, r, ni = rg.new(), rg.new(), rg.new("s32")
    return [(f"mul.rn.f64      {n}, {x}, {LOG2E};", f"{n[1:]} = x * log2(e)"),
            (f"cvt.rni.f64.f64 {n}, {n};", f"{n[1:]} = n = that rounded to the nearest integer"),
            (f"cvt.rni.s32.f64 {ni}, {n};", f"{ni[1:]} = n as an integer (|n| < 1100: fits)"),
            (f"fma.rn.f64      {r}, {n}, {NLN2_HI}, {x};", f"{r[1:]} = x - n * LN2_HI (exact)"),
            (f"fma.rn.f64      {r}, {n}, {NLN2_LO}, {r};", f"{r[1:]} = r = x - n ln 2, |r| <= ln2/2")], n, ni, r


def expm1_poly(rg: Regs, r: str):
    """(lines, e^r - 1) by Horner's rule with fma, for |r| <= ln2/2 (about 0.5 ulp)."""
    q, r2, em = rg.new(), rg.new(), rg.new()
    out = [(f"mov.f64         {q}, {TAYLOR[-1]};", f"{q[1:]} = 1/13!")]
    for k in range(len(TAYLOR) - 2, -1, -1):
        out.append((f"fma.rn.f64      {q}, {q}, {r}, {TAYLOR[k]};", f"{q[1:]} = {q[1:]} * r + 1/{k + 2}!"))
    out += [(f"mul.rn.f64      {r2}, {r}, {r};", f"{r2[1:]} = r^2"),
            (f"fma.rn.f64      {em}, {r2}, {q}, {r};", f"{em[1:]} = r + r^2 (1/2! + r/3! + ...) = e^r - 1")]
    return out, em


def pow2(rg: Regs, k: str, what: str):
    """(lines, 2^k as a float64) for an int32 k in [-1022, 1023]: k + 1023 in the exponent field."""
    w, f = rg.new("s64"), rg.new()
    return [(f"cvt.s64.s32     {w}, {k};", f"{w[1:]} = {what} (64-bit)"),
            (f"add.s64         {w}, {w}, 1023;", f"{w[1:]} = the biased exponent"),
            (f"shl.b64         {w}, {w}, 52;", f"{w[1:]} = its bits in the exponent field"),
            (f"mov.b64         {f}, {w};", f"{f[1:]} = 2^{what}")], f


def scale(rg: Regs, p: str, ni: str):
    """(lines, p * 2^n) in two steps, 2^n1 * 2^n2 with n1 = n >> 1, so that each factor is a
    normal number for n in [-1082, 1024]: the first product is exact, the second rounds
    once, to inf on overflow and into the subnormals on underflow."""
    n1, n2 = rg.new("s32"), rg.new("s32")
    out = [(f"shr.s32         {n1}, {ni}, 1;", f"{n1[1:]} = n1 = n >> 1 (arithmetic)"),
           (f"sub.s32         {n2}, {ni}, {n1};", f"{n2[1:]} = n2 = n - n1")]
    l1, f1 = pow2(rg, n1, "n1")
    l2, f2 = pow2(rg, n2, "n2")
    y = rg.new()
    return out + l1 + l2 + [(f"mul.rn.f64      {y}, {p}, {f1};", f"{y[1:]} = p * 2^n1 (exact)"),
                            (f"mul.rn.f64      {y}, {y}, {f2};", f"{y[1:]} = p * 2^n, rounded once")], y


def keep_nan(rg: Regs, x: str, y: str):
    """y, or x itself where x is NaN (the clamps of x would have dropped the NaN)."""
    return [(f"setp.nan.f64    %p2, {x}, {x};", "p2 = x is NaN"),
            (f"selp.f64        {y}, {x}, {y}, %p2;", "then the result is x (NaN)")]


def exp(rg: Regs, x: str):
    """(lines, e^x)."""
    xc = rg.new()
    out = [(f"max.f64         {xc}, {x}, {d(-750.0)};", f"{xc[1:]} = max(x, -750): e^-750 rounds to 0"),
           (f"min.f64         {xc}, {xc}, {d(710.0)};", f"{xc[1:]} = min(that, 710): e^710 overflows (NaN: later)")]
    lr, _, ni, r = reduce_exp(rg, xc)
    lp, em = expm1_poly(rg, r)
    p = rg.new()
    ls, y = scale(rg, p, ni)
    return out + lr + lp + [(f"add.rn.f64      {p}, {em}, {ONE};", f"{p[1:]} = e^r")] + ls + keep_nan(rg, x, y), y


def expm1(rg: Regs, x: str):
    """(lines, e^x - 1)."""
    xc = rg.new()
    out = [(f"max.f64         {xc}, {x}, {d(-40.0)};", f"{xc[1:]} = max(x, -40): e^-40 - 1 rounds to -1"),
           (f"min.f64         {xc}, {xc}, {d(710.0)};", f"{xc[1:]} = min(that, 710): overflows to inf")]
    lr, _, ni, r = reduce_exp(rg, xc)
    lp, em = expm1_poly(rg, r)
    l2, f2 = pow2(rg, ni, "n")
    small, p, big = rg.new(), rg.new(), rg.new()
    ls, y = scale(rg, p, ni)
    return (out + lr + lp + l2
            + [(f"sub.rn.f64      {small}, {f2}, {ONE};", f"{small[1:]} = 2^n - 1 (exact for n <= 53)"),
               (f"fma.rn.f64      {small}, {em}, {f2}, {small};", f"{small[1:]} = 2^n (e^r - 1) + (2^n - 1), one rounding"),
               (f"add.rn.f64      {p}, {em}, {ONE};", f"{p[1:]} = e^r, for n > 53 where the -1 is lost")]
            + ls
            + [(f"setp.gt.s32     %p3, {ni}, 53;", "p3 = (n > 53): e^x - 1 rounds as e^x"),
               (f"selp.f64        {big}, {y}, {small}, %p3;", f"{big[1:]} = e^x there, else the fma"),
               (f"setp.eq.f64     %p4, {x}, {ZERO};", "p4 = (x == +-0)"),
               (f"selp.f64        {big}, {x}, {big}, %p4;", "then x itself: expm1(-0) = -0")]
            + keep_nan(rg, x, big)), big


def split_exponent(rg: Regs, x: str):
    """(lines, m, e as a float64) with x = 2^e m, m in [sqrt(2)/2, sqrt(2)], for a finite x > 0
    (subnormals included), from the bit pattern; uses %p3 and %p4."""
    xs, bits, e, m, t, dk, ei = rg.new(), rg.new("s64"), rg.new("s64"), rg.new(), rg.new(), rg.new(), rg.new("s64")
    return [(f"setp.lt.f64     %p3, {x}, {d(2.0 ** -1022)};", "p3 = x is below the normals (subnormal, 0, < 0)"),
            (f"mul.rn.f64      {xs}, {x}, {d(2.0 ** 54)};", f"{xs[1:]} = x * 2^54: a subnormal made normal (exact)"),
            (f"selp.f64        {xs}, {xs}, {x}, %p3;", f"{xs[1:]} = the scaled x where p3, else x"),
            (f"mov.b64         {bits}, {xs};", f"{bits[1:]} = its bits"),
            (f"shr.s64         {e}, {bits}, 52;", f"{e[1:]} = the biased exponent (sign 0 for x > 0)"),
            (f"sub.s64         {e}, {e}, 1023;", f"{e[1:]} = e: x = 2^e * m with m in [1, 2)"),
            (f"selp.s64        {ei}, 54, 0, %p3;", f"{ei[1:]} = 54 where x was scaled"),
            (f"sub.s64         {e}, {e}, {ei};", f"{e[1:]} = the exponent of x itself"),
            (f"and.b64         {bits}, {bits}, 0x000FFFFFFFFFFFFF;", f"{bits[1:]} = the fraction bits"),
            (f"or.b64          {bits}, {bits}, 0x3FF0000000000000;", f"{bits[1:]} = with exponent 0: m in [1, 2)"),
            (f"mov.b64         {m}, {bits};", f"{m[1:]} = m"),
            (f"setp.gt.f64     %p4, {m}, {SQRT2};", "p4 = (m > sqrt(2))"),
            (f"mul.rn.f64      {t}, {m}, {HALF};", f"{t[1:]} = m / 2 (exact)"),
            (f"selp.f64        {m}, {t}, {m}, %p4;", f"{m[1:]} = m in [sqrt(2)/2, sqrt(2)]"),
            (f"selp.s64        {ei}, 1, 0, %p4;", f"{ei[1:]} = 1 where m was halved"),
            (f"add.s64         {e}, {e}, {ei};", f"{e[1:]} = e, x = 2^e m"),
            (f"cvt.rn.f64.s64  {dk}, {e};", f"{dk[1:]} = e as a float64 (exact)")], m, dk


def log(rg: Regs, x: str):
    """(lines, ln x), fdlibm's e_log.c on the bit pattern."""
    out, m, dk = split_exponent(rg, x)
    f, s, z, poly, hfsq, t, y = rg.new(), rg.new(), rg.new(), rg.new(), rg.new(), rg.new(), rg.new()
    out += [(f"sub.rn.f64      {f}, {m}, {ONE};", f"{f[1:]} = f = m - 1 (exact: Sterbenz)"),
            (f"add.rn.f64      {t}, {f}, {TWO};", f"{t[1:]} = 2 + f"),
            (f"div.rn.f64      {s}, {f}, {t};", f"{s[1:]} = s = f / (2 + f): log(1+f) = 2 atanh(s)"),
            (f"mul.rn.f64      {z}, {s}, {s};", f"{z[1:]} = z = s^2"),
            (f"mov.f64         {poly}, {LG[6]};", f"{poly[1:]} = Lg7")]
    for k in range(5, -1, -1):
        out.append((f"fma.rn.f64      {poly}, {poly}, {z}, {LG[k]};", f"{poly[1:]} = {poly[1:]} * z + Lg{k + 1}"))
    out += [(f"mul.rn.f64      {poly}, {poly}, {z};", f"{poly[1:]} = R = z (Lg1 + z (Lg2 + ...))"),
            (f"mul.rn.f64      {hfsq}, {f}, {f};", f"{hfsq[1:]} = f^2"),
            (f"mul.rn.f64      {hfsq}, {hfsq}, {HALF};", f"{hfsq[1:]} = hfsq = f^2 / 2"),
            (f"add.rn.f64      {t}, {hfsq}, {poly};", f"{t[1:]} = hfsq + R"),
            (f"mul.rn.f64      {t}, {t}, {s};", f"{t[1:]} = s (hfsq + R)"),
            (f"fma.rn.f64      {t}, {dk}, {LN2_LO}, {t};", f"{t[1:]} = s (hfsq + R) + e LN2_LO"),
            (f"sub.rn.f64      {t}, {hfsq}, {t};", f"{t[1:]} = hfsq - that"),
            (f"sub.rn.f64      {t}, {t}, {f};", f"{t[1:]} = that - f"),
            (f"mul.rn.f64      {y}, {dk}, {LN2_HI};", f"{y[1:]} = e LN2_HI (exact: LN2_HI has trailing zeros)"),
            (f"sub.rn.f64      {y}, {y}, {t};", f"{y[1:]} = e ln 2 + log(1 + f) = ln x for finite x > 0"),
            # the special values, last so that they win
            (f"setp.lt.f64     %p5, {x}, {ZERO};", "p5 = x < 0"),
            (f"selp.f64        {y}, {NAN}, {y}, %p5;", "then NaN"),
            (f"setp.eq.f64     %p5, {x}, {ZERO};", "p5 = x == +-0"),
            (f"selp.f64        {y}, {NINF}, {y}, %p5;", "then -inf"),
            (f"setp.eq.f64     %p5, {x}, {INF};", "p5 = x == +inf"),
            (f"selp.f64        {y}, {INF}, {y}, %p5;", "then +inf"),
            *keep_nan(rg, x, y)]
    return out, y


def log1p(rg: Regs, x: str):
    """(lines, ln(1 + x)) = log(u) + c / u with u = 1 + x rounded and c what the rounding lost."""
    u, c, q = rg.new(), rg.new(), rg.new()
    head = [(f"add.rn.f64      {u}, {x}, {ONE};", f"{u[1:]} = u = 1 + x, rounded"),
            (f"sub.rn.f64      {c}, {u}, {ONE};", f"{c[1:]} = u - 1 (exact while it matters)"),
            (f"sub.rn.f64      {c}, {x}, {c};", f"{c[1:]} = c = x - (u - 1) = 1 + x - u (exact)")]
    ll, y = log(rg, u)
    out = head + ll + [(f"div.rn.f64      {q}, {c}, {u};", f"{q[1:]} = c / u: log(u + c) - log(u) to first order"),
                       (f"setp.ne.f64     %p6, {c}, {ZERO};", "p6 = (c != 0); false at x = -1 (u = 0, c/u NaN)"),
                       (f"setp.ne.and.f64 %p6, {u}, {INF}, %p6;", "and u finite (x = inf: c is NaN)"),
                       (f"@%p6 add.rn.f64 {y}, {y}, {q};", f"{y[1:]} = log(u) + c / u"),
                       (f"setp.eq.f64     %p6, {u}, {ONE};", "p6 = (u == 1): |x| is below half an ulp of 1"),
                       (f"selp.f64        {y}, {x}, {y}, %p6;", "then log1p(x) = x (keeps -0.0)")]
    return out, y


def tanh(rg: Regs, x: str):
    """(lines, tanh x) = e / (e + 2), e = expm1(2x)."""
    x2 = rg.new()
    le, e = expm1(rg, x2)
    t, y, a, one = rg.new(), rg.new(), rg.new(), rg.new()
    return ([(f"add.rn.f64      {x2}, {x}, {x};", f"{x2[1:]} = 2x (exact)")] + le
            + [(f"add.rn.f64      {t}, {e}, {TWO};", f"{t[1:]} = e + 2"),
               (f"div.rn.f64      {y}, {e}, {t};", f"{y[1:]} = e / (e + 2) = tanh x"),
               (f"abs.f64         {a}, {x};", f"{a[1:]} = |x|"),
               (f"setp.gt.f64     %p5, {a}, {d(22.0)};", "p5 = (|x| > 22): tanh rounds to +-1 (false for NaN)"),
               (f"copysign.f64    {one}, {x}, {ONE};", f"{one[1:]} = 1 with x's sign"),
               (f"selp.f64        {y}, {one}, {y}, %p5;", f"{y[1:]} = +-1 there, else the quotient")]), y


def sigmoid(rg: Regs, x: str):
    """(lines, 1 / (1 + e^-x)) from t = e^-|x|, which never overflows."""
    a = rg.new()
    le, t = exp(rg, a)
    s, w, y = rg.new(), rg.new(), rg.new()
    return ([(f"abs.f64         {a}, {x};", f"{a[1:]} = |x|"),
             (f"neg.f64         {a}, {a};", f"{a[1:]} = -|x|")] + le
            + [(f"add.rn.f64      {s}, {t}, {ONE};", f"{s[1:]} = 1 + t, t = e^-|x| in [0, 1]"),
               (f"div.rn.f64      {w}, {ONE}, {s};", f"{w[1:]} = 1 / (1 + t): sigmoid(|x|)"),
               (f"div.rn.f64      {y}, {t}, {s};", f"{y[1:]} = t / (1 + t): sigmoid(-|x|)"),
               (f"setp.ge.f64     %p5, {x}, {ZERO};", "p5 = (x >= 0); false for NaN (y is NaN then)"),
               (f"selp.f64        {y}, {w}, {y}, %p5;", f"{y[1:]} = sigmoid(x)")]), y


def rsqrt(rg: Regs, x: str):
    y = rg.new()
    return [(f"sqrt.rn.f64     {y}, {x};", f"{y[1:]} = sqrt(x), correctly rounded (NaN for x < 0)"),
            (f"rcp.rn.f64      {y}, {y};", f"{y[1:]} = 1 / that, correctly rounded: +-inf at +-0")], y


FUNCTIONS = {"exp": (exp, "e^x[i]"), "log": (log, "ln x[i]"), "log1p": (log1p, "ln(1 + x[i])"),
             "expm1": (expm1, "e^x[i] - 1"), "rsqrt": (rsqrt, "1 / sqrt(x[i])"), "tanh": (tanh, "tanh x[i]"),
             "sigmoid": (sigmoid, "1 / (1 + e^-x[i])")}

# The largest error in ulp measured against numpy (float64) by tests/backends/test_math_f64.py
# over its random ranges and special values (the test asserts these bounds).
MAX_ULP = {"exp": 1, "log": 1, "log1p": 1, "expm1": 2, "rsqrt": 1, "tanh": 2, "sigmoid": 2}


def kernel(op: str) -> str:
    fn, summary = FUNCTIONS[op]
    rg = Regs()
    body_lines, y = fn(rg, "%fd0")
    body = [*addresses(8, [("%rd20", "%rd11", "x[i]"), ("%rd22", "%rd10", "out[i]")]),
            ("ld.global.f64   %fd0, [%rd20];", "fd0 = x = x[i]"),
            *body_lines,
            (f"st.global.f64   [%rd22], {y};", f"out[i] = {summary}")]
    params = [("out", "double* out (may alias x)"), ("x", "const double* x")]
    regs = {t: n for t, n in rg.count.items() if n}
    return grid_stride(f"{op}_f64", f"out[i] = {summary} (within {MAX_ULP[op]} ulp)", params, body, regs)


def header() -> str:
    errors = "\n".join(f"//   {op:<8} {MAX_ULP[op]} ulp" for op in FUNCTIONS)
    return f"""\
// math_f64.ptx -- float64 math kernels: {' '.join(FUNCTIONS)}.
// GENERATED by tools/gen_math_f64_ptx.py: edit that, not this (its docstring explains
// each algorithm: range reduction, polynomials, the bit-level scaling).
//
//   C: extern "C" __global__ void exp_f64(double* out, const double* x,
//                                        unsigned long long n)      // and likewise
//   out[i] = F(x[i]) for i < n, contiguous; out may alias x. Launch: 1-D, any block
//   up to 1024, any grid (grid-stride loop), as elementwise_f32.ptx.
//
// Why by hand: PTX has no float64 exp or log (ex2.approx / lg2.approx are float32),
// so these are built from correctly rounded fma / div / sqrt and integer work on
// the exponent field. Special values as C and numpy: exp(-inf) = 0, exp(inf) = inf,
// log(0) = -inf, log(x < 0) = NaN, log1p(-1) = -inf, expm1(-0) = -0, tanh(+-inf) =
// +-1, sigmoid(-inf) = 0, rsqrt(+-0) = +-inf, NaN -> NaN; subnormal inputs and
// results are handled (no flush to zero).
// Largest error measured against numpy's float64 (tests/backends/test_math_f64.py):
{errors}

{VERSION}"""


def generate() -> str:
    return header() + "".join(kernel(op) for op in FUNCTIONS)


if __name__ == "__main__":
    PATH.write_text(generate())
    sys.stdout.write(f"wrote {PATH}\n")

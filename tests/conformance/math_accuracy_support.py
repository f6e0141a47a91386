"""The pieces of the libdevice accuracy sweep (test_conformance_libdevice_accuracy.py): the
CUDA C kernels, the documented bounds, the input samplers and the mpmath references with
their ulp errors.

Bounds: CUDA C++ Programming Guide, appendix "Mathematical Functions", tables "Single-Precision
Mathematical Standard Library Functions with Maximum ULP Error" and "Double-Precision ...",
default flags (-prec-div=true, -prec-sqrt=true, no --use_fast_math). The guide states each
bound as the distance in ulps between the returned value and the correctly rounded result, so
the error measured here against the exact value may be up to bound + 0.5.
"""
import math

import mpmath
import numpy as np

F32, F64 = np.float32, np.float64
PRECISION = {F32: (24, -126, 127), F64: (53, -1022, 1023)}     # p, emin, emax


# ---- the kernels: out = f(x[, y]); sincos writes its cosine to out2 ------------------------
def kernel_source() -> str:
    lines = [r"""
#define K(T, name, expr) extern "C" __global__ void name(const T* x, const T* y, T* out, T* out2, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { T a = x[i], b = y[i]; (void)b; out[i] = expr; } }
extern "C" __global__ void f32_sincos(const float* x, const float* y, float* out, float* out2, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) sincosf(x[i], &out[i], &out2[i]); }
extern "C" __global__ void f64_sincos(const double* x, const double* y, double* out, double* out2, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) sincos(x[i], &out[i], &out2[i]); }
"""]
    for name, spec in FUNCTIONS.items():
        if name == "sincos":
            continue
        e32, e64 = spec[0]
        lines.append(f"K(float, f32_{name}, {e32})\nK(double, f64_{name}, {e64})")
    return "\n".join(lines)


# ---- inputs -------------------------------------------------------------------------------
def uniform(lo, hi):
    return lambda rng, n, dt: rng.uniform(lo, hi, n)


def log_uniform(lo, hi, signed=True):
    """Magnitudes log-uniform in [lo, hi] (hi may exceed the type's range: clipped)."""
    def draw(rng, n, dt):
        # clipped to the type's range: zeros and infinities in would need signed-zero rules
        # mpmath does not model
        top = min(hi, float(np.finfo(dt).max))
        bottom = max(lo, float(np.finfo(dt).smallest_subnormal))
        mag = np.exp(rng.uniform(math.log(bottom), math.log(top), n))
        return mag * (rng.choice([-1.0, 1.0], n) if signed else 1.0)
    return draw


def near(points, spread=4):
    """Values a few ulps from the given points (in the target type)."""
    def draw(rng, n, dt):
        pts = np.asarray(points(rng, n, dt) if callable(points) else points, np.float64)
        return steps(rng.choice(pts, n).astype(dt), rng.integers(-spread, spread + 1, n))
    return draw


def subnormals(signed=True):
    def draw(rng, n, dt):
        tiny = float(np.finfo(dt).tiny)
        mag = np.exp(rng.uniform(math.log(float(np.finfo(dt).smallest_subnormal)), math.log(tiny), n))
        return mag * (rng.choice([-1.0, 1.0], n) if signed else 1.0)
    return draw


def powers_of_two(lo_exp, hi_exp, signed=True):
    def draw(rng, n, dt):
        p, emin, emax = PRECISION[dt]
        # from 2 steps above the least subnormal: the steps of near() stay on one side of 0
        e = rng.integers(max(lo_exp, emin - p + 3), min(hi_exp, emax) + 1, n)
        v = np.ldexp(1.0, e)
        return v * (rng.choice([-1.0, 1.0], n) if signed else 1.0)
    return near(lambda rng, n, dt: draw(rng, n, dt), 2)


def multiples(step, kmax):
    """Near k * step (k up to kmax, both signs): trigonometric arguments near their zeros."""
    def points(rng, n, dt):
        k = np.round(np.exp(rng.uniform(0, math.log(kmax), n)))
        return float(step) * k * rng.choice([-1.0, 1.0], n)
    return near(points, 3)


def steps(v, k):
    """v moved k representable values (k ints; sign-magnitude order, through zero)."""
    bits = {np.dtype(F32): (np.int32, 0x7FFFFFFF), np.dtype(F64): (np.int64, 0x7FFFFFFFFFFFFFFF)}
    it, mask = bits[v.dtype]
    raw = v.view(it).astype(np.int64)
    ordered = np.where(raw < 0, -(raw & mask), raw) + k        # a line through 0
    ordered = np.clip(ordered, -np.int64(np.finfo(v.dtype).max.view(it)), np.int64(np.finfo(v.dtype).max.view(it)))
    back = np.where(ordered < 0, (-ordered) | ~np.int64(mask), ordered).astype(it)
    return back.view(v.dtype)


def by_type(f32, f64):
    """One sampler for float inputs, another for double (ranges that scale with the type)."""
    return lambda rng, n, dt: (f32 if dt is F32 else f64)(rng, n, dt)


def sample(rng, n, dt, parts):
    """n inputs of type dt drawn from the weighted parts [(weight, sampler), ...]."""
    weights = np.array([w for w, _ in parts], float)
    counts = rng.multinomial(n, weights / weights.sum())
    xs = [np.asarray(s(rng, c, dt), np.float64).astype(dt) for (_, s), c in zip(parts, counts) if c]
    x = np.concatenate(xs) if xs else np.zeros(0, dt)
    return x[rng.permutation(n)]


# ---- references: mpmath at PREC bits, the exact value as a (hi, lo) pair of doubles ---------
PREC = 160


def _ref_pow(x, y):
    if x < 0:
        if y != int(y):
            return mpmath.nan
        r = mpmath.power(-x, y)
        return -r if int(y) % 2 else r
    if x == 0:
        return mpmath.inf if y < 0 else mpmath.mpf(0) if y > 0 else mpmath.mpf(1)
    return mpmath.power(x, y)


def _ref_cbrt(x):
    return mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x)


def _guard(fn, lo=None, hi=None):
    """NaN outside [lo, hi] (the C library's domain errors), fn inside."""
    def ref(x):
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            return mpmath.nan
        return fn(x)
    return ref


def _erfcinv(y):
    """erfc^-1(y): with enough precision that 1 - y is exact however small y is."""
    if y <= 0 or y >= 2:
        return {0: mpmath.inf, 2: -mpmath.inf}.get(y, mpmath.nan)
    if y >= 0.5:                           # 1 - y is exact
        return mpmath.erfinv(1 - y)
    # Small y: Newton on log erfc(t) = log y (concave, so it converges from below), which
    # keeps relative accuracy where erfinv(1 - y) would need ~-log2(y) more bits
    t, target = mpmath.sqrt(-mpmath.log(y)) * 0.9, mpmath.log(y)
    for _ in range(60):
        c = mpmath.erfc(t)
        step = (mpmath.log(c) - target) * c * mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(t * t)
        t += step
        if abs(step) < abs(t) * mpmath.mpf(2) ** (-PREC + 20):
            break
    return t


def _log_gamma(x):
    if x <= 0 and x == int(x):
        return mpmath.inf
    return mpmath.log(abs(mpmath.gamma(x)))


def _gamma(x):
    if x == 0:
        return mpmath.inf
    if x < 0 and x == int(x):
        return mpmath.nan
    return mpmath.gamma(x)


def _atanh(x):
    if abs(x) == 1:                        # the poles: +-inf, as C's atanh
        return x * mpmath.inf
    return mpmath.nan if abs(x) > 1 else mpmath.atanh(x)


def _log(fn):
    return lambda x: mpmath.nan if x < 0 else -mpmath.inf if x == 0 else fn(x)


# name: ((f32 expression, f64 expression), mpmath reference, (ulps f32, ulps f64), inputs,
#        two arguments?)  -- inputs: [(weight, sampler)], the same for both types
TRIG = [(3, uniform(-100, 100)), (3, log_uniform(1e-30, 1e300)), (2, multiples(math.pi / 2, 1e6)),
        (1, multiples(math.pi / 4, 1e3)), (1, subnormals())]
PI_TRIG = [(3, uniform(-100, 100)), (2, log_uniform(1e-30, 1e300)), (2, multiples(0.5, 1e6)),
           (1, multiples(0.25, 1e3)), (1, subnormals())]
POSITIVE_ALL = [(3, log_uniform(1e-300, 1e300, False)), (1, subnormals(False)),
                (2, powers_of_two(-1074, 1023, False)), (2, near([1.0], 40)), (1, uniform(0, 10))]
ALL = [(3, log_uniform(1e-300, 1e300)), (1, subnormals()), (2, powers_of_two(-1074, 1023)),
       (1, near([1.0, -1.0], 8)), (2, uniform(-10, 10))]
UNIT = [(3, uniform(-1, 1)), (2, near([1.0, -1.0], 30)), (2, log_uniform(1e-30, 1)),
        (1, subnormals())]
FUNCTIONS = {
    "sin": (("sinf(a)", "sin(a)"), mpmath.sin, (2, 2), TRIG, False),
    "cos": (("cosf(a)", "cos(a)"), mpmath.cos, (2, 2), TRIG, False),
    "tan": (("tanf(a)", "tan(a)"), mpmath.tan, (4, 2), TRIG, False),
    "sincos": (None, (mpmath.sin, mpmath.cos), (2, 2), TRIG, False),
    "sinpi": (("sinpif(a)", "sinpi(a)"), mpmath.sinpi, (2, 2), PI_TRIG, False),
    "cospi": (("cospif(a)", "cospi(a)"), mpmath.cospi, (2, 2), PI_TRIG, False),
    "exp": (("expf(a)", "exp(a)"), mpmath.exp, (2, 1),
            [(5, by_type(uniform(-105, 90), uniform(-750, 712))), (1, log_uniform(1e-30, 1))], False),
    "exp2": (("exp2f(a)", "exp2(a)"), lambda x: mpmath.power(2, x), (2, 1),
             [(5, by_type(uniform(-152, 129), uniform(-1080, 1025))), (1, log_uniform(1e-30, 1))], False),
    "exp10": (("exp10f(a)", "exp10(a)"), lambda x: mpmath.power(10, x), (2, 1),
              [(5, by_type(uniform(-46, 39), uniform(-325, 309))), (1, log_uniform(1e-30, 1))], False),
    "expm1": (("expm1f(a)", "expm1(a)"), mpmath.expm1, (1, 1),
              [(5, by_type(uniform(-20, 90), uniform(-50, 712))), (3, log_uniform(1e-30, 1)), (1, subnormals())],
              False),
    "log": (("logf(a)", "log(a)"), _log(mpmath.log), (1, 1), POSITIVE_ALL, False),
    "log2": (("log2f(a)", "log2(a)"), _log(lambda x: mpmath.log(x, 2)), (1, 1), POSITIVE_ALL, False),
    "log10": (("log10f(a)", "log10(a)"), _log(mpmath.log10), (2, 1), POSITIVE_ALL, False),
    "log1p": (("log1pf(a)", "log1p(a)"), _guard(mpmath.log1p, -1), (1, 1),
              POSITIVE_ALL[:2] + [(2, log_uniform(1e-30, 1)), (2, near([-1.0], 30)),
                                  (2, uniform(-1, 10))], False),
    "pow": (("powf(a, b)", "pow(a, b)"), _ref_pow, (4, 2), None, True),
    "sqrt": (("sqrtf(a)", "sqrt(a)"), _guard(mpmath.sqrt, 0), (0, 0), POSITIVE_ALL, False),
    "rsqrt": (("rsqrtf(a)", "rsqrt(a)"), _guard(lambda x: 1 / mpmath.sqrt(x), 0), (2, 1), POSITIVE_ALL,
              False),
    "cbrt": (("cbrtf(a)", "cbrt(a)"), _ref_cbrt, (1, 1), ALL, False),
    "rcbrt": (("rcbrtf(a)", "rcbrt(a)"), lambda x: 1 / _ref_cbrt(x), (1, 1), ALL, False),
    "sinh": (("sinhf(a)", "sinh(a)"), mpmath.sinh, (3, 2),
             [(5, by_type(uniform(-90, 90), uniform(-712, 712))), (2, log_uniform(1e-30, 1)), (1, subnormals())],
             False),
    "cosh": (("coshf(a)", "cosh(a)"), mpmath.cosh, (2, 1),
             [(5, by_type(uniform(-90, 90), uniform(-712, 712))), (2, log_uniform(1e-30, 1))], False),
    "tanh": (("tanhf(a)", "tanh(a)"), mpmath.tanh, (2, 1),
             [(3, uniform(-20, 20)), (3, log_uniform(1e-30, 1)), (1, subnormals())], False),
    "asin": (("asinf(a)", "asin(a)"), _guard(mpmath.asin, -1, 1), (2, 2), UNIT, False),
    "acos": (("acosf(a)", "acos(a)"), _guard(mpmath.acos, -1, 1), (2, 2), UNIT, False),
    "atan": (("atanf(a)", "atan(a)"), mpmath.atan, (2, 2), ALL, False),
    "atan2": (("atan2f(a, b)", "atan2(a, b)"), lambda y, x: mpmath.atan2(y, x), (3, 2), None, True),
    "asinh": (("asinhf(a)", "asinh(a)"), mpmath.asinh, (3, 3), ALL, False),
    "acosh": (("acoshf(a)", "acosh(a)"), _guard(mpmath.acosh, 1), (4, 3),
              [(3, log_uniform(1, 1e300, False)), (3, near([1.0], 60)), (1, uniform(1, 3))], False),
    "atanh": (("atanhf(a)", "atanh(a)"), _atanh, (3, 2), UNIT, False),
    "hypot": (("hypotf(a, b)", "hypot(a, b)"), mpmath.hypot, (3, 2), None, True),
    "erf": (("erff(a)", "erf(a)"), mpmath.erf, (2, 2),
            [(3, uniform(-6, 6)), (3, log_uniform(1e-30, 1)), (1, subnormals())], False),
    "erfc": (("erfcf(a)", "erfc(a)"), mpmath.erfc, (4, 5),
             [(5, by_type(uniform(-4, 10.1), uniform(-6, 27.3))), (1, log_uniform(1e-30, 1))], False),
    "erfinv": (("erfinvf(a)", "erfinv(a)"), _guard(mpmath.erfinv, -1, 1), (2, 5), UNIT, False),
    "erfcinv": (("erfcinvf(a)", "erfcinv(a)"), _erfcinv, (4, 6),
                [(2, uniform(0, 2)), (3, log_uniform(1e-300, 1, False)), (1, subnormals(False)),
                 (2, near([1.0, 2.0], 30))], False),
    "lgamma": (("lgammaf(a)", "lgamma(a)"), _log_gamma, (6, 4), None, False),
    "tgamma": (("tgammaf(a)", "tgamma(a)"), _gamma, (5, 10), None, False),
    "normcdf": (("normcdff(a)", "normcdf(a)"), mpmath.ncdf, (5, 5),
                [(5, by_type(uniform(-14.2, 6), uniform(-38.5, 9))), (1, log_uniform(1e-30, 1))], False),
    "normcdfinv": (("normcdfinvf(a)", "normcdfinv(a)"), lambda p: -mpmath.sqrt(2) * _erfcinv(2 * p),
                   (5, 8), [(2, uniform(0, 1)), (3, log_uniform(1e-300, 0.5, False)), (1, subnormals(False)),
                            (2, near([0.5, 1.0], 30))], False),
    "div": (("a / b", "a / b"), lambda x, y: x / y, (0, 0), None, True),
}


def inputs(name, rng, n, dt):
    """(x, y) for `name` in type dt; y is ones for the one-argument functions."""
    parts = FUNCTIONS[name][3]
    if name == "pow":
        x = sample(rng, n, dt, [(3, log_uniform(1e-300, 1e300, False)), (1, near([1.0], 1000)),
                                (1, uniform(-10, 10))])
        y = sample(rng, n, dt, [(3, uniform(-40, 40)), (1, log_uniform(1e-10, 1e4))])
        ints = rng.random(n) < 0.3                 # negative bases need integral exponents
        y = np.where(ints | (x < 0), np.round(y), y).astype(dt)
        return x, y
    if name in ("atan2", "hypot", "div"):
        two = [(3, log_uniform(1e-300, 1e300)), (1, subnormals()), (1, powers_of_two(-1074, 1023)),
               (1, uniform(-10, 10))]
        return sample(rng, n, dt, two), sample(rng, n, dt, two)
    if name in ("lgamma", "tgamma"):
        top = {(F32, "tgamma"): 35.1, (F64, "tgamma"): 171.7}.get((dt, name), 1e300)
        x = sample(rng, n, dt, [(3, uniform(0, min(top, 40))), (2, log_uniform(1e-30, top, False)),
                                (2, near([1.0, 2.0], 30)), (2, uniform(-40, 0))])
        if name == "lgamma":        # the guide bounds lgamma outside an interval of negatives
            lo, hi = (-10.001, -2.264) if dt is F32 else (-23.0001, -2.2637)
            x = np.where((x > lo) & (x < hi), -x, x).astype(dt)
        return x, np.ones(n, dt)
    return sample(rng, n, dt, parts), np.ones(n, dt)


def exact(name, x, y, which=0):
    """The exact values of `name` as (hi, lo) float64 arrays, hi + lo within 2^-106 relative."""
    fn = FUNCTIONS[name][1]
    if name == "sincos":
        fn = fn[which]
    two = FUNCTIONS[name][4]
    hi, lo = np.empty(len(x)), np.zeros(len(x))
    with mpmath.workprec(PREC):
        for i in range(len(x)):
            args = (mpmath.mpf(float(x[i])),) + ((mpmath.mpf(float(y[i])),) if two else ())
            try:
                v = fn(*args)
            except (ValueError, ZeroDivisionError):
                v = mpmath.nan
            if isinstance(v, mpmath.mpc):
                v = mpmath.nan if v.imag else v.real
            h = float(v)
            hi[i] = h
            if math.isfinite(h) and h != 0:
                lo[i] = float(v - h)
            elif h == 0 and v != 0:            # below the doubles: only its sign matters
                hi[i] = math.copysign(0.0, float(mpmath.sign(v)))
    return hi, lo


def ulp_errors(got, hi, lo, dt):
    """|got - exact| in ulps of the exact value in dt (ulps at the exponent of the exact
    value, subnormal spacing below the normals); where the exact value rounds to inf or
    NaN in dt, 0 if got is that same value and inf otherwise; an inf where a finite result
    was due counts as 2^(emax+1), the next value IEEE would have had."""
    p, emin, emax = PRECISION[dt]
    got = got.astype(np.float64)
    with np.errstate(over="ignore"):
        rounded = hi.astype(dt).astype(np.float64)
    _, e = np.frexp(np.abs(hi))
    ulp_exp = np.maximum(e - 1, emin) - (p - 1)
    ulp = np.ldexp(1.0, ulp_exp)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs((got - hi) - lo) / ulp
        top = np.ldexp(1.0, emax + 1 - ulp_exp) - np.abs(hi) / ulp
        inf_for_finite = np.isinf(got) & np.isfinite(rounded) & (np.sign(got) == np.sign(hi))
        err = np.where(inf_for_finite, top, err)
        special = ~np.isfinite(rounded)
        same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
        err = np.where(special, np.where(same, 0.0, np.inf), err)
        err = np.where(~special & np.isnan(got), np.inf, err)
    return err

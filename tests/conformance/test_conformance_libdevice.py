"""Conformance: libdevice's math in every build (conformance_support.BUILDS, and clang
where installed): exp, log, sin, erfc, tgamma and pow in float32 and float64 on random
inputs, against references computed in higher precision (mpmath at 40 digits), within the
maximum ulp errors of the CUDA C++ Programming Guide's tables of mathematical functions.

With --use_fast_math the float32 functions become the intrinsics (__expf, __logf, __sinf,
__powf: ex2.approx and lg2.approx), whose guide bounds are of another form: those builds
check the intrinsic bounds on the ranges the guide states them for.
"""
import math

import mpmath
import numpy as np
from conformance_support import download, poisoned_device, upload

MATH = r"""
#define F32(name, expr) extern "C" __global__ void name(const float* x, const float* y, float* out, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { float a = x[i], b = y[i]; out[i] = expr; } }
#define F64(name, expr) extern "C" __global__ void name(const double* x, const double* y, double* out, int n) { \
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { double a = x[i], b = y[i]; out[i] = expr; } }
F32(f32_exp, expf(a)) F32(f32_log, logf(a)) F32(f32_sin, sinf(a)) F32(f32_erfc, erfcf(a))
F32(f32_tgamma, tgammaf(a)) F32(f32_pow, powf(a, b))
F64(f64_exp, exp(a)) F64(f64_log, log(a)) F64(f64_sin, sin(a)) F64(f64_erfc, erfc(a))
F64(f64_tgamma, tgamma(a)) F64(f64_pow, pow(a, b))
"""

# name: (inputs x (and y) from rng, the mpmath function, ulps f32, ulps f64) -- the guide's
# maximum errors (full range) of the float and double versions
FUNCTIONS = {
    "exp": (lambda r, n: (r.uniform(-80, 80, n), None), mpmath.exp, 2, 1),
    "log": (lambda r, n: (np.exp(r.uniform(-80, 80, n)), None), mpmath.log, 1, 1),
    "sin": (lambda r, n: (r.uniform(-100, 100, n), None), mpmath.sin, 2, 2),
    "erfc": (lambda r, n: (r.uniform(-3, 9, n), None), mpmath.erfc, 4, 5),
    "tgamma": (lambda r, n: (r.uniform(0.01, 30, n), None), mpmath.gamma, 5, 10),
    "pow": (lambda r, n: (r.uniform(0.01, 20, n), r.uniform(-20, 20, n)), mpmath.power, 4, 2),
}
N = 64


def _reference(fn, x, y):
    with mpmath.workdps(40):
        if y is None:
            return np.array([float(fn(mpmath.mpf(float(v)))) for v in x])
        return np.array([float(fn(mpmath.mpf(float(u)), mpmath.mpf(float(v)))) for u, v in zip(x, y)])


def _ulps(got, ref, dtype):
    """|got - ref| in units of the last place of ref in dtype (ref rounded to dtype: the
    guide counts ulps of the correctly rounded result)."""
    rounded = ref.astype(dtype)
    spacing = np.spacing(np.abs(rounded)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / spacing


def test_libdevice_within_documented_ulps(driver, any_build, rng):
    """Every function in both precisions from one module load (decoding it is most of the
    cost); the failures of all are reported together."""
    mod = any_build.load(MATH, "libdevice")
    failures = []
    for name in sorted(FUNCTIONS):
        for precision in ("f32", "f64"):
            try:
                _check_function(mod, any_build, rng, name, precision)
            except AssertionError as exc:
                failures.append(f"{precision} {name}: {exc}")
    assert not failures, "\n".join(failures)


def _check_function(mod, build, rng, name, precision):
    make, fn, ulps32, ulps64 = FUNCTIONS[name]
    dtype = np.float32 if precision == "f32" else np.float64
    x, y = make(rng, N)
    x = x.astype(dtype)
    y = (np.ones(N) if y is None else y).astype(dtype)
    ref = _reference(fn, x, None if name != "pow" else y)
    finite = np.isfinite(ref.astype(dtype)) & (np.abs(ref) > np.finfo(dtype).tiny)
    out = poisoned_device(N, dtype)
    mod.get_function(f"{precision}_{name}").launch(1, N, (upload(x), upload(y), out, N))
    got = download(out, N, dtype)
    if precision == "f32" and getattr(build, "fast_math", False):
        _check_fast_math(name, x, y, got, ref)
        return
    bound = ulps32 if precision == "f32" else ulps64
    err = _ulps(got[finite], ref[finite], dtype)
    assert err.max() <= bound + 0.5, (float(err.max()), x[finite][np.argmax(err)])
    # outside the finite range the result overflows or underflows as the reference does
    assert np.array_equal(np.isinf(got[~finite]), np.isinf(ref[~finite].astype(dtype)))


def _check_fast_math(name, x, y, got, ref):
    """The intrinsics' bounds (CUDA Programming Guide, intrinsic functions)."""
    x64 = x.astype(np.float64)
    if name == "exp":           # __expf: 2 + floor(|1.173 x|) ulp
        ok = _ulps(got, ref, np.float32) <= 2 + np.floor(np.abs(1.173 * x64)) + 0.5
        ok |= ~np.isfinite(ref.astype(np.float32)) | (np.abs(ref) < np.finfo(np.float32).tiny * 2**23)
    elif name == "log":         # __logf: 2^-21.41 absolute in [0.5, 2], else 3 ulp
        inside = (x64 >= 0.5) & (x64 <= 2)
        ok = np.where(inside, np.abs(got - ref) <= 2.0 ** -21.41, _ulps(got, ref, np.float32) <= 3.5)
    elif name == "sin":         # __sinf: 2^-21.41 absolute in [-pi, pi], else larger
        inside = np.abs(x64) <= math.pi
        ok = ~inside | (np.abs(got - ref) <= 2.0 ** -21.41)
    elif name == "pow":         # __powf: from __exp2f and __log2f; relative to |y log2 x|
        t = np.abs(y.astype(np.float64) * np.log2(x64))
        ok = np.abs(got - ref) <= np.abs(ref) * (2.0 ** -21 * (1 + t)) + np.finfo(np.float32).tiny
        ok |= ~np.isfinite(ref.astype(np.float32))
    else:                       # erfcf, tgammaf: no intrinsic, the full-range bound holds
        bound = {"erfc": 4, "tgamma": 5}[name]
        finite = np.isfinite(ref.astype(np.float32)) & (np.abs(ref) > np.finfo(np.float32).tiny)
        ok = ~finite | (_ulps(got, ref, np.float32) <= bound + 0.5)
    assert ok.all(), (name, x[~ok][:4], got[~ok][:4], ref[~ok][:4])

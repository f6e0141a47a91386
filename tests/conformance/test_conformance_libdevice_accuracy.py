"""Conformance: every libdevice function of CUDA C's math library, float and double, on the
emulated GPU against mpmath (160 bits, so the exact value is known to far below an ulp),
within the maximum ulp errors of the CUDA C++ Programming Guide (math_accuracy_support.py
has the table, the samplers and the references).

This is what the emulated approximate instructions are held to: libdevice builds its
functions from rcp.approx.ftz.f64, rsqrt.approx, ex2/lg2/sin/cos.approx and friends and
refines their results, and every function must still come out within its documented bound.

Inputs are fresh per run (the `rng` fixture prints its seed): uniform and log-uniform
magnitudes of both signs over each function's domain, subnormals, values a few ulps from
powers of two, from 0, 1 and -1, and from multiples of pi/2 (of 1/2 for sinpi and cospi).
LOWLEVEL_MATH_SWEEP sets the count per function (CI default 1,000); the full sweep is
LOWLEVEL_MATH_SWEEP=100000 (see the commit that added this file for its figures).
"""
import os

import numpy as np
import pytest
from conformance_support import Build, download, poisoned_device, upload
from math_accuracy_support import F32, F64, FUNCTIONS, kernel_source, exact, inputs, ulp_errors

COUNT = int(os.environ.get("LOWLEVEL_MATH_SWEEP", "1000"))
BLOCK = 256


@pytest.mark.timeout(max(300, COUNT // 10))
@pytest.mark.parametrize("build_name", ["nvrtc", "nvcc-O3"])
@pytest.mark.parametrize("dt", [F32, F64], ids=["float", "double"])
def test_libdevice_functions_within_documented_ulps(driver, build_name, dt, rng):
    """All functions of one precision from one module load (decoding libdevice's code is
    a large part of the cost); the failures of all are reported together, with the worst
    input of each."""
    mod = Build(build_name).load(kernel_source(), "libdevice_accuracy")
    prefix = "f32" if dt is F32 else "f64"
    failures, worst = [], {}
    for name in FUNCTIONS:
        x, y = inputs(name, rng, COUNT, dt)
        got = _run(mod, f"{prefix}_{name}", x, y, dt)
        bound = FUNCTIONS[name][2][0 if dt is F32 else 1]
        for which, label in ((0, name), (1, "sincos(cos)"))[: 2 if name == "sincos" else 1]:
            hi, lo = exact(name, x, y, which)
            err = ulp_errors(got[which], hi, lo, dt)
            i = int(np.argmax(err))
            worst[label] = float(err[i])
            if err[i] > bound + 0.5:
                failures.append(f"{prefix} {label}: {err[i]:.3g} ulp > {bound} (+0.5 to the exact value) "
                                f"at x={x[i]!r}" + (f", y={y[i]!r}" if FUNCTIONS[name][4] else "")
                                + f": got {got[which][i]!r}, exact {hi[i]!r}; "
                                f"{int((err > bound + 0.5).sum())} of {COUNT} inputs over")
    print(f"\n[{build_name}] {prefix}, {COUNT} inputs each, max ulp error to the exact value:")
    print("  " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))
    assert not failures, "\n".join(failures)


def _run(mod, kernel, x, y, dt):
    n = len(x)
    out, out2 = poisoned_device(n, dt), poisoned_device(n, dt)
    mod.get_function(kernel).launch((n + BLOCK - 1) // BLOCK, BLOCK, (upload(x), upload(y), out, out2, n))
    return download(out, n, dt), download(out2, n, dt)


def test_ulp_errors_measures_against_the_exact_value():
    """The measure itself, on values whose errors are known: one ulp off a power of two
    upwards is one ulp, downwards half of one (the ulp below is half as large); the exact
    value's low part counts; inf for a finite result and a wrong NaN are failures."""
    hi = np.array([1.0, 1.0, 3.0, 1e300, 2.0 ** -1074, np.inf, np.nan, 1.0])
    lo = np.array([0.0, 0.0, 2.0 ** -53, 0.0, 0.0, 0.0, 0.0, 0.0])
    got = np.array([np.nextafter(1.0, 2), np.nextafter(1.0, 0), 3.0, np.inf, 0.0, np.inf, np.nan, np.nan])
    err = ulp_errors(got, hi, lo, F64)
    assert err[0] == 1.0 and err[1] == 0.5
    assert err[2] == 0.25
    assert err[3] > 1e10 and err[4] == 1.0
    assert err[5] == 0 and err[6] == 0 and err[7] == np.inf

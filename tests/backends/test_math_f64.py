"""The float64 math kernels of ptx/math_f64.ptx (exp log log1p expm1 rsqrt tanh sigmoid, built
from fma and bit arithmetic by tools/gen_math_f64_ptx.py), float64 softmax and float16 pow on
CUDA: within the ulp bounds the generator documents, over wide random ranges, the special
values (0, -0, +-inf, NaN, subnormals, the overflow and underflow boundaries, values near 0)
and hypothesis-drawn arrays. The reference is numpy in long double where the platform has
one wider than float64 (x86: 64-bit significand), else numpy's float64 (one ulp more slack)."""
import importlib.util
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll
from tests.helpers.tensor_strategies import PROPERTY

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_math_f64_ptx", ROOT / "tools" / "gen_math_f64_ptx.py")
_gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gen)
MAX_ULP = _gen.MAX_ULP

WIDE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant
SLACK = 0 if WIDE else 1          # numpy's own float64 functions are within 1 ulp

REFERENCE = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "rsqrt": lambda v: 1 / np.sqrt(v),
             "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
# where each function's interesting values lie (beyond: the special cases)
RANGES = {"exp": (-746.0, 710.0), "expm1": (-45.0, 710.0), "tanh": (-23.0, 23.0), "sigmoid": (-746.0, 40.0)}
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
         1e-310, -1e-310, 1.0, -1.0, 2.0, 0.5, 1e-20, -1e-20, 1e-300, -1e-300, 1.7976931348623157e308,
         -1.7976931348623157e308, 709.782712893384, 709.7827128933841, 710.0, -708.3964185322641, -745.1332191019411,
         -745.1332191019412, -746.0, -1 + 2.0 ** -53, -1 - 2.0 ** -52, 2.0 ** -54, -(2.0 ** -54), 0.34657359027997264,
         -0.34657359027997264, 19.06, 22.0, -22.000000000000004, 36.7, 37.5, -40.0, 1e-5, -1e-5]


def reference(op: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCE[op](x.astype(np.longdouble)).astype(np.float64)


def ulp_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of want in want's own dtype (a float16 want is
    measured in float16 ulps); 0 where both are NaN or equal (infinities included), inf where
    only one is NaN or infinite."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        unit = np.spacing(np.abs(want)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - want.astype(np.float64)) / unit
    return np.where(same, 0.0, np.where(np.isfinite(got) & np.isfinite(want), err, np.inf))


def check(op: str, x: np.ndarray) -> None:
    got = getattr(ll, op)(ll.tensor(x, device="cuda")).numpy()
    want = reference(op, x)
    err = ulp_errors(got, want)
    if not err.size:
        assert got.shape == x.shape
        return
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP[op] + SLACK, (op, x[worst], got[worst], want[worst], err[worst])
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]), err_msg=f"{op}: sign of zero")


def wide_values(op: str, rng, n: int = 600) -> np.ndarray:
    if op in RANGES:
        lo, hi = RANGES[op]
        parts = [rng.uniform(lo, hi, n), rng.uniform(-1, 1, n // 2)]
    else:                       # log, log1p, rsqrt: every binade of the positive numbers
        parts = [np.exp2(rng.uniform(-1074, 1023, n)), rng.uniform(0.5, 2, n // 2)]
        if op == "log1p":
            parts.append(rng.uniform(-1, 1, n // 2))
    return np.concatenate([*parts, rng.uniform(-1e-6, 1e-6, n // 4), EDGES])


@pytest.mark.parametrize("op", list(MAX_ULP))
def test_float64_math_within_its_ulp_bound(driver, rng, op):
    check(op, wide_values(op, rng))


@pytest.mark.parametrize("op", ["exp", "log", "expm1", "log1p"])
def test_float64_math_on_hypothesis_arrays(driver, op):
    @PROPERTY
    @given(hnp.arrays(np.float64, st.integers(0, 40), elements=st.floats(allow_subnormal=True)))
    def prop(x):
        check(op, x)
    prop()


def test_float64_exp_log_specials_exactly(driver):
    x = ll.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, 1000.0, -1000.0], dtype=ll.float64, device="cuda")
    with np.errstate(all="ignore"):
        ref = x.numpy()
        for op in ("exp", "log", "log1p", "expm1", "tanh", "sigmoid", "rsqrt"):
            got, want = getattr(ll, op)(x).numpy(), reference(op, ref)
            np.testing.assert_array_equal(got, want, err_msg=op)
            np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]), err_msg=op)


def test_float64_softmax_on_cuda_matches_numpy(driver, rng):
    x = rng.normal(size=(4, 7)) * 30
    x[1, 3], x[2, :] = np.nan, -np.inf
    t = ll.tensor(x, device="cuda")
    with np.errstate(all="ignore"):
        shifted = np.exp(x - x.max(axis=1, keepdims=True))
        want = shifted / shifted.sum(axis=1, keepdims=True)
    got = ll.softmax(t, 1)
    assert got.dtype is ll.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=0, equal_nan=True)
    np.testing.assert_allclose(ll.softmax(t.T, 0).numpy(), want.T, rtol=1e-14, atol=0, equal_nan=True)
    assert ll.softmax(ll.zeros(0, 3, dtype=ll.float64, device="cuda"), 1).shape == (0, 3)


def _pow_module():
    spec = importlib.util.spec_from_file_location("gen_pow_f64_ptx", ROOT / "tools" / "gen_pow_f64_ptx.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_float64_pow_within_its_ulp_bound(driver, rng):
    n = 300
    x = np.concatenate([np.exp(rng.uniform(-30, 30, n)), 1 + rng.uniform(-1e-3, 1e-3, n), -np.exp(rng.uniform(-5, 5, n)),
                        np.exp2(rng.uniform(-1074, 1023, n))])
    y = np.concatenate([rng.uniform(-40, 40, n), rng.uniform(-744, 709, n) / np.log(x[n:2 * n]),
                        rng.integers(-60, 60, n).astype(np.float64), rng.uniform(-1.2, 1.2, n)])
    got = ll.pow(ll.tensor(x, device="cuda"), ll.tensor(y, device="cuda")).numpy()
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.longdouble), y.astype(np.longdouble)).astype(np.float64)
    err = ulp_errors(got, want)
    worst = int(np.argmax(err))
    assert err[worst] <= _pow_module().MAX_ULP + 1 + SLACK, (x[worst], y[worst], got[worst], want[worst])


def test_float64_pow_special_cases_are_c99s(driver):
    """numpy.power's (C99's) answers, bit for bit, sign of zero included, on a grid of bases
    and exponents: zeros, infinities, NaN, +-1, negative bases with integer and other exponents."""
    bases = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, -8.0, 5e-324, -1e-310, 1e308]
    exps = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1 / 3, 1e300, -1e300,
            2.0 ** 53 + 2, 2.0 ** 52 + 1, 1075.0, -1075.0]
    x, y = (a.ravel() for a in np.meshgrid(np.array(bases), np.array(exps)))
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = (ll.tensor(x, device="cuda") ** ll.tensor(y, device="cuda")).numpy()
    exact = np.isin(y, [0.0, 1.0, -1.0, 2.0, -2.0, np.inf, -np.inf, np.nan]) | ~np.isfinite(x) | (x == 0) | \
        np.isin(np.abs(x), [1.0]) | np.isnan(want) | (want == 0) | np.isinf(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[exact], want[exact])
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))
    assert (ulp_errors(got, want) <= 1).all()


def test_float16_pow_on_cuda_rounds_the_float32_power(driver, rng):
    base = np.concatenate([rng.uniform(-4, 4, 64), [0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 2, 3.75]]).astype(np.float16)
    # 3.75**3 = 52.734375 is a float16 tie; pow_f32 may land one float32 ulp below it
    expo = np.concatenate([rng.integers(-3, 4, 64), [-1, 3, np.nan, np.inf, 0.5, 3, 0, 0.5, 3]]).astype(np.float16)
    got = (ll.tensor(base, device="cuda") ** ll.tensor(expo, device="cuda")).numpy()
    with np.errstate(all="ignore"):
        want = np.power(base.astype(np.float32), expo.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    # pow_f32 is within a few float32 ulp, far below half a float16 ulp: the float16 result is
    # numpy's except (rarely) next to a rounding boundary, one float16 ulp away
    assert (ulp_errors(got, want) <= 1).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))

"""The .ftz flush (isa/numerics.py flush_f32 / flush_f64) on random arrays and scalars
mixing normals, subnormals, zeros, infinities and NaNs of both signs, against the bit-level
rule (a zero exponent field with a nonzero fraction becomes the sign bit alone), and the
fast-math case that made it cost: an operand with nothing to flush comes back as it is,
without a new array per operand."""
import numpy as np
import pytest

from lowlevel.emu.isa.numerics import flush_f32, flush_f64

KINDS = [(np.float32, np.uint32, 23, 8, flush_f32), (np.float64, np.uint64, 52, 11, flush_f64)]


def _bit_rule(x, ut, frac_bits, exp_bits):
    bits = x.view(ut)
    exp = (bits >> ut(frac_bits)) & ut((1 << exp_bits) - 1)
    frac = bits & ut((1 << frac_bits) - 1)
    sign = bits & ut(1 << (frac_bits + exp_bits))
    return np.where((exp == 0) & (frac != 0), sign, bits)


def _mixed(rng, ft, ut, frac_bits, n):
    bits = rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True)
    kind = rng.integers(0, 5, n)
    sign = bits & ut(1 << (8 * np.dtype(ut).itemsize - 1))
    frac = bits & ut((1 << frac_bits) - 1)
    bits = np.where(kind == 0, sign | frac, bits)                    # subnormal
    bits = np.where(kind == 1, sign, bits)                           # signed zero
    top = ut(((1 << (8 * np.dtype(ut).itemsize - 1 - frac_bits)) - 1) << frac_bits)
    bits = np.where(kind == 2, sign | top | (frac & ut(1)), bits)   # inf or NaN
    return bits.view(ft)


@pytest.mark.parametrize("ft, ut, frac_bits, exp_bits, flush", KINDS)
def test_flush_follows_the_bit_rule(rng, ft, ut, frac_bits, exp_bits, flush):
    x = _mixed(rng, ft, ut, frac_bits, 5000)
    with np.errstate(all="ignore"):
        got = flush(x)
    assert got.dtype == ft
    np.testing.assert_array_equal(got.view(ut), _bit_rule(x, ut, frac_bits, exp_bits))
    for v in x[:200]:                                  # the scalar (uniform register) path
        one = flush(v)
        assert np.asarray(one).view(ut) == _bit_rule(np.array([v]), ut, frac_bits, exp_bits)[0]


@pytest.mark.parametrize("ft, ut, frac_bits, exp_bits, flush", KINDS)
def test_nothing_to_flush_returns_the_operand(rng, ft, ut, frac_bits, exp_bits, flush):
    normal = rng.standard_normal(4096).astype(ft)
    with_zeros = normal.copy()
    with_zeros[rng.integers(0, 4096, 300)] = rng.choice([0.0, -0.0], 300)
    with_specials = with_zeros.copy()
    with_specials[:3] = [np.inf, -np.inf, np.nan]
    for x in (normal, with_zeros, with_specials):
        keep = x.copy()
        assert flush(x) is x
        np.testing.assert_array_equal(x.view(ut), keep.view(ut))

"""float16 and bfloat16 reductions (sum, mean, max) and softmax accumulate in float32 and
round once at the end, on the CPU backend and on CUDA (widened on the device, float32's
kernels, one cast back): compared with a float64 numpy reference, within bounds
proportionate to the reduction length."""
import numpy as np
from helpers.tensor_strategies import LAYOUTS, PROPERTY, SPECIALS, as_tensor
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

# unit roundoff of the output: half an ulp, relative (11 and 8 significant bits)
U_OUT = {ll.float16: 2.0 ** -11, ll.bfloat16: 2.0 ** -8}
U_F32 = 2.0 ** -24


def _half(data, device, dtype, min_dims=0, specials=True):
    """(a float16 / bfloat16 tensor in a random layout, its values as float64)."""
    shape = data.draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=0, max_side=5), label="shape")
    finite = st.integers(-64, 64).map(float) | st.floats(-64, 64, width=16)
    elements = finite | st.sampled_from(SPECIALS) if specials else finite
    x = data.draw(hnp.arrays(np.float16, shape, elements=elements)).astype(np.float32)
    if dtype is ll.bfloat16:
        x = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)     # exact bfloat16 values
    t, v = as_tensor(x, ll.float32, device, data.draw(LAYOUTS))
    return t.to(dtype), v.astype(np.float64)


def _check(got: np.ndarray, exact: np.ndarray, bound: np.ndarray) -> None:
    """NaN and inf where the exact result has them; elsewhere within `bound`."""
    exact = np.asarray(exact)
    assert got.shape == exact.shape, (got.shape, exact.shape)
    special = ~np.isfinite(exact)
    np.testing.assert_array_equal(got[special], exact[special])
    err = np.abs(got[~special] - exact[~special])
    assert np.all(err <= np.broadcast_to(bound, exact.shape)[~special]), (got, exact, bound)


@PROPERTY
@given(data=st.data(), dtype=st.sampled_from([ll.float16, ll.bfloat16]), op=st.sampled_from(["sum", "mean", "max"]),
       keepdim=st.booleans())
def test_half_reductions_accumulate_in_float32(device, data, dtype, op, keepdim):
    t, x = _half(data, device, dtype)
    dim = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.none(), label="dim")
    n = x.size if dim is None else x.shape[dim]
    if op == "max":
        assume(n)
    got = getattr(t, op)(dim, keepdim)
    got = got.values if op == "max" and dim is not None else got       # max(dim): (values, indices)
    assert got.dtype is dtype
    got = got.to(ll.float64).numpy()
    with np.errstate(all="ignore"):
        total = np.sum(x, axis=dim, keepdims=keepdim)
        exact = {"sum": total, "mean": total / n if n else total * np.nan,
                 "max": np.max(x, axis=dim, keepdims=keepdim) if n else None}[op]
        mag = np.sum(np.abs(np.where(np.isfinite(x), x, 0)), axis=dim, keepdims=keepdim) / (n if op == "mean" and n else 1)
    if op == "max":
        bound = np.zeros_like(exact)           # exact: the max is one of the elements
    else:
        # float32 accumulation in another order, then ONE rounding to the output dtype
        bound = (n / 32 + 6) * U_F32 * mag + U_OUT[dtype] * np.abs(exact)
    _check(got, exact, bound)


@PROPERTY
@given(data=st.data(), dtype=st.sampled_from([ll.float16, ll.bfloat16]))
def test_half_softmax_computes_in_float32(device, data, dtype):
    t, x = _half(data, device, dtype, min_dims=1, specials=False)
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    got = t.softmax(dim)
    assert got.dtype is dtype and got.shape == x.shape
    e = np.exp(x - np.max(x, axis=dim, keepdims=True)) if x.size else x
    exact = e / np.sum(e, axis=dim, keepdims=True) if x.size else x
    # float32 arithmetic (exp within a few ulp), then one rounding to the output dtype
    _check(got.to(ll.float64).numpy(), exact, 8 * U_F32 + U_OUT[dtype] * np.abs(exact))


def test_a_float16_sum_does_not_lose_the_small_terms(device):
    # 2048 + 1 rounds back to 2048 in float16 (a tie, to even), so a float16 accumulator
    # loses every 1; in float32 the sum is 2303, rounded once to float16: 2304
    x = np.concatenate([[2048.0], np.ones(255)]).astype(np.float16)
    assert np.float16(2048) + np.float16(1) == 2048       # what a float16 accumulator does
    t = ll.tensor(x, device=device)
    assert t.sum().item() == 2304.0
    assert t.reshape(16, 16).sum(1).sum().item() == 2304.0

"""Reductions (frontend/reductions.py) and tensor indexing (frontend/indexing.py,
advanced_indexing.py) against numpy, on the CPU backend and CUDA (the emulated GPU where no
GPU is), with the reproducers of issue 23: max/min(dim) as (values, indices), integer sums
in int64, and the crashes of 0-d and empty reductions."""
import math

import numpy as np
import pytest
from helpers.tensor_strategies import LAYOUTS, PROPERTY, as_tensor, assert_same, shapes, values
from hypothesis import given
from hypothesis import strategies as st

import lowlevel as ll
from lowlevel import cuda
from lowlevel.dispatch import call, op_table

ALL_DTYPES = [ll.float32, ll.float64, ll.float16, ll.int32, ll.int64, ll.bool]


def poison(device):
    """Leave blocks full of 0xFF bytes (NaN, -1) in the caching allocator, so a kernel that
    skips an element of its output shows it."""
    if device != "cpu":
        for n in (64, 512, 4096, 32768):
            ll.full((n,), -1, dtype=ll.int64, device=device)


# ---- the reproducers of issue 23 ---------------------------------------------------------------------------
def test_max_dim_is_values_and_indices(device, rng):
    x = rng.permutation(12).reshape(3, 4).astype(np.float32)
    t = ll.tensor(x, device=device, requires_grad=True)
    poison(device)
    v, i = t.max(1)
    assert isinstance(t.max(1), ll.return_types.max)
    np.testing.assert_array_equal(v.numpy(), x.max(1))
    np.testing.assert_array_equal(i.numpy(), x.argmax(1))
    assert i.dtype is ll.int64
    np.testing.assert_array_equal(t.max(1)[0].detach().numpy(), t.max(1).values.detach().numpy())
    np.testing.assert_array_equal(t.max(dim=1).indices.numpy(), x.argmax(1))
    t.max(1)[0].sum().backward()            # the gradient goes to the argmax of each row
    expected = np.zeros_like(x)
    expected[np.arange(3), x.argmax(1)] = 1.0
    np.testing.assert_array_equal(t.grad.numpy(), expected)
    m = ll.min(t, 0)
    assert isinstance(m, ll.return_types.min)
    np.testing.assert_array_equal(m.indices.numpy(), x.argmin(0))
    np.testing.assert_array_equal(ll.max(t, 0).values.detach().numpy(), x.max(0))
    assert t.max().shape == () and t.max().item() == x.max()


def test_max_of_two_tensors_is_elementwise(device, rng):
    a, b = rng.standard_normal((2, 5)).astype(np.float32)
    got = ll.max(ll.tensor(a, device=device), ll.tensor(b, device=device))
    np.testing.assert_array_equal(got.numpy(), np.maximum(a, b))


@pytest.mark.parametrize("dtype", [ll.int32, ll.bool, ll.int64])
def test_integer_sums_are_int64(device, dtype):
    x = np.array([2**30, 2**30, 2**30, 1]) if dtype is not ll.bool else np.ones(300, bool)
    t = ll.tensor(x, device=device).to(dtype)
    total = t.sum()
    assert total.dtype is ll.int64 and total.item() == int(x.astype(np.int64).sum())
    assert t.reshape(1, -1).sum(1).dtype is ll.int64
    assert t.cumsum(0).dtype is ll.int64 and t.prod().dtype is ll.int64


def test_mean_of_integers_is_refused_like_torch(device):
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
        ll.tensor([1, 2], device=device).mean()
    assert ll.tensor([1, 2], device=device).mean(dtype=ll.float32).item() == 1.5


def test_zero_d_reductions(device):
    s = ll.tensor(2.5, device=device)
    assert s.sum(0).item() == 2.5 and s.sum(0).shape == ()        # was ZeroDivisionError on cuda
    assert s.mean(-1).item() == 2.5
    v, i = s.max(0)                                                  # was an IndexError from ops.py
    assert v.shape == () and v.item() == 2.5 and i.item() == 0
    assert s.softmax(0).item() == 1.0 and s.softmax(-1).shape == ()   # was refused
    with pytest.raises(IndexError, match="max: dim 1 is out of range"):
        s.max(1)


def test_max_over_empty_dims_as_torch(device):
    t = ll.zeros(3, 0, device=device)
    v, i = t.max(0)                          # dim 0 has 3 elements: an empty result, not an error
    assert v.shape == (0,) and i.shape == (0,) and i.dtype is ll.int64
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        t.max(1)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        t.max()
    assert t.amax(0).shape == (0,)


# ---- reductions against numpy ---------------------------------------------------------------------------------
def test_reductions_over_dim_tuples(device, rng):
    x = rng.standard_normal((3, 4, 5))
    t = ll.tensor(x, device=device)
    for dims in [(0, 2), (-1, 0), (1,), (0, 1, 2), ()]:
        axis = tuple(d % 3 for d in dims) or None
        for keep in (False, True):
            np.testing.assert_allclose(t.sum(dims, keepdim=keep).numpy(), x.sum(axis, keepdims=keep), rtol=1e-12)
            np.testing.assert_allclose(t.mean(dims, keep).numpy(), x.mean(axis, keepdims=keep), rtol=1e-12)
            np.testing.assert_array_equal(t.amax(dims, keep).numpy(), x.max(axis, keepdims=keep))
            np.testing.assert_array_equal(t.amin(dims, keep).numpy(), x.min(axis, keepdims=keep))
            np.testing.assert_array_equal((t > 0).any(dims, keep).numpy(), (x > 0).any(axis, keepdims=keep))
            np.testing.assert_array_equal((t > 0).all(dims, keep).numpy(), (x > 0).all(axis, keepdims=keep))
            for correction in (0, 1, 2):
                ddof = correction
                np.testing.assert_allclose(t.var(dims, keepdim=keep, correction=correction).numpy(),
                                           x.var(axis, ddof=ddof, keepdims=keep), rtol=1e-10)
            np.testing.assert_allclose(t.std(dims, False, keep).numpy(), x.std(axis, keepdims=keep), rtol=1e-10)
            lse = np.log(np.exp(x).sum(axis, keepdims=keep))
            np.testing.assert_allclose(ll.logsumexp(t, dims, keep).numpy(), lse, rtol=1e-10)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
        t.sum((1, -2))
    assert t.sum(dtype=ll.float32).dtype is ll.float32


def test_norms(device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = ll.tensor(x, device=device)
    for p, order in [(2, 2), ("fro", 2), (1, 1), (math.inf, np.inf), (-math.inf, -np.inf), (3.0, 3), (0, 0)]:
        np.testing.assert_allclose(t.norm(p=p).numpy(), np.linalg.norm(x.reshape(-1), order), rtol=1e-5)
        for dim in (0, 1):
            np.testing.assert_allclose(t.norm(p=p, dim=dim).numpy(), np.linalg.norm(x, order, axis=dim), rtol=1e-5)
    with pytest.raises(TypeError):
        ll.tensor([1, 2], device=device).norm()


def test_logsumexp_does_not_overflow(device):
    t = ll.tensor([[1000.0, 1000.0], [-math.inf, -math.inf]], device=device)
    np.testing.assert_allclose(t.logsumexp(1).numpy(), [1000.0 + math.log(2.0), -math.inf])


@pytest.mark.parametrize("dtype", [ll.float32, ll.float64, ll.float16, ll.int32, ll.int64])
def test_cumsum_cumprod_prod(device, rng, dtype):
    x = rng.integers(-3, 4, (3, 5)).astype(np.float64)
    t = ll.tensor(x, device=device).to(dtype)
    acc = np.int64 if dtype in (ll.int32, ll.int64) else None
    for dim in (0, 1, -1):
        poison(device)
        np.testing.assert_allclose(t.cumsum(dim).numpy(), np.cumsum(x, dim, dtype=acc))
        np.testing.assert_allclose(t.cumprod(dim).numpy(), np.cumprod(x, dim, dtype=acc))
        np.testing.assert_allclose(t.prod(dim).numpy(), np.prod(x, dim, dtype=acc))
    np.testing.assert_allclose(t.prod().numpy(), np.prod(x))
    assert ll.zeros(2, 0, device=device).prod(1).numpy().tolist() == [1.0, 1.0]


# ---- sorting --------------------------------------------------------------------------------------------------
def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """numpy's stable argsort; descending: largest first, NaN first, ties in order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    return (n - 1) - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)


@PROPERTY
@given(data=st.data(), dtype=st.sampled_from(ALL_DTYPES), descending=st.booleans())
def test_sort_is_stable_and_matches_numpy(device, data, dtype, descending):
    shape = data.draw(shapes(min_dims=1), label="shape")
    t, x = as_tensor(data.draw(values(dtype, shape)), dtype, device, data.draw(LAYOUTS))
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim")
    poison(device)
    order = _stable_order(x, dim, descending)
    got = t.sort(dim, descending=descending)
    assert_same(got.indices.numpy(), order)
    assert_same(got.values.numpy(), np.take_along_axis(x, order, dim))
    assert_same(t.argsort(dim, descending).numpy(), order)


def test_topk_and_kthvalue(device, rng):
    x = rng.permutation(42).reshape(6, 7).astype(np.float32)
    t = ll.tensor(x, device=device)
    for dim in (0, 1):
        order = np.argsort(-x, axis=dim)
        v, i = t.topk(3, dim)
        np.testing.assert_array_equal(i.numpy(), np.take(order, range(3), axis=dim))
        np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, i.numpy(), dim))
        small = t.topk(2, dim, largest=False)
        np.testing.assert_array_equal(small.indices.numpy(), np.take(np.argsort(x, axis=dim), range(2), axis=dim))
        k = int(rng.integers(1, x.shape[dim] + 1))
        kth = t.kthvalue(k, dim)
        np.testing.assert_array_equal(kth.values.numpy(), np.sort(x, axis=dim).take(k - 1, axis=dim))
        np.testing.assert_array_equal(kth.indices.numpy(), np.argsort(x, axis=dim).take(k - 1, axis=dim))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        t.topk(8)


# ---- indexing -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES + [ll.bfloat16])
def test_gather_scatter_index_select_every_dtype(device, rng, dtype):
    x = rng.integers(0, 2 if dtype is ll.bool else 50, (4, 5))
    t = ll.tensor(x, device=device).to(dtype)
    idx = rng.integers(0, 5, (4, 3))
    i = ll.tensor(idx, device=device)
    poison(device)
    np.testing.assert_array_equal(t.gather(1, i).numpy(), np.take_along_axis(x, idx, 1).astype(t.numpy().dtype))
    rows = rng.integers(0, 4, 6)
    np.testing.assert_array_equal(t.index_select(0, ll.tensor(rows, device=device)).numpy(), t.numpy()[rows])
    src = ll.tensor(rng.integers(0, 2, (4, 3)), device=device).to(dtype)
    expected = t.numpy().copy()
    perm = np.argsort(rng.random((4, 5)), axis=1)[:, :3]           # distinct columns per row
    np.put_along_axis(expected, perm, src.numpy(), 1)
    np.testing.assert_array_equal(t.scatter(1, ll.tensor(perm, device=device), src).numpy(), expected)
    added = t.numpy().astype(np.float64)
    np.add.at(added, (np.arange(4)[:, None], idx), src.numpy().astype(np.float64))
    got = t.scatter_add(1, i, src).numpy().astype(np.float64)
    np.testing.assert_allclose(got, added != 0 if dtype is ll.bool else added,
                               rtol=1e-2 if dtype in (ll.float16, ll.bfloat16) else 0)


def test_advanced_indexing_matches_numpy(device, rng):
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    t = ll.tensor(x, device=device)
    a, b = rng.integers(-4, 4, (2, 3)), rng.integers(0, 6, 3)
    cases = [(ll.tensor(a[0], device=device), a[0]), ([1, 3, 1], [1, 3, 1]),
             ((slice(None), ll.tensor(b % 5, device=device)), (slice(None), b % 5)),
             ((ll.tensor(a[0], device=device), slice(1, 3), ll.tensor(b, device=device)), (a[0], slice(1, 3), b)),
             ((slice(None), ll.tensor(b % 5, device=device), ll.tensor(b, device=device)), (slice(None), b % 5, b)),
             ((ll.tensor(a, device=device),), (a,)), ((Ellipsis, ll.tensor(b, device=device)), (Ellipsis, b)),
             ((t[:, 0, 0] > 0, slice(None), 2), (x[:, 0, 0] > 0, slice(None), 2))]
    for index, np_index in cases:
        poison(device)
        np.testing.assert_array_equal(t[index].numpy(), x[np_index], err_msg=str(np_index))
    y, z = x.copy(), t.clone()
    y[:, b % 5] = 7.0
    z[:, ll.tensor(b % 5, device=device)] = 7.0
    np.testing.assert_array_equal(z.numpy(), y)
    rows = np.unique(a[0] % 4)
    y[rows, 1] = -y[rows, 1]
    z[ll.tensor(rows, device=device), 1] = -z[ll.tensor(rows, device=device), 1]
    np.testing.assert_array_equal(z.numpy(), y)


def test_masked_fill_and_nonzero(device, rng):
    x = rng.integers(-2, 3, (3, 4)).astype(np.float32)
    t = ll.tensor(x, device=device)
    np.testing.assert_array_equal(t.masked_fill(t > 0, 9.0).numpy(), np.where(x > 0, 9.0, x))
    np.testing.assert_array_equal(ll.nonzero(t).numpy(), np.argwhere(x))
    for got, want in zip(t.nonzero(as_tuple=True), np.nonzero(x)):
        np.testing.assert_array_equal(got.numpy(), want)
    assert ll.zeros(2, 3, device=device).nonzero().shape == (0, 2)


@pytest.mark.parametrize("op", ["index", "gather", "index_select", "scatter", "setitem"])
def test_indices_out_of_range_are_index_errors(device, op):
    t = ll.zeros(3, 5, device=device)
    bad = ll.tensor([[0, 5]], device=device)
    run = {"index": lambda: t[:, bad[0]], "gather": lambda: t.gather(1, bad),
           "index_select": lambda: t.index_select(1, bad[0]), "scatter": lambda: t.scatter(1, bad, 1.0),
           "setitem": lambda: t.__setitem__(ll.tensor([-4], device=device), 1.0)}[op]
    with pytest.raises(IndexError, match="out of bounds for dimension . with size [35]"):
        run()


def test_an_index_out_of_range_in_a_cuda_kernel_traps(device):
    if device == "cpu":
        pytest.skip("the CUDA kernels' own check")
    x = ll.arange(5, dtype=ll.float32, device=device)
    with pytest.raises(cuda.CudaError, match="trap"):
        call("gather", x, ll.tensor([0, 7], device=device), dim=0).numpy()     # past the frontend's check
    cuda.reset_device()


@pytest.mark.parametrize("op", ["gather", "argsort", "cumsum", "cumprod", "scatter", "scatter_add"])
def test_kernels_on_both_backends(op):
    assert {entry.key.name for entry in op_table(op).entries.values()} >= {"CPU", "CUDA"}


@pytest.mark.parametrize("op", ["max.dim", "sort", "topk", "kthvalue", "prod", "var", "std", "logsumexp", "norm",
                                "index_select", "masked_fill", "nonzero"])
def test_explain_names_the_decompositions(device, op):
    assert "decomposition" in ll.explain(op, ll.zeros(3, device=device))

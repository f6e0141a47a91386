"""PyTorch-style snippets of reductions and indexing, for the torch differential test.

Each `snippet_*(T)` takes T, the torch-like module (torch itself, or lowlevel with its
creation functions bound to one device), and returns what a user would look at: a tensor,
a (values, indices) named tuple, a tuple of tensors, or a Python number. The harness runs
each on torch (CPU) and on lowlevel's devices and compares values, dtypes and shapes; a
snippet that raises is compared by whether both refuse.

Inputs are random, fresh per process (SEED), and the same for every T: `data(shape, k)`
draws them from (SEED, shape, k). Snippets whose indices matter draw distinct values so that
no tie decides an index.
"""
import math
import os

import numpy as np

SEED = int(os.environ.get("LOWLEVEL_SNIPPET_SEED", np.random.SeedSequence().entropy % (1 << 32)))


def data(shape, k: int = 0, dtype="float32", low=None, high=None) -> np.ndarray:
    """Random values of `shape`, the same for every caller with the same (shape, k)."""
    rng = np.random.default_rng([SEED, k, *shape])
    if dtype.startswith("int"):
        return rng.integers(-50 if low is None else low, 50 if high is None else high, shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dtype)


def distinct(shape, k: int = 0) -> np.ndarray:
    """A random permutation of distinct float32 values (no ties)."""
    n = math.prod(shape)
    rng = np.random.default_rng([SEED, k, 7, *shape])
    return (rng.permutation(n).astype(np.float32) * 0.5 - n / 4).reshape(shape)


def f(T, shape, k=0):
    return T.tensor(data(shape, k))


def d64(T, shape, k=0):
    return T.tensor(data(shape, k, "float64"))


def i32(T, shape, k=0):
    return T.tensor(data(shape, k, "int32"), dtype=T.int32)


def i64(T, shape, k=0):
    return T.tensor(data(shape, k, "int64"))


# ---- max / min ---------------------------------------------------------------------------------------------
def snippet_max_dim_tuple(T): return T.tensor(distinct((4, 6))).max(1)
def snippet_max_dim_unpack(T): v, i = T.tensor(distinct((4, 6))).max(0); return v, i
def snippet_max_dim_values(T): return T.tensor(distinct((3, 5))).max(1).values
def snippet_max_dim_indices(T): return T.tensor(distinct((3, 5))).max(dim=1).indices
def snippet_max_dim_index0(T): return T.tensor(distinct((3, 5))).max(1)[0]
def snippet_max_keepdim(T): return T.tensor(distinct((3, 5))).max(1, keepdim=True)
def snippet_max_negative_dim(T): return T.tensor(distinct((2, 3, 4))).max(-2)
def snippet_max_all(T): return f(T, (4, 5)).max()
def snippet_min_dim(T): return T.tensor(distinct((4, 6))).min(1)
def snippet_min_all(T): return f(T, (4, 5)).min()
def snippet_torch_max_dim(T): return T.max(T.tensor(distinct((4, 6))), 1)
def snippet_torch_max_elementwise(T): return T.max(f(T, (5,), 0), f(T, (5,), 1))
def snippet_max_int32_dim(T): return T.tensor(distinct((3, 4))).to(T.int32).max(1)
def snippet_max_int64_dim(T): return T.tensor(distinct((3, 4))).to(T.int64).max(0)
def snippet_max_nan_dim(T): x = T.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]]); return x.max(1)
def snippet_max_0d_dim(T): return T.tensor(2.5).max(0)
def snippet_max_empty_kept_dim(T): return T.zeros(3, 0).max(0)
def snippet_max_empty_reduced_dim(T): return T.zeros(3, 0).max(1)
def snippet_max_empty_all(T): return T.zeros(0).max()
def snippet_amax_tuple(T): return f(T, (3, 4, 5)).amax((0, 2))
def snippet_amax_keepdim(T): return f(T, (3, 4, 5)).amax(dim=(1, 2), keepdim=True)
def snippet_amin_all(T): return T.amin(f(T, (3, 4)))
def snippet_amin_dim(T): return f(T, (3, 4)).amin(1)


# ---- sum / mean / prod ---------------------------------------------------------------------------------------
def snippet_sum_dim_tuple(T): return f(T, (3, 4, 5)).sum((0, 2))
def snippet_sum_dim_list_keepdim(T): return f(T, (3, 4, 5)).sum(dim=[0, 1], keepdim=True)
def snippet_sum_int32_is_int64(T): return T.tensor([2**30, 2**30, 2**30], dtype=T.int32).sum()
def snippet_sum_int32_dim(T): return i32(T, (4, 5)).sum(1)
def snippet_sum_bool(T): return T.tensor(data((6, 7), 0, "bool")).sum()
def snippet_sum_bool_dim(T): return T.tensor(data((6, 7), 0, "bool")).sum(0)
def snippet_sum_dtype(T): return i64(T, (3, 4)).sum(dtype=T.float32)
def snippet_sum_0d_dim(T): return T.tensor(2.0).sum(0)
def snippet_sum_negative_tuple(T): return f(T, (2, 3, 4)).sum((-1, -3))
def snippet_sum_repeated_dim(T): return f(T, (2, 3)).sum((0, 0))
def snippet_sum_empty(T): return T.zeros(0, 3).sum(0)
def snippet_mean_tuple(T): return f(T, (3, 4, 5)).mean((1, 2))
def snippet_mean_keepdim(T): return f(T, (3, 4)).mean(0, keepdim=True)
def snippet_mean_int_refused(T): return i64(T, (3,)).mean()
def snippet_mean_int_dtype(T): return i64(T, (3, 4)).mean(dtype=T.float64)
def snippet_mean_float64(T): return d64(T, (5, 6)).mean(1)
def snippet_prod_all(T): return (f(T, (6,)) * 0.5 + 1.0).prod()
def snippet_prod_dim(T): return (f(T, (3, 4)) * 0.5 + 1.0).prod(1)
def snippet_prod_keepdim(T): return (f(T, (3, 4)) * 0.5 + 1.0).prod(0, keepdim=True)
def snippet_prod_int(T): return T.tensor(data((3, 4), 0, "int64", 1, 5)).prod(1)
def snippet_prod_int32(T): return T.tensor(data((5,), 0, "int32", 1, 5), dtype=T.int32).prod()
def snippet_prod_empty(T): return T.zeros(2, 0).prod(1)


# ---- cumsum / cumprod --------------------------------------------------------------------------------------
def snippet_cumsum(T): return f(T, (4, 5)).cumsum(1)
def snippet_cumsum_dim0(T): return f(T, (4, 5)).cumsum(0)
def snippet_cumsum_int32(T): return i32(T, (6,)).cumsum(0)
def snippet_cumsum_bool(T): return T.tensor(data((8,), 0, "bool")).cumsum(0)
def snippet_cumsum_dtype(T): return i64(T, (6,)).cumsum(0, dtype=T.float64)
def snippet_cumsum_function(T): return T.cumsum(d64(T, (2, 3, 4)), dim=-1)
def snippet_cumprod(T): return (f(T, (3, 5)) * 0.3 + 1.0).cumprod(1)
def snippet_cumprod_int(T): return T.tensor(data((3, 5), 0, "int64", -3, 4)).cumprod(1)


# ---- var / std / logsumexp / norm ---------------------------------------------------------------------------
def snippet_var_all(T): return f(T, (5, 6)).var()
def snippet_var_dim(T): return f(T, (5, 6)).var(1)
def snippet_var_correction0(T): return f(T, (5, 6)).var(0, correction=0)
def snippet_var_unbiased_false(T): return f(T, (5, 6)).var(1, unbiased=False)
def snippet_var_tuple_keepdim(T): return d64(T, (3, 4, 5)).var((0, 2), keepdim=True)
def snippet_std_all(T): return f(T, (7,)).std()
def snippet_std_dim(T): return f(T, (4, 7)).std(dim=1)
def snippet_std_one_element(T): return T.tensor([1.0]).std()
def snippet_std_int_refused(T): return i64(T, (4,)).std()
def snippet_logsumexp(T): return f(T, (4, 6)).logsumexp(1)
def snippet_logsumexp_large(T): return (f(T, (3, 4)) * 100.0 + 500.0).logsumexp(1)
def snippet_logsumexp_tuple(T): return T.logsumexp(f(T, (2, 3, 4)), dim=(0, 2), keepdim=True)
def snippet_logsumexp_inf(T): return T.tensor([-math.inf, -math.inf]).logsumexp(0)
def snippet_norm(T): return f(T, (3, 4)).norm()
def snippet_norm_p1_dim(T): return f(T, (3, 4)).norm(p=1, dim=1)
def snippet_norm_inf(T): return f(T, (3, 4)).norm(p=float("inf"))
def snippet_norm_dim_keepdim(T): return f(T, (3, 4)).norm(dim=0, keepdim=True)
def snippet_norm_p3(T): return d64(T, (5,)).norm(p=3)
def snippet_norm_int_refused(T): return i64(T, (4,)).norm()


# ---- all / any -------------------------------------------------------------------------------------------------
def snippet_all_dim(T): return T.tensor(data((4, 5), 0, "bool")).all(1)
def snippet_any_tuple(T): return T.tensor(data((3, 4, 5), 0, "bool")).any((0, 2))
def snippet_all_float(T): return f(T, (3, 4)).all()
def snippet_any_keepdim(T): return T.tensor(data((4, 5), 0, "bool")).any(0, keepdim=True)


# ---- sort / argsort / topk / kthvalue ----------------------------------------------------------------------
def snippet_sort(T): return T.tensor(distinct((4, 7))).sort()
def snippet_sort_descending_dim0(T): return T.tensor(distinct((4, 7))).sort(0, descending=True)
def snippet_sort_stable_ties(T): return T.tensor([3, 1, 2, 1, 3, 1]).sort(stable=True)
def snippet_sort_stable_descending(T): return T.tensor([3, 1, 2, 1, 3, 1]).sort(descending=True, stable=True)
def snippet_sort_nan(T): return T.tensor([1.0, float("nan"), -2.0, 3.0]).sort()
def snippet_sort_nan_descending(T): return T.tensor([1.0, float("nan"), -2.0, 3.0]).sort(descending=True)
def snippet_sort_int32(T): return T.tensor(data((9,), 0, "int32"), dtype=T.int32).sort(stable=True)
def snippet_sort_0d(T): return T.tensor(3.0).sort()
def snippet_argsort(T): return T.tensor(distinct((3, 6))).argsort(1)
def snippet_argsort_descending(T): return T.argsort(T.tensor(distinct((3, 6))), dim=0, descending=True)
def snippet_topk(T): return T.tensor(distinct((3, 8))).topk(3)
def snippet_topk_smallest(T): return T.tensor(distinct((3, 8))).topk(2, dim=0, largest=False)
def snippet_topk_function(T): v, i = T.topk(T.tensor(distinct((10,))), 4); return v, i
def snippet_topk_k_too_big(T): return T.zeros(3).topk(4)
def snippet_kthvalue(T): return T.tensor(distinct((4, 7))).kthvalue(3, 1)
def snippet_kthvalue_keepdim(T): return T.tensor(distinct((4, 7))).kthvalue(2, 0, keepdim=True)
def snippet_kthvalue_out_of_range(T): return T.zeros(3).kthvalue(4)


# ---- indexing -------------------------------------------------------------------------------------------------
def snippet_index_rows(T): return f(T, (5, 3))[T.tensor([4, 0, 2])]
def snippet_index_rows_list(T): return f(T, (5, 3))[[1, 1, 3]]
def snippet_index_columns(T): return f(T, (4, 5))[:, T.tensor([0, 4, 2])]
def snippet_index_rows_slice(T): return f(T, (5, 3))[T.tensor([3, 1]), :]
def snippet_index_pairs(T): return f(T, (4, 5))[T.tensor([0, 3, 1]), T.tensor([4, 0, 2])]
def snippet_index_negative(T): return f(T, (5,))[T.tensor([-1, -5, 0])]
def snippet_index_2d_index(T): return f(T, (6, 2))[T.tensor([[0, 5], [2, 3]])]
def snippet_index_split_dims(T): return f(T, (2, 3, 4))[T.tensor([0, 1]), :, T.tensor([3, 2])]
def snippet_index_adjacent_dims(T): return f(T, (2, 3, 4))[:, T.tensor([0, 2]), T.tensor([1, 3])]
def snippet_index_int_then_tensor(T): return f(T, (2, 3, 4))[0, :, T.tensor([0, 1])]
def snippet_index_out_of_range(T): return f(T, (5,))[T.tensor([5])]
def snippet_index_float_refused(T): return f(T, (5,))[T.tensor([0.5])]
def snippet_index_bool_mask(T): x = f(T, (4, 5)); return x[x > 0]
def snippet_index_bool_rows(T): return f(T, (4, 3))[T.tensor([True, False, True, False])]
def snippet_setitem_rows(T): x = f(T, (4, 3)); x[T.tensor([0, 2])] = 7.0; return x
def snippet_setitem_columns(T): x = f(T, (3, 4)); x[:, [1, 3]] = f(T, (3, 2), 1); return x
def snippet_setitem_pairs(T): x = T.zeros(3, 3); x[T.tensor([0, 1, 2]), T.tensor([2, 1, 0])] = 1.0; return x
def snippet_setitem_mask(T): x = f(T, (3, 4)); x[x < 0] = 0.0; return x
def snippet_setitem_increment(T): x = T.zeros(5); x[T.tensor([1, 3])] += 2.0; return x
def snippet_gather(T): return f(T, (3, 4)).gather(1, T.tensor(data((3, 2), 0, "int64", 0, 4)))
def snippet_gather_dim0(T): return T.gather(f(T, (3, 4)), 0, T.tensor(data((2, 4), 0, "int64", 0, 3)))
def snippet_gather_out_of_range(T): return f(T, (3, 4)).gather(1, T.tensor([[4], [0], [1]]))
def snippet_scatter(T): return T.zeros(3, 5).scatter(1, T.tensor([[0, 4], [1, 2], [3, 0]]), f(T, (3, 2)))
def snippet_scatter_value(T): return T.zeros(3, 5).scatter(1, T.tensor([[0], [2], [4]]), 1.5)
def snippet_scatter_add(T): return T.zeros(2, 4).scatter_add(1, T.tensor([[0, 0, 3], [1, 1, 1]]), T.ones(2, 3))
def snippet_scatter_add_int(T): return T.zeros(5, dtype=T.int64).scatter_add(0, T.tensor([0, 0, 4]), T.tensor([1, 2, 3]))
def snippet_scatter_inplace(T): x = T.zeros(2, 3); x.scatter_(1, T.tensor([[2], [0]]), 5.0); return x
def snippet_index_select(T): return f(T, (4, 5)).index_select(1, T.tensor([4, 0, 0]))
def snippet_index_select_rows(T): return T.index_select(f(T, (4, 5)), 0, T.tensor([3, 1]))
def snippet_index_select_out_of_range(T): return f(T, (4, 5)).index_select(0, T.tensor([4]))
def snippet_masked_fill(T): x = f(T, (3, 4)); return x.masked_fill(x > 0, -1.0)
def snippet_masked_fill_broadcast(T): return f(T, (3, 4)).masked_fill(T.tensor([True, False, False, True]), 0.0)
def snippet_masked_fill_int(T): return i64(T, (5,)).masked_fill(T.tensor([True, False, True, False, True]), 9)
def snippet_nonzero(T): return T.tensor(data((4, 5), 0, "bool")).nonzero()
def snippet_nonzero_float(T): return T.tensor([0.0, 1.5, 0.0, -2.0]).nonzero()
def snippet_nonzero_tuple(T): return T.tensor(data((3, 4), 0, "bool")).nonzero(as_tuple=True)
def snippet_nonzero_none(T): return T.zeros(2, 3).nonzero()
def snippet_softmax_0d(T): return T.tensor(2.0).softmax(0)

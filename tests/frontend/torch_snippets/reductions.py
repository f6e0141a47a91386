"""PyTorch-style snippets of reductions and indexing, for the torch differential test.

Run by tests/frontend/test_torch_differential.py (and test_reduction_snippets.py) with the
global `T` bound to torch and to lowlevel (its creation functions making tensors on "cpu" or
"cuda"). Each `snippet_*()` returns what a user would look at: a tensor, a (values, indices)
named tuple, a tuple of tensors, or a Python number; the harness compares values, dtypes and
shapes, and a snippet that raises by whether both refuse.

Inputs are random, fresh per process (SEED; set LOWLEVEL_SNIPPET_SEED to repeat a run), and
the same for every T: `data(shape, k)`
draws them from (SEED, shape, k). Snippets whose indices matter draw distinct values so that
no tie decides an index.
"""
import math
import os

import numpy as np

T = None        # bound by the harness
# fresh per process, the same for every run of this file in it (the harness runs it once per T)
SEED = int(os.environ.setdefault("LOWLEVEL_SNIPPET_SEED", str(np.random.SeedSequence().entropy % (1 << 32))))


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


def f(shape, k=0):
    return T.tensor(data(shape, k))


def d64(shape, k=0):
    return T.tensor(data(shape, k, "float64"))


def i32(shape, k=0):
    return T.tensor(data(shape, k, "int32"), dtype=T.int32)


def i64(shape, k=0):
    return T.tensor(data(shape, k, "int64"))


# == max / min ======================================================================================
def snippet_max_dim_tuple(): return T.tensor(distinct((4, 6))).max(1)
def snippet_max_dim_unpack(): v, i = T.tensor(distinct((4, 6))).max(0); return v, i
def snippet_max_dim_values(): return T.tensor(distinct((3, 5))).max(1).values
def snippet_max_dim_indices(): return T.tensor(distinct((3, 5))).max(dim=1).indices
def snippet_max_dim_index0(): return T.tensor(distinct((3, 5))).max(1)[0]
def snippet_max_keepdim(): return T.tensor(distinct((3, 5))).max(1, keepdim=True)
def snippet_max_negative_dim(): return T.tensor(distinct((2, 3, 4))).max(-2)
def snippet_max_all(): return f((4, 5)).max()
def snippet_min_dim(): return T.tensor(distinct((4, 6))).min(1)
def snippet_min_all(): return f((4, 5)).min()
def snippet_torch_max_dim(): return T.max(T.tensor(distinct((4, 6))), 1)
def snippet_torch_max_elementwise(): return T.max(f((5,), 0), f((5,), 1))
def snippet_max_int32_dim(): return T.tensor(distinct((3, 4))).to(T.int32).max(1)
def snippet_max_int64_dim(): return T.tensor(distinct((3, 4))).to(T.int64).max(0)
def snippet_max_nan_dim(): x = T.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]]); return x.max(1)
def snippet_max_0d_dim(): return T.tensor(2.5).max(0)
def snippet_max_empty_kept_dim(): return T.zeros(3, 0).max(0)
def snippet_max_empty_reduced_dim(): return T.zeros(3, 0).max(1)
def snippet_max_empty_all(): return T.zeros(0).max()
def snippet_amax_tuple(): return f((3, 4, 5)).amax((0, 2))
def snippet_amax_keepdim(): return f((3, 4, 5)).amax(dim=(1, 2), keepdim=True)
def snippet_amin_all(): return T.amin(f((3, 4)))
def snippet_amin_dim(): return f((3, 4)).amin(1)


# == sum / mean / prod ==============================================================================
def snippet_sum_dim_tuple(): return f((3, 4, 5)).sum((0, 2))
def snippet_sum_dim_list_keepdim(): return f((3, 4, 5)).sum(dim=[0, 1], keepdim=True)
def snippet_sum_int32_is_int64(): return T.tensor([2**30, 2**30, 2**30], dtype=T.int32).sum()
def snippet_sum_int32_dim(): return i32((4, 5)).sum(1)
def snippet_sum_bool(): return T.tensor(data((6, 7), 0, "bool")).sum()
def snippet_sum_bool_dim(): return T.tensor(data((6, 7), 0, "bool")).sum(0)
def snippet_sum_dtype(): return i64((3, 4)).sum(dtype=T.float32)
def snippet_sum_0d_dim(): return T.tensor(2.0).sum(0)
def snippet_sum_negative_tuple(): return f((2, 3, 4)).sum((-1, -3))
def snippet_sum_repeated_dim(): return f((2, 3)).sum((0, 0))
def snippet_sum_empty(): return T.zeros(0, 3).sum(0)
def snippet_mean_tuple(): return f((3, 4, 5)).mean((1, 2))
def snippet_mean_keepdim(): return f((3, 4)).mean(0, keepdim=True)
def snippet_mean_int_refused(): return i64((3,)).mean()
def snippet_mean_int_dtype(): return i64((3, 4)).mean(dtype=T.float64)
def snippet_mean_float64(): return d64((5, 6)).mean(1)
def snippet_prod_all(): return (f((6,)) * 0.5 + 1.0).prod()
def snippet_prod_dim(): return (f((3, 4)) * 0.5 + 1.0).prod(1)
def snippet_prod_keepdim(): return (f((3, 4)) * 0.5 + 1.0).prod(0, keepdim=True)
def snippet_prod_int(): return T.tensor(data((3, 4), 0, "int64", 1, 5)).prod(1)
def snippet_prod_int32(): return T.tensor(data((5,), 0, "int32", 1, 5), dtype=T.int32).prod()
def snippet_prod_empty(): return T.zeros(2, 0).prod(1)


# == cumsum / cumprod ===============================================================================
def snippet_cumsum(): return f((4, 5)).cumsum(1)
def snippet_cumsum_dim0(): return f((4, 5)).cumsum(0)
def snippet_cumsum_int32(): return i32((6,)).cumsum(0)
def snippet_cumsum_bool(): return T.tensor(data((8,), 0, "bool")).cumsum(0)
def snippet_cumsum_dtype(): return i64((6,)).cumsum(0, dtype=T.float64)
def snippet_cumsum_function(): return T.cumsum(d64((2, 3, 4)), dim=-1)
def snippet_cumprod(): return (f((3, 5)) * 0.3 + 1.0).cumprod(1)
def snippet_cumprod_int(): return T.tensor(data((3, 5), 0, "int64", -3, 4)).cumprod(1)


# == var / std / logsumexp / norm ===================================================================
def snippet_var_all(): return f((5, 6)).var()
def snippet_var_dim(): return f((5, 6)).var(1)
def snippet_var_correction0(): return f((5, 6)).var(0, correction=0)
def snippet_var_unbiased_false(): return f((5, 6)).var(1, unbiased=False)
def snippet_var_tuple_keepdim(): return d64((3, 4, 5)).var((0, 2), keepdim=True)
def snippet_std_all(): return f((7,)).std()
def snippet_std_dim(): return f((4, 7)).std(dim=1)
def snippet_std_one_element(): return T.tensor([1.0]).std()
def snippet_std_int_refused(): return i64((4,)).std()
def snippet_logsumexp(): return f((4, 6)).logsumexp(1)
def snippet_logsumexp_large(): return (f((3, 4)) * 100.0 + 500.0).logsumexp(1)
def snippet_logsumexp_tuple(): return T.logsumexp(f((2, 3, 4)), dim=(0, 2), keepdim=True)
def snippet_logsumexp_inf(): return T.tensor([-math.inf, -math.inf]).logsumexp(0)
def snippet_norm(): return f((3, 4)).norm()
def snippet_norm_p1_dim(): return f((3, 4)).norm(p=1, dim=1)
def snippet_norm_inf(): return f((3, 4)).norm(p=float("inf"))
def snippet_norm_dim_keepdim(): return f((3, 4)).norm(dim=0, keepdim=True)
def snippet_norm_p3(): return d64((5,)).norm(p=3)
def snippet_norm_int_refused(): return i64((4,)).norm()


def snippet_norm_gradient_at_zero():
    x = T.zeros(2, 3, requires_grad=True)
    (x.norm() + x.norm(p=3, dim=1).sum() + x.norm(p=1)).backward()
    return x.grad


def snippet_norm_gradient():
    x = f((2, 3)).requires_grad_()
    x.norm(dim=0).sum().backward()
    return x.grad


# == all / any ======================================================================================
def snippet_all_dim(): return T.tensor(data((4, 5), 0, "bool")).all(1)
def snippet_any_tuple(): return T.tensor(data((3, 4, 5), 0, "bool")).any((0, 2))
def snippet_all_float(): return f((3, 4)).all()
def snippet_any_keepdim(): return T.tensor(data((4, 5), 0, "bool")).any(0, keepdim=True)


# == sort / argsort / topk / kthvalue ===============================================================
def snippet_sort(): return T.tensor(distinct((4, 7))).sort()
def snippet_sort_descending_dim0(): return T.tensor(distinct((4, 7))).sort(0, descending=True)
def snippet_sort_stable_ties(): return T.tensor([3, 1, 2, 1, 3, 1]).sort(stable=True)
def snippet_sort_stable_descending(): return T.tensor([3, 1, 2, 1, 3, 1]).sort(descending=True, stable=True)
def snippet_sort_nan(): return T.tensor([1.0, float("nan"), -2.0, 3.0]).sort()
def snippet_sort_nan_descending(): return T.tensor([1.0, float("nan"), -2.0, 3.0]).sort(descending=True)
def snippet_sort_int32(): return T.tensor(data((9,), 0, "int32"), dtype=T.int32).sort(stable=True)
def snippet_sort_0d(): return T.tensor(3.0).sort()
def snippet_argsort(): return T.tensor(distinct((3, 6))).argsort(1)
def snippet_argsort_descending(): return T.argsort(T.tensor(distinct((3, 6))), dim=0, descending=True)
def snippet_topk(): return T.tensor(distinct((3, 8))).topk(3)
def snippet_topk_smallest(): return T.tensor(distinct((3, 8))).topk(2, dim=0, largest=False)
def snippet_topk_function(): v, i = T.topk(T.tensor(distinct((10,))), 4); return v, i
def snippet_topk_k_too_big(): return T.zeros(3).topk(4)
def snippet_kthvalue(): return T.tensor(distinct((4, 7))).kthvalue(3, 1)
def snippet_kthvalue_keepdim(): return T.tensor(distinct((4, 7))).kthvalue(2, 0, keepdim=True)
def snippet_kthvalue_out_of_range(): return T.zeros(3).kthvalue(4)


# == indexing =======================================================================================
def snippet_index_rows(): return f((5, 3))[T.tensor([4, 0, 2])]
def snippet_index_rows_list(): return f((5, 3))[[1, 1, 3]]
def snippet_index_columns(): return f((4, 5))[:, T.tensor([0, 4, 2])]
def snippet_index_rows_slice(): return f((5, 3))[T.tensor([3, 1]), :]
def snippet_index_pairs(): return f((4, 5))[T.tensor([0, 3, 1]), T.tensor([4, 0, 2])]
def snippet_index_negative(): return f((5,))[T.tensor([-1, -5, 0])]
def snippet_index_2d_index(): return f((6, 2))[T.tensor([[0, 5], [2, 3]])]
def snippet_index_split_dims(): return f((2, 3, 4))[T.tensor([0, 1]), :, T.tensor([3, 2])]
def snippet_index_adjacent_dims(): return f((2, 3, 4))[:, T.tensor([0, 2]), T.tensor([1, 3])]
def snippet_index_int_then_tensor(): return f((2, 3, 4))[0, :, T.tensor([0, 1])]
def snippet_index_out_of_range(): return f((5,))[T.tensor([5])]
def snippet_index_float_refused(): return f((5,))[T.tensor([0.5])]
def snippet_index_bool_mask(): x = f((4, 5)); return x[x > 0]
def snippet_index_bool_rows(): return f((4, 3))[T.tensor([True, False, True, False])]
def snippet_setitem_rows(): x = f((4, 3)); x[T.tensor([0, 2])] = 7.0; return x
def snippet_setitem_columns(): x = f((3, 4)); x[:, [1, 3]] = f((3, 2), 1); return x
def snippet_setitem_pairs(): x = T.zeros(3, 3); x[T.tensor([0, 1, 2]), T.tensor([2, 1, 0])] = 1.0; return x
def snippet_setitem_mask(): x = f((3, 4)); x[x < 0] = 0.0; return x
def snippet_setitem_increment(): x = T.zeros(5); x[T.tensor([1, 3])] += 2.0; return x
def snippet_gather(): return f((3, 4)).gather(1, T.tensor(data((3, 2), 0, "int64", 0, 4)))
def snippet_gather_dim0(): return T.gather(f((3, 4)), 0, T.tensor(data((2, 4), 0, "int64", 0, 3)))
def snippet_gather_out_of_range(): return f((3, 4)).gather(1, T.tensor([[4], [0], [1]]))
def snippet_scatter(): return T.zeros(3, 5).scatter(1, T.tensor([[0, 4], [1, 2], [3, 0]]), f((3, 2)))
def snippet_scatter_value(): return T.zeros(3, 5).scatter(1, T.tensor([[0], [2], [4]]), 1.5)
def snippet_scatter_add(): return T.zeros(2, 4).scatter_add(1, T.tensor([[0, 0, 3], [1, 1, 1]]), T.ones(2, 3))
def snippet_scatter_add_int(): return T.zeros(5, dtype=T.int64).scatter_add(0, T.tensor([0, 0, 4]), T.tensor([1, 2, 3]))
def snippet_scatter_inplace(): x = T.zeros(2, 3); x.scatter_(1, T.tensor([[2], [0]]), 5.0); return x
def snippet_index_select(): return f((4, 5)).index_select(1, T.tensor([4, 0, 0]))
def snippet_index_select_rows(): return T.index_select(f((4, 5)), 0, T.tensor([3, 1]))
def snippet_index_select_out_of_range(): return f((4, 5)).index_select(0, T.tensor([4]))
def snippet_masked_fill(): x = f((3, 4)); return x.masked_fill(x > 0, -1.0)
def snippet_masked_fill_broadcast(): return f((3, 4)).masked_fill(T.tensor([True, False, False, True]), 0.0)
def snippet_masked_fill_int(): return i64((5,)).masked_fill(T.tensor([True, False, True, False, True]), 9)
def snippet_nonzero(): return T.tensor(data((4, 5), 0, "bool")).nonzero()
def snippet_nonzero_float(): return T.tensor([0.0, 1.5, 0.0, -2.0]).nonzero()
def snippet_nonzero_tuple(): return T.tensor(data((3, 4), 0, "bool")).nonzero(as_tuple=True)
def snippet_nonzero_none(): return T.zeros(2, 3).nonzero()
def snippet_softmax_0d(): return T.tensor(2.0).softmax(0)

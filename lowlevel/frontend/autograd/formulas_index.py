"""The backward formulas of gather, scatter, scatter_add, cumsum and cumprod; argsort (and
argmax / argmin) give indices, which have no gradient.

Everything built on them inherits its gradient: max(dim) and min(dim) are argmax + gather
(the gradient goes to the index they return, as PyTorch's), sort, topk and kthvalue are
argsort + gather, prod is the last element of cumprod, t[idx] is a gather.
"""
import numpy as np

from ...dispatch import call
from .. import dtypes as dt
from .. import ops
from ..creation import tensor, zeros
from .formulas import NOT_DIFFERENTIABLE, formula

NOT_DIFFERENTIABLE.update({"argsort", "argmax", "argmin"})


# The index is read from the call's arguments (node.meta), not saved: only its values matter,
# and x's own values are never needed (only its shape), so an in-place write to x after the
# op (as x[idx] = v makes) does not invalidate the gradient.
def _index(node):
    return node.meta["args"][1], node.meta["kwargs"]["dim"]


@formula("gather")
def gather(node, g):
    idx, dim = _index(node)
    return call("scatter_add", zeros(node.inputs_meta[0][0], dtype=g.dtype, device=g.device), idx, g, dim=dim), None


@formula("scatter_add")
def scatter_add(node, g):
    idx, dim = _index(node)
    return g, None, call("gather", g, idx, dim=dim)


@formula("scatter")
def scatter(node, g):
    # the overwritten positions of x got src's values: x's gradient is zero there
    idx, dim = _index(node)
    blank = zeros(node.inputs_meta[2][0], dtype=g.dtype, device=g.device)
    return call("scatter", g, idx, blank, dim=dim), None, call("gather", g, idx, dim=dim)


def flip(t, dim: int):
    """t reversed along dim (a gather with the positions n-1, ..., 0)."""
    n = t.shape[dim]
    shape = [1] * t.ndim
    shape[dim] = n
    backwards = tensor(np.arange(n - 1, -1, -1), dtype=dt.int64, device=t.device)
    return call("gather", t, backwards.reshape(shape).expand(t.shape), dim=dim)


def reverse_cumsum(g, dim: int):
    """out[i] = g[i] + g[i+1] + ... along dim: cumsum's adjoint."""
    return flip(call("cumsum", flip(g, dim), dim=dim), dim)


@formula("cumsum")
def cumsum(node, g):
    return (reverse_cumsum(g, node.meta["kwargs"]["dim"]),)


@formula("cumprod", save="both")
def cumprod(node, g):
    """d out[j] / d x[i] = prod_{k <= j, k != i} x[k] for j >= i. Without zeros in x that is
    out[j] / x[i]; with zeros the products are formed as written (O(n^2) in the dim's size)."""
    x, out = node.saved()
    dim = node.meta["kwargs"]["dim"]
    if x.numel() == 0:
        return (zeros(x.shape, dtype=g.dtype, device=g.device),)
    if not bool(ops.any(ops.eq(x, 0.0))):
        return (reverse_cumsum(g * out, dim) / x,)
    n, last = x.shape[dim], x.ndim - 1
    xs, gs = x.transpose(dim, last), g.transpose(dim, last)              # dim moved last: (..., n)
    diagonal = tensor(np.eye(n, dtype=bool), device=x.device)           # (i, k): k == i
    without_i = ops.where(diagonal, 1.0, xs.reshape(*xs.shape[:-1], 1, n).expand(*xs.shape[:-1], n, n))
    partial = call("cumprod", without_i, dim=last + 1)                  # (..., i, j): prod over k <= j, k != i
    later = tensor(np.triu(np.ones((n, n), dtype=bool)), device=x.device)    # (i, j): j >= i
    terms = ops.where(later, partial, 0.0) * gs.reshape(*gs.shape[:-1], 1, n)
    return (ops.sum(terms, last + 1).transpose(dim, last),)

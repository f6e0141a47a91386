"""The CPU backend's indexing, sorting and scans, through numpy (the CUDA key's are in
cuda/indexing.py; the frontend, frontend/indexing.py and frontend/reductions.py, checks
every index and shape before either runs):

    gather(x, idx, dim)            np.take_along_axis
    scatter(x, idx, src, dim)      a copy of x, then np.put_along_axis
    scatter_add(x, idx, src, dim)  a copy of x, then np.add.at (equal indices all add)
    argsort(x, dim, descending)    a stable sort; descending keeps equal elements in order
    cumsum(x, dim), cumprod(x, dim)  float16 accumulates in float32, as the CUDA kernels do
"""
import numpy as np

from ..dispatch import CPU, register_kernel
from ..frontend import dtypes as dt
from ..frontend.creation import from_numpy_values
from .cpu import result, values


def _positions(idx: np.ndarray, dim: int) -> tuple:
    """The full index of every element of idx's shape, with idx itself along dim."""
    grid = list(np.indices(idx.shape, sparse=True))
    grid[dim] = idx
    return tuple(grid)


@register_kernel("gather", CPU)
def gather(x, idx, dim):
    return result(np.take_along_axis(values(x), values(idx), axis=dim), x)


@register_kernel("scatter", CPU)
def scatter(x, idx, src, dim):
    out = values(x).copy()
    out[_positions(values(idx), dim)] = np.broadcast_to(values(src), idx.shape)
    return result(out, x)


@register_kernel("scatter_add", CPU)
def scatter_add(x, idx, src, dim):
    out = values(x).astype(np.float32 if x.dtype is dt.float16 else values(x).dtype)
    np.add.at(out, _positions(values(idx), dim), np.broadcast_to(values(src), idx.shape).astype(out.dtype))
    return result(out, x)


@register_kernel("argsort", CPU)
def argsort(x, dim, descending):
    v = values(x)
    if not descending:
        order = np.argsort(v, axis=dim, kind="stable")
    else:
        # the ascending stable order of the reversed row, read backwards: largest first (NaN
        # first, as PyTorch), and equal elements in their original order
        n = v.shape[dim]
        order = (n - 1) - np.flip(np.argsort(np.flip(v, axis=dim), axis=dim, kind="stable"), axis=dim)
    return from_numpy_values(order.astype(np.int64), dt.int64, x.device)


def _scan(fn):
    def kernel(x, dim):
        v = values(x)
        acc = np.float32 if x.dtype is dt.float16 else v.dtype
        with np.errstate(all="ignore"):
            return result(fn(v, axis=dim, dtype=acc), x)
    kernel.__name__ = kernel.__qualname__ = fn.__name__
    return kernel


register_kernel("cumsum", CPU, _scan(np.cumsum), name="cumsum")
register_kernel("cumprod", CPU, _scan(np.cumprod), name="cumprod")

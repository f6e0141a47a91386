"""Indexing with tensors, as PyTorch users write it:

    gather(x, dim, index)  scatter(x, dim, index, src | value)  scatter_add(x, dim, index, src)
    index_select(x, dim, index)  masked_fill(x, mask, value)  nonzero(x, as_tuple=False)
    x[idx], x[idx, :], x[:, idx], x[i, j], x[[0, 2]]   integer-array (advanced) indexing
    x[idx] = v                                          and its assignment

gather, scatter and scatter_add have kernels on every backend (backends/cpu_indexing.py,
backends/cuda/indexing.py); index_select, masked_fill and nonzero are decompositions
registered with the dispatcher (explain() says so), and x[idx] is an index_select of x
viewed with the indexed dims first and merged (the flat position of each index tuple,
computed with int64 tensor ops), as numpy and PyTorch define it: the result's indexed
dims replace the indexed ones where those are adjacent, else they come first.

Every index is checked against its dimension's size before a kernel runs: an IndexError
that names the index and the size, as PyTorch's. On CUDA that check reads the smallest and
largest index back (one synchronising copy, like t[mask]'s count): PyTorch checks inside
its kernels (a device-side assert that breaks the context); lowlevel's kernels trap too,
but a user never gets there.
"""
import builtins

import numpy as np

from ..cuda.graph import refuse_while_capturing
from ..dispatch import call, register_decomposition
from . import dtypes as dt
from . import ops
from .creation import arange, full
from .errors import DTypeError, ShapeError
from .inplace import copy_
from .joining import stack
from .tensor import Tensor

class IndexOutOfRange(IndexError, RuntimeError):
    """An index beyond its dimension: IndexError (as x[idx] raises it in PyTorch) and
    RuntimeError (as gather and scatter raise it)."""


def check_bounds(op: str, index: Tensor, size: int, dim: int, negative: bool = False) -> None:
    """Every element of index in [0, size) ([-size, size) where negative indices count from
    the end), else IndexOutOfRange naming the first offending extreme and the size."""
    if index.numel() == 0:
        return
    if index.device.type == "cuda":
        refuse_while_capturing(f"{op} with a tensor index", "its indices are checked on the host first")
    low, high = stack([ops.min(index), ops.max(index)]).tolist()       # one read back from a device
    bad = high if high >= size else low if low < (-size if negative else 0) else None
    if bad is not None:
        raise IndexOutOfRange(f"{op}: index {bad} is out of bounds for dimension {dim} with size {size}")


def _index_tensor(op: str, index, device) -> Tensor:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: index must be a tensor, got {type(index).__name__}")
    if index.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}(): Expected dtype int64 for index, got {index.dtype.name}")
    if index.device != device:
        raise ShapeError(f"{op}: the index is on {index.device}, the tensor on {device}")
    return index.to(dt.int64)


def _dim(op: str, dim, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    top = max(ndim, 1)
    if not -top <= dim < top:
        raise IndexError(f"{op}: dim {dim} is out of range (expected to be in range of [{-top}, {top - 1}])")
    return int(dim) % top


def _fit(op: str, x: Tensor, index: Tensor, dim: int, what: str = "self") -> Tensor:
    """x cut to index's sizes in every dim but `dim` (PyTorch lets index be smaller there)."""
    if index.ndim != x.ndim:
        raise ShapeError(f"{op}(): Index tensor must have the same number of dimensions as {what} tensor")
    for d in range(x.ndim):
        if d != dim and index.shape[d] > x.shape[d]:
            raise ShapeError(f"{op}(): Size does not match at dimension {d} expected index {list(index.shape)} "
                             f"to be smaller than {what} {list(x.shape)} apart from dimension {dim}")
    cut = tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))
    return x if x.shape == tuple(index.shape[d] if d != dim else x.shape[d] for d in range(x.ndim)) else x[cut]


def gather(x, dim, index) -> Tensor:
    """out[i][j][k] = x[i][index[i][j][k]][k] for dim 1 (and so on): the shape of index."""
    if not isinstance(x, Tensor):
        raise TypeError(f"gather: expected a tensor, got {type(x).__name__}")
    index = _index_tensor("gather", index, x.device)
    d = _dim("gather", dim, x.ndim)
    if x.ndim == 0:
        return gather(x.reshape(1), 0, index.reshape(1)).reshape(())
    source = _fit("gather", x, index, d)
    check_bounds("gather", index, x.shape[d], d)
    return call("gather", source, index, dim=d)


def _scatter(op: str, x, dim, index, src) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    index = _index_tensor(op, index, x.device)
    if not isinstance(src, Tensor):
        src = full(index.shape, src, dtype=x.dtype, device=x.device)
    if src.dtype is not x.dtype:
        raise DTypeError(f"{op}(): Expected self.dtype to be equal to src.dtype ({x.dtype.name} and {src.dtype.name})")
    d = _dim(op, dim, x.ndim)
    if x.ndim == 0:
        return _scatter(op, x.reshape(1), 0, index.reshape(1), src.reshape(1)).reshape(())
    if index.numel() == 0:
        return ops.clone(x)
    if src.ndim != index.ndim or builtins.any(s > t for s, t in zip(index.shape, src.shape)):
        raise ShapeError(f"{op}(): Expected index {list(index.shape)} to be smaller than src {list(src.shape)} "
                         f"(with as many dimensions)")
    if src.shape != index.shape:
        src = src[tuple(slice(0, s) for s in index.shape)]
    target = _fit(op, x, index, d)
    check_bounds(op, index, x.shape[d], d)
    if target is x:
        return call(op, x, index, src, dim=d)
    out = ops.clone(x)                 # index covers part of x: scatter into that part of a copy
    cut = tuple(slice(None) if k == d else slice(0, index.shape[k]) for k in range(x.ndim))
    out[cut] = call(op, target, index, src, dim=d)
    return out


def scatter(x, dim, index, src=None, value=None) -> Tensor:
    """A copy of x with src (or the number value) written where index points along dim."""
    return _scatter("scatter", x, dim, index, value if src is None else src)


def scatter_add(x, dim, index, src) -> Tensor:
    """A copy of x with src added where index points along dim (equal indices all add)."""
    return _scatter("scatter_add", x, dim, index, src)


def index_select(x, dim, index) -> Tensor:
    """x's slices along dim at the positions of the 1-D index, in its order."""
    if not isinstance(x, Tensor):
        raise TypeError(f"index_select: expected a tensor, got {type(x).__name__}")
    index = _index_tensor("index_select", index, x.device)
    if index.ndim > 1:
        raise ShapeError("index_select(): Index is supposed to be a vector")
    d = _dim("index_select", dim, x.ndim)
    check_bounds("index_select", index, x.shape[d] if x.ndim else 1, d)
    return call("index_select", x, index.reshape(-1), dim=d)


def _index_select(x: Tensor, index: Tensor, dim: int) -> Tensor:
    if x.ndim == 0:                    # a 0-d x is one element: index [0] picks it
        out = call("gather", x.reshape(1), index, dim=0)
        return out.reshape(()) if out.numel() == 1 else out
    shape = [index.shape[0] if d == dim else s for d, s in enumerate(x.shape)]
    spread = index.reshape([-1 if d == dim else 1 for d in range(x.ndim)]).expand(shape)
    return call("gather", x, spread, dim=dim)


def masked_fill(x, mask, value) -> Tensor:
    """x with value (a number or a 0-d tensor) where the bool mask (broadcast) is true."""
    if not isinstance(x, Tensor) or not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        raise DTypeError(f"masked_fill: needs a tensor and a bool mask, got {type(x).__name__} and "
                         f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                         f"{value.ndim} dimension(s).")
    if not isinstance(value, Tensor):
        value = full((), value, dtype=x.dtype, device=x.device)
    return call("masked_fill", x, mask, value.to(x.dtype))


def _masked_fill(x: Tensor, mask: Tensor, value: Tensor) -> Tensor:
    return ops.where(mask, value, x)


def nonzero(x, as_tuple=False):
    """The positions of the nonzero elements, in row-major order: a (count, ndim) int64
    tensor, or (as_tuple) one 1-D tensor per dim. The count is read back from the device."""
    if not isinstance(x, Tensor):
        raise TypeError(f"nonzero: expected a tensor, got {type(x).__name__}")
    if x.device.type == "cuda":
        refuse_while_capturing("nonzero", "the size of its result is the count of nonzero elements")
    coords = call("nonzero", x.reshape(1) if x.ndim == 0 else x)
    if as_tuple:
        return tuple(coords[:, d] for d in range(coords.shape[1]))
    return coords[:, :0] if x.ndim == 0 else coords


def _nonzero(x: Tensor) -> Tensor:
    truth = x if x.dtype.name == "bool" else ops.ne(x, 0)
    per_dim = []
    for d, size in enumerate(x.shape):
        shape = [size if k == d else 1 for k in range(x.ndim)]
        per_dim.append(ops.masked_select(arange(size, dtype=dt.int64, device=x.device).reshape(shape), truth))
    return stack(per_dim, 1)


for _op, _fn in {"index_select": _index_select, "masked_fill": _masked_fill, "nonzero": _nonzero}.items():
    register_decomposition(_op, _fn)


def _in_place(op):
    def method(self, *args, **kwargs):
        return copy_(self, op(self, *args, **kwargs))
    method.__name__ = f"{op.__name__}_"
    return method


_METHODS = {"gather": gather, "scatter": scatter, "scatter_add": scatter_add, "index_select": index_select,
            "masked_fill": masked_fill, "nonzero": nonzero}
for _name, _method in _METHODS.items():
    setattr(Tensor, _name, _method)
    if _name in ("scatter", "scatter_add", "masked_fill"):
        setattr(Tensor, _name + "_", _in_place(_method))

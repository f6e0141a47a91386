"""Reductions as PyTorch users call them: over a dim, a tuple of dims or everything, with
keepdim and dtype=, and the ops that return (values, indices).

    sum mean (dim tuple, dtype=; integer and bool sums in int64, integer means refused)
    max min (x.max() a 0-d tensor; x.max(dim) a return_types.max (values, indices);
             x.max(other) the elementwise maximum)
    amax amin prod cumsum cumprod std var logsumexp norm all any
    sort argsort topk kthvalue
    softmax (ops.softmax, and a 0-d tensor's: 1)

What the backends have kernels for: sum, mean, max, argmax, argmin (ops.py) and argsort,
gather, cumsum, cumprod (backends/cpu_indexing.py, backends/cuda/indexing.py). The rest are
decompositions registered with the dispatcher (`lowlevel.explain("topk", x)` says so), so
every one runs on every backend and records its gradient through the ops it is made of:
max(dim) = argmax + gather (the gradient goes to the returned index, as PyTorch's), sort =
argsort + gather, prod = the last of cumprod, var = mean((x - mean)^2) * n / (n - correction).

A reduction over several dims moves them last and merges them into one (a copy when the
layout needs one), then reduces that one dim: one kernel, and max's ties share their
gradient across all the reduced elements, as PyTorch's amax.
"""
import builtins
import math

from ..dispatch import call, register_decomposition
from . import dtypes as dt
from . import ops
from . import return_types
from .creation import empty, full
from .dtypes import as_dtype
from .errors import DTypeError, ShapeError
from .tensor import Tensor



def refuse(message: str, kind=ValueError):
    """Raise PyTorch's RuntimeError (a DTypeError where lowlevel raised TypeError before)."""
    raise (DTypeError if kind is TypeError else ShapeError)(message)


def _tensor(op: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    return x


def one_dim(op: str, dim, ndim: int) -> int:
    """dim wrapped into [0, ndim); a 0-d tensor takes 0 and -1, as PyTorch's."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    top = builtins.max(ndim, 1)
    if not -top <= dim < top:
        raise IndexError(f"{op}: dim {dim} is out of range (expected to be in range of [{-top}, {top - 1}])")
    return dim % top


def dims_of(op: str, dim, ndim: int):
    """A sorted tuple of wrapped dims, or None for all of them (dim None or ())."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        wrapped = [one_dim(op, d, ndim) for d in dim]
        for d in wrapped:
            if wrapped.count(d) > 1:
                refuse(f"{op}: dim {d} appears multiple times in the list of dims")
        return tuple(sorted(wrapped)) or None
    return (one_dim(op, dim, ndim),)


def _over(x: Tensor, dims, keepdim: bool, reduce) -> Tensor:
    """reduce(t, dim, keepdim) (dim an int or None: everything) over the dims of x."""
    if dims is None or x.ndim == 0 or len(dims) == x.ndim:
        out = reduce(x, None, False)
        return out.reshape([1] * x.ndim) if keepdim else out
    if len(dims) == 1:
        return reduce(x, dims[0], keepdim)
    kept = [d for d in range(x.ndim) if d not in dims]
    merged = math.prod(x.shape[d] for d in dims)
    y = x.permute(kept + list(dims)).reshape(*[x.shape[d] for d in kept], merged)
    out = reduce(y, len(kept), False)
    return out.reshape([1 if d in dims else s for d, s in enumerate(x.shape)]) if keepdim else out


def _count(x: Tensor, dims) -> int:
    return x.numel() if dims is None else math.prod(x.shape[d] for d in dims)


# ---- sum, mean ------------------------------------------------------------------------------------------
def sum(x, dim=None, keepdim=False, dtype=None) -> Tensor:        # noqa: A001 - the op's name
    """The sum over dim (an int, a tuple, or None: everything). Integers and bool sum in
    int64, as in PyTorch (an int32 sum never wraps at 2^31); dtype= casts first."""
    x = _tensor("sum", x)
    if dtype is not None:
        x = x.to(as_dtype(dtype))
    elif x.dtype.name in ("bool", "int32"):
        x = x.to(dt.int64)
    return _over(x, dims_of("sum", dim, x.ndim), keepdim, ops.sum)


def mean(x, dim=None, keepdim=False, dtype=None) -> Tensor:
    x = _tensor("mean", x)
    if dtype is not None:
        x = x.to(as_dtype(dtype))
    if not x.dtype.is_float:
        refuse(f"mean(): could not infer output dtype. Input dtype must be either a floating point or complex "
               f"dtype. Got: {x.dtype.name}", TypeError)
    return _over(x, dims_of("mean", dim, x.ndim), keepdim, ops.mean)


# ---- max, min, amax, amin ---------------------------------------------------------------------------------
def _extreme(op: str, x, dim, keepdim, other):
    x = _tensor(op, x)
    if isinstance(dim, Tensor) or isinstance(other, Tensor):
        return (ops.maximum if op == "max" else ops.minimum)(x, dim if other is None else other)
    if dim is None:
        if x.numel() == 0:
            refuse(f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                   f"reduction dim with the 'dim' argument.")
        out = ops.max(x) if op == "max" else ops.min(x)
        return out.reshape([1] * x.ndim) if keepdim else out
    d = one_dim(op, dim, x.ndim)
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    return call(f"{op}.dim", x, dim=d, keepdim=bool(keepdim))


def max(x, dim=None, keepdim=False, *, other=None):       # noqa: A001
    """x.max(): the largest value, a 0-d tensor; x.max(dim): return_types.max (values,
    indices of the first largest; a NaN counts as the largest); x.max(other): elementwise."""
    return _extreme("max", x, dim, keepdim, other)


def min(x, dim=None, keepdim=False, *, other=None):       # noqa: A001
    return _extreme("min", x, dim, keepdim, other)


def _values_and_indices(kind: str, arg_op: str):
    def decomposition(x: Tensor, dim: int, keepdim: bool):
        flat = x.reshape(1) if x.ndim == 0 else x
        out_shape = [1 if d == dim else s for d, s in enumerate(flat.shape)]
        if flat.numel() == 0:
            indices = empty(out_shape, dtype=dt.int64, device=x.device)
        else:
            indices = call(arg_op, flat, dim=dim, keepdim=True)
        values = call("gather", flat, indices, dim=dim)
        if x.ndim == 0 or not keepdim:
            shape = [s for d, s in enumerate(flat.shape) if d != dim] if x.ndim else []
            values, indices = values.reshape(shape), indices.reshape(shape)
        return getattr(return_types, kind)(values, indices)
    decomposition.__name__ = decomposition.__qualname__ = f"{kind}_as_{arg_op}_and_gather"
    return decomposition


def amax(x, dim=(), keepdim=False) -> Tensor:
    return _amax_amin("amax", x, dim, keepdim)


def amin(x, dim=(), keepdim=False) -> Tensor:
    return _amax_amin("amin", x, dim, keepdim)


def _amax_amin(op: str, x, dim, keepdim) -> Tensor:
    """The largest (smallest) value over dims; the gradient is shared among ties."""
    x = _tensor(op, x)
    dims = dims_of(op, dim, x.ndim)
    for d in (range(x.ndim) if dims is None else dims):
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size.")
    if x.numel() == 0:      # nothing reduced is empty, so the result is: of the kept shape
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)] if keepdim else \
            [s for d, s in enumerate(x.shape) if d not in dims]
        return empty(shape, dtype=x.dtype, device=x.device)
    return _over(x, dims, keepdim, ops.max if op == "amax" else ops.min)


# ---- prod, cumsum, cumprod --------------------------------------------------------------------------------
def _accumulating(op: str, x, dtype) -> Tensor:
    x = _tensor(op, x)
    if dtype is not None:
        return x.to(as_dtype(dtype))
    return x.to(dt.int64) if x.dtype.name in ("bool", "int32") else x


def cumsum(x, dim, dtype=None) -> Tensor:
    """Running sums along dim (integers and bool in int64, as in PyTorch)."""
    return _scan("cumsum", x, dim, dtype)


def cumprod(x, dim, dtype=None) -> Tensor:
    return _scan("cumprod", x, dim, dtype)


def _scan(op: str, x, dim, dtype) -> Tensor:
    x = _accumulating(op, x, dtype)
    d = one_dim(op, dim, x.ndim)
    if x.ndim == 0:
        return call(op, x.reshape(1), dim=0).reshape(())
    return call(op, x, dim=d)


def prod(x, dim=None, keepdim=False, dtype=None) -> Tensor:
    """The product over dim (an int) or everything; integers and bool in int64."""
    x = _accumulating("prod", x, dtype)
    d = None if dim is None else one_dim("prod", dim, x.ndim)
    return call("prod", x, dim=d, keepdim=bool(keepdim))


def _prod(x: Tensor, dim, keepdim: bool) -> Tensor:
    """The last element of cumprod along dim (an empty product is 1)."""
    flat = x.reshape(-1) if dim is None or x.ndim == 0 else x
    axis = 0 if dim is None or x.ndim == 0 else dim
    if flat.shape[axis] == 0:
        shape = [1 if d == axis else s for d, s in enumerate(flat.shape)]
        out = full(shape, 1, dtype=x.dtype, device=x.device)
    else:
        last = (slice(None),) * axis + (slice(flat.shape[axis] - 1, None),)
        out = call("cumprod", flat, dim=axis)[last]
    if dim is None or x.ndim == 0:
        return out.reshape([1] * x.ndim if keepdim else [])
    return out if keepdim else out.reshape([s for d, s in enumerate(x.shape) if d != dim])


# ---- var, std, logsumexp, norm ---------------------------------------------------------------------------
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None) -> Tensor:
    """The variance over dim (int, tuple or None): sum((x - mean)^2) / (n - correction);
    correction defaults to 1 (unbiased=False means 0), as in PyTorch."""
    return _moment("var", x, dim, unbiased, keepdim, correction)


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None) -> Tensor:
    return _moment("std", x, dim, unbiased, keepdim, correction)


def _moment(op: str, x, dim, unbiased, keepdim, correction) -> Tensor:
    x = _tensor(op, x)
    if isinstance(dim, bool):               # x.var(False): the old (unbiased) form
        dim, unbiased = None, dim
    if not x.dtype.is_float:
        refuse("std and var only support floating point and complex dtypes", TypeError)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return call(op, x, dim=dims_of(op, dim, x.ndim), correction=correction, keepdim=bool(keepdim))


def _var(x: Tensor, dim, correction, keepdim: bool) -> Tensor:
    centred = x - _over(x, dim, True, ops.mean)
    total = _over(centred * centred, dim, keepdim, ops.sum)
    return total / float(builtins.max(0, _count(x, dim) - correction))


def _std(x: Tensor, dim, correction, keepdim: bool) -> Tensor:
    return ops.sqrt(_var(x, dim, correction, keepdim))


def logsumexp(x, dim, keepdim=False) -> Tensor:
    """log(sum(exp(x))) over dim, computed as m + log(sum(exp(x - m))) with m the max (an
    infinite max taken as 0), so large values do not overflow. Integers give float32."""
    x = _tensor("logsumexp", x)
    if not x.dtype.is_float:
        x = x.to(dt.float32)
    return call("logsumexp", x, dim=dims_of("logsumexp", dim, x.ndim), keepdim=bool(keepdim))


def _logsumexp(x: Tensor, dim, keepdim: bool) -> Tensor:
    if x.numel() == 0:
        return ops.log(_over(x, dim, keepdim, ops.sum))         # log(0) = -inf, as PyTorch's
    m = _over(x, dim, True, ops.max).detach()
    m = ops.where(ops.eq(ops.abs(m), math.inf), 0.0, m)
    out = ops.log(_over(ops.exp(x - m), dim, True, ops.sum)) + m
    if keepdim:
        return out
    return out.reshape([s for d, s in enumerate(x.shape) if dim is not None and d not in dim])


def norm(x, p="fro", dim=None, keepdim=False, dtype=None) -> Tensor:
    """The vector p-norm over dim (int, tuple or None): p = 2 ("fro", the default), 1, inf,
    -inf, 0 (the count of nonzeros) or any other number; floating-point tensors only."""
    x = _tensor("norm", x)
    if dtype is not None:
        x = x.to(as_dtype(dtype))
    if not x.dtype.is_float:
        refuse(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {x.dtype.name}",
               TypeError)
    p = 2.0 if p in ("fro", None) else p
    if not isinstance(p, (int, float)) or isinstance(p, bool):
        raise TypeError(f"norm: p must be a number or 'fro', got {p!r}")
    return call("norm", x, p=float(p), dim=dims_of("norm", dim, x.ndim), keepdim=bool(keepdim))


def _norm(x: Tensor, p: float, dim, keepdim: bool) -> Tensor:
    size = ops.abs(x)
    if p == math.inf or p == -math.inf:
        if x.numel() == 0:
            return _amax_amin("amax", x, dim or (), keepdim)        # refused as PyTorch refuses
        return _over(size, dim, keepdim, ops.max if p > 0 else ops.min)
    if p == 0:
        return _over(ops.ne(x, 0.0).to(x.dtype), dim, keepdim, ops.sum)
    if p == 1:
        return _over(size, dim, keepdim, ops.sum)
    total = _over(x * x if p == 2 else ops.pow(size, p), dim, keepdim, ops.sum)
    # total^(1/p) has an infinite derivative at 0: taken of 1 there and replaced by 0, so the
    # gradient of a zero norm is 0 (PyTorch's subgradient), never inf * 0 = NaN
    zero = ops.eq(total, 0.0)
    safe = ops.where(zero, 1.0, total)
    root = ops.sqrt(safe) if p == 2 else ops.pow(safe, 1.0 / p)
    return ops.where(zero, 0.0, root)


def all(x, dim=None, keepdim=False) -> Tensor:      # noqa: A001
    x = _tensor("all", x)
    return _over(x, dims_of("all", dim, x.ndim), keepdim, ops.all)


def any(x, dim=None, keepdim=False) -> Tensor:      # noqa: A001
    x = _tensor("any", x)
    return _over(x, dims_of("any", dim, x.ndim), keepdim, ops.any)


# ---- sort, argsort, topk, kthvalue ---------------------------------------------------------------------
def argsort(x, dim=-1, descending=False, stable=False) -> Tensor:
    """The int64 indices that sort x along dim; always stable (equal elements keep their
    order, descending too); NaN sorts as the largest value, as in PyTorch."""
    x = _tensor("argsort", x)
    d = one_dim("argsort", dim, x.ndim)
    if x.ndim == 0:
        return call("argsort", x.reshape(1), dim=0, descending=bool(descending)).reshape(())
    return call("argsort", x, dim=d, descending=bool(descending))


def sort(x, dim=-1, descending=False, stable=False):
    """return_types.sort (values, indices) along dim, stable."""
    x = _tensor("sort", x)
    return call("sort", x, dim=one_dim("sort", dim, x.ndim), descending=bool(descending))


def _sort(x: Tensor, dim: int, descending: bool):
    indices = argsort(x, dim, descending)
    flat = x.reshape(1) if x.ndim == 0 else x
    values = call("gather", flat, indices.reshape(flat.shape), dim=dim).reshape(x.shape)
    return return_types.sort(values, indices)


def topk(x, k, dim=-1, largest=True, sorted=True):         # noqa: A002 - PyTorch's keyword
    """return_types.topk: the k largest (or smallest) along dim, in order."""
    x = _tensor("topk", x)
    d = one_dim("topk", dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= size:
        refuse("selected index k out of range")
    return call("topk", x, k=k, dim=d, largest=bool(largest))


def _first_k(x: Tensor, k: int, dim: int, descending: bool, kind):
    flat = x.reshape(1) if x.ndim == 0 else x
    order = argsort(flat, dim, descending)
    indices = order[(slice(None),) * dim + (slice(0, k),)]
    values = call("gather", flat, indices, dim=dim)
    if x.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return kind(values, indices)


def _topk(x: Tensor, k: int, dim: int, largest: bool):
    return _first_k(x, k, dim, largest, return_types.topk)


def kthvalue(x, k, dim=-1, keepdim=False):
    """return_types.kthvalue: the k-th smallest (k from 1) along dim, and its index."""
    x = _tensor("kthvalue", x)
    d = one_dim("kthvalue", dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= size:
        refuse(f"kthvalue(): selected number k out of range for dimension {d}")
    return call("kthvalue", x, k=k, dim=d, keepdim=bool(keepdim))


def _kthvalue(x: Tensor, k: int, dim: int, keepdim: bool):
    flat = x.reshape(1) if x.ndim == 0 else x
    order = argsort(flat, dim, False)
    indices = order[(slice(None),) * dim + (slice(k - 1, k),)]
    values = call("gather", flat, indices, dim=dim)
    if x.ndim == 0 or not keepdim:
        shape = [s for d, s in enumerate(x.shape) if d != dim]
        values, indices = values.reshape(shape), indices.reshape(shape)
    return return_types.kthvalue(values, indices)


_DECOMPOSITIONS = {
    "max.dim": _values_and_indices("max", "argmax"), "min.dim": _values_and_indices("min", "argmin"),
    "prod": _prod, "var": _var, "std": _std, "logsumexp": _logsumexp, "norm": _norm,
    "sort": _sort, "topk": _topk, "kthvalue": _kthvalue,
}
for _op, _fn in _DECOMPOSITIONS.items():
    register_decomposition(_op, _fn)


def softmax(x, dim=-1) -> Tensor:
    """ops.softmax, where a 0-d tensor is one element (softmax of it is 1, as PyTorch's)."""
    if isinstance(x, Tensor) and x.ndim == 0 and dim in (0, -1):
        return ops.softmax(x.reshape(1), 0).reshape(())
    return ops.softmax(x, dim)


_METHODS = {
    "sum": sum, "mean": mean, "max": max, "min": min, "amax": amax, "amin": amin, "prod": prod,
    "cumsum": cumsum, "cumprod": cumprod, "var": var, "std": std, "logsumexp": logsumexp, "norm": norm,
    "all": all, "any": any, "argsort": argsort, "sort": sort, "topk": topk, "kthvalue": kthvalue,
    "softmax": softmax,
}
for _name, _method in _METHODS.items():
    setattr(Tensor, _name, _method)

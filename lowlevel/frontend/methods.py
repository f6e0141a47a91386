"""Layer 1: the Tensor methods and operators a PyTorch user's first hundred lines reach for,
beside those ops.py, inplace.py and joining.py attach.

    dtypes and metadata   long int bool type_as, dim ndimension nelement stride element_size
                          is_floating_point is_cuda, t, new_zeros new_ones new_full
    method forms          add sub (alpha=), mul div (rounding_mode=), matmul neg negative,
                          and every op of math_ops.py as a method
    operators             & | ^ ~ and their reflected forms, number ** tensor (__rpow__),
                          &= |= ^= in place
    pieces                chunk, split (a size, or a list of sizes), narrow: views
    in place              relu_
    autograd              retain_grad (and .grad of a non-leaf after backward), retains_grad
    conversions           to(dtype), to(device), to(device, dtype), to(other), to(dtype=...,
                          device=..., copy=...); f"{t:.1f}" of a 0-d tensor (__format__)

Every method runs ops that are dispatched (or views), so each works on every backend and
autograd records it. The module-level add and sub (lowlevel.add) take alpha= too.
"""
import math

import numpy as np

from . import dtypes as dt
from . import math_ops, ops
from .autograd import graph
from .creation import full, scalar_tensor
from .device import Device
from .dtypes import DType, as_dtype, is_dtype_name
from .tensor import Tensor


# ---- dtypes and metadata ------------------------------------------------------------------------
def stride(self: Tensor, dim=None):
    """The strides (in elements), or dim's."""
    return self.strides if dim is None else self.strides[dim]


def t(self: Tensor) -> Tensor:
    """The transpose of a matrix (a tensor of fewer than 2 dimensions is itself), as a view."""
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.transpose(0, 1) if self.ndim == 2 else self[...]


def _new(fill):
    def method(self: Tensor, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return full(shape, fill, dtype=self.dtype if dtype is None else dtype,
                    device=self.device if device is None else device, requires_grad=requires_grad)
    return method


def new_full(self: Tensor, size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    return full(tuple(size), fill_value, dtype=self.dtype if dtype is None else dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


# ---- method forms with PyTorch's keywords -------------------------------------------------------------
def add(input, other, *, alpha=1) -> Tensor:        # noqa: A002 - PyTorch's names
    """input + alpha * other."""
    return ops.add(input, other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1) -> Tensor:        # noqa: A002
    """input - alpha * other."""
    return ops.sub(input, other if alpha == 1 else other * alpha)


def div(input, other, *, rounding_mode=None) -> Tensor:     # noqa: A002
    """input / other; rounding_mode "trunc" or "floor" rounds the quotient (integers stay
    integers, divided in float64: exact below 2^53)."""
    if rounding_mode is None:
        return ops.div(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"'{rounding_mode}'")
    like = input if isinstance(input, Tensor) else other
    if like.dtype.is_float:
        return getattr(math_ops, rounding_mode)(ops.div(input, other))
    wide = [x.to(dt.float64) if isinstance(x, Tensor) else float(x) for x in (input, other)]
    return getattr(math_ops, rounding_mode)(ops.div(*wide)).to(like.dtype)


# ---- operators -----------------------------------------------------------------------------------------
def _operator(fn, swapped=False):
    """The operator form: NotImplemented for an operand that is neither a tensor nor a number."""
    def method(self, other):
        if not isinstance(other, (Tensor, int, float, bool, np.number)):
            return NotImplemented
        return fn(other, self) if swapped else fn(self, other)
    return method


def rpow(self: Tensor, base) -> Tensor:
    """base ** self for a number base: a float tensor's dtype, or an integer tensor's when
    the base is an int (computed in float64 and rounded: exact below 2^53)."""
    if not isinstance(base, (int, float, np.number)) or isinstance(base, bool):
        return NotImplemented
    if self.dtype.is_float:
        return ops.pow(scalar_tensor(base, self.dtype, self.device), self)
    if isinstance(base, (int, np.integer)) and self.dtype is not dt.bool_:
        wide = ops.pow(scalar_tensor(float(base), dt.float64, self.device), self.to(dt.float64))
        return math_ops.round(wide).to(self.dtype)
    return ops.pow(scalar_tensor(base, dt.float32, self.device), self.to(dt.float32))


def _in_place(fn):
    """t &= other (|=, ^=): the result written into t itself, whose dtype must hold it."""
    def method(self: Tensor, other):
        values = fn(self, other)
        if values.dtype is not self.dtype:
            raise RuntimeError(f"result type {values.dtype.name} can't be cast to the desired output type "
                               f"{self.dtype.name}")
        return self.copy_(values)
    return method


# ---- pieces: views along one dimension -----------------------------------------------------------------
def _dim(op: str, x: Tensor, dim) -> int:
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1) or x.ndim == 0:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape {x.shape}")
    return int(dim) % x.ndim


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """The view of `length` elements from `start` along dim."""
    dim = _dim("narrow", x, dim)
    if not 0 <= start <= start + length <= x.shape[dim]:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({x.shape[dim]}).")
    return x[(slice(None),) * dim + (slice(start, start + length),)]


def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of x along dim: pieces of one size (the last may be smaller), or of the sizes listed."""
    dim = _dim("split", x, dim)
    size = x.shape[dim]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step <= 0 and size:
            raise RuntimeError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - at) for at in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                               f"size at dimension {dim}), but got split_sizes={sizes}")
    starts = np.cumsum([0, *sizes[:-1]])
    return tuple(narrow(x, dim, int(at), s) for at, s in zip(starts, sizes))


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """x split into `chunks` views of ceil(size / chunks) along dim (fewer if they run out)."""
    if not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = x.shape[_dim("chunk", x, dim)]
    return split(x, max(1, math.ceil(size / chunks)), dim)


# ---- in place, autograd ----------------------------------------------------------------------------------
def relu_(self: Tensor) -> Tensor:
    """relu in place (its history, where self has one, is relu's)."""
    return self.copy_(ops.relu(self))


def retain_grad(self: Tensor) -> None:
    """Keep this non-leaf tensor's gradient in .grad when backward() passes through it (a
    leaf keeps its own always)."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None or getattr(self, "retains_grad", False):
        return
    graph.retain_grad_at(self.grad_fn, self)
    self.retains_grad = True


# ---- conversions ---------------------------------------------------------------------------------------
def _is_dtype(x) -> bool:
    return isinstance(x, (DType, np.dtype, type)) or (isinstance(x, str) and is_dtype_name(x))


def to(self: Tensor, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """self on another device and/or in another dtype: to(dtype), to(device), to(device,
    dtype), to(other) (other's device and dtype), and the keywords; self itself if nothing
    changes (unless copy=True)."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif _is_dtype(a):
            dtype = a
        elif isinstance(a, (str, Device, int)) and not isinstance(a, bool):
            device = f"cuda:{a}" if isinstance(a, int) else a
        else:
            raise TypeError(f"to() received an invalid combination of arguments: {a!r}")
    out = self
    if device is not None:
        out = ops.to(out, device)
    if dtype is not None:
        out = ops.to(out, as_dtype(dtype))
    return ops.clone(out) if copy and out is self else out


def format_(self: Tensor, spec: str) -> str:
    """format(t, spec): a 0-d tensor formats as its number (f"{loss:.4f}"), as in PyTorch."""
    if self.ndim == 0:
        return self.item().__format__(spec)
    return object.__format__(self, spec)


_METHODS = {
    "long": lambda self: ops.to(self, dt.int64), "int": lambda self: ops.to(self, dt.int32),
    "bool": lambda self: ops.to(self, dt.bool_), "type_as": lambda self, other: ops.to(self, other.dtype),
    "dim": lambda self: self.ndim, "ndimension": lambda self: self.ndim, "nelement": Tensor.numel,
    "stride": stride, "element_size": lambda self: self.dtype.itemsize,
    "is_floating_point": lambda self: self.dtype.is_float, "t": t,
    "new_zeros": _new(0), "new_ones": _new(1), "new_full": new_full,
    "add": add, "sub": sub, "mul": ops.mul, "div": div, "true_divide": ops.div, "matmul": ops.matmul,
    "neg": ops.neg, "negative": ops.neg,
    "__and__": _operator(math_ops.bitwise_and), "__rand__": _operator(math_ops.bitwise_and, True),
    "__or__": _operator(math_ops.bitwise_or), "__ror__": _operator(math_ops.bitwise_or, True),
    "__xor__": _operator(math_ops.bitwise_xor), "__rxor__": _operator(math_ops.bitwise_xor, True),
    "__invert__": math_ops.bitwise_not, "__rpow__": rpow, "__iand__": _in_place(math_ops.bitwise_and),
    "__ior__": _in_place(math_ops.bitwise_or), "__ixor__": _in_place(math_ops.bitwise_xor),
    "chunk": chunk, "split": split, "narrow": narrow, "relu_": relu_, "retain_grad": retain_grad,
    "to": to, "__format__": format_,
}
for _name in ("sin", "cos", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square", "exp2", "log2",
              "log10", "log_softmax", "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_xor",
              "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "isclose", "allclose",
              "equal", "mm", "bmm"):
    _METHODS[_name] = getattr(math_ops, _name)
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.is_cuda = property(lambda self: self.device.type == "cuda")
Tensor.retains_grad = False

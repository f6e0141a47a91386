"""Layer 1: the shape ops and constructors a PyTorch user reaches for next.

    views      unsqueeze, squeeze, flatten (reshapes and indexing: autograd sees the view)
    joining    cat (one dispatched op, with a gradient), stack (cat of unsqueezed views), of
               tensors of any dtypes, joined in their result type (promotion.py)
    creation   zeros_like, ones_like, full_like, empty_like, eye, linspace, from_numpy
    dtypes     .half(), .float(), .double(); float(t) and int(t) of one element

Every op checks its operands here, naming the op and the operand, before anything is
dispatched. Like the rest of the frontend, nothing here knows a kernel.
"""
import math

import numpy as np

from ..cuda.graph import refuse_while_capturing
from ..dispatch import call
from . import dtypes as dt
from .creation import empty, from_numpy_values, full
from .device import Device, on_their_device
from .dtypes import as_dtype
from .errors import DeviceError, ShapeError
from .ops import to
from .promotion import result_type
from .tensor import Tensor

call = on_their_device(call)          # CUDA work on its tensors' device


def _describe(x) -> str:
    return f"{tuple(x.shape)} {x.dtype.name} on {x.device}" if isinstance(x, Tensor) else type(x).__name__


def _dim(op: str, dim, ndim: int) -> int:
    """dim normalised into [0, ndim), or an IndexError naming the op."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for {ndim} dimensions "
                         f"(expected to be in [{-ndim}, {ndim - 1}])")
    return int(dim) % ndim


def _tensor(op: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    return x


# ---- views ---------------------------------------------------------------------------------------------
def unsqueeze(x, dim: int) -> Tensor:
    """A size-1 dimension inserted at dim (-1 appends): a view."""
    x = _tensor("unsqueeze", x)
    dim = _dim("unsqueeze", dim, x.ndim + 1)
    return x[(slice(None),) * dim + (None,)]


def squeeze(x, dim=None) -> Tensor:
    """Size-1 dimensions removed (all of them, or dim's if it has size 1): a view."""
    x = _tensor("squeeze", x)
    if dim is None:
        dims = [d for d, s in enumerate(x.shape) if s == 1]
    else:
        d = _dim("squeeze", dim, max(1, x.ndim))
        dims = [d] if x.ndim and x.shape[d] == 1 else []
    if not dims:
        return x[...]
    return x[tuple(0 if d in dims else slice(None) for d in range(x.ndim))]


def flatten(x, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dimensions start_dim..end_dim merged into one (a view when contiguous, else a copy)."""
    x = _tensor("flatten", x)
    if x.ndim == 0:
        return x.reshape(1)
    start, end = _dim("flatten", start_dim, x.ndim), _dim("flatten", end_dim, x.ndim)
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape {x.shape}")
    if start == end:
        return x[...]
    return x.reshape(*x.shape[:start], math.prod(x.shape[start:end + 1]), *x.shape[end + 1:])


# ---- joining -------------------------------------------------------------------------------------------
def _check_joinable(op: str, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ShapeError(f"{op}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: tensors[{i}] is {type(t).__name__}, not a tensor")
    first = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        if t.device != first.device:
            raise DeviceError(f"{op}: tensors[0] is {_describe(first)}, tensors[{i}] is {_describe(t)}: "
                              f"different devices")
    # tensors of different dtypes join in their result type (promotion.py), as in PyTorch
    dtype = result_type(*tensors)
    return [t if t.dtype is dtype else to(t, dtype) for t in tensors]


def cat(tensors, dim: int = 0) -> Tensor:
    """The tensors joined along an existing dimension dim (every other size must agree)."""
    tensors = _check_joinable("cat", tensors)
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = _dim("cat", dim, first.ndim)
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != first.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != d):
            raise ShapeError(f"cat: sizes must match except in dimension {d}: tensors[0] is {first.shape}, "
                             f"tensors[{i}] is {t.shape}")
    return call("cat", *tensors, dim=d)


def stack(tensors, dim: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dimension dim."""
    tensors = _check_joinable("stack", tensors)
    first = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != first.shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, but got {first.shape} at entry 0 "
                             f"and {t.shape} at entry {i}")
    d = _dim("stack", dim, first.ndim + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


# ---- creation ------------------------------------------------------------------------------------------
def _like(op: str, x, dtype, device):
    x = _tensor(op, x)
    return x.shape, (x.dtype if dtype is None else as_dtype(dtype)), (x.device if device is None else device)


def empty_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, dtype, device = _like("empty_like", x, dtype, device)
    return empty(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, dtype, device = _like("zeros_like", x, dtype, device)
    return full(shape, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, dtype, device = _like("ones_like", x, dtype, device)
    return full(shape, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape, dtype, device = _like("full_like", x, dtype, device)
    return full(shape, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def _size(op: str, name: str, n) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise ShapeError(f"{op}: {name} must be a non-negative int, got {n!r}")
    return int(n)


def eye(n, m=None, dtype=dt.float32, device="cpu", requires_grad=False) -> Tensor:
    """The n x m identity (m defaults to n): zeros, then ones written along the diagonal (a
    view with stride m + 1), both on the tensor's device."""
    n = _size("eye", "n", n)
    m = n if m is None else _size("eye", "m", m)
    t = full((n, m), 0, dtype=as_dtype(dtype), device=device)
    if n and m:
        # the one as a 0-d tensor filled where t is (fill_(1) would copy the number from the host)
        t.reshape(-1)[::m + 1][:min(n, m)].copy_(full((), 1, dtype=t.dtype, device=t.device))
    return t.requires_grad_(True) if requires_grad else t


def linspace(start, end, steps, dtype=dt.float32, device="cpu", requires_grad=False) -> Tensor:
    """steps evenly spaced values from start to end, both included (computed in float64)."""
    steps = _size("linspace", "steps", steps)
    for name, v in (("start", start), ("end", end)):
        if not isinstance(v, (int, float, np.number)) or isinstance(v, bool):
            raise TypeError(f"linspace: {name} must be a number, got {v!r}")
    t = from_numpy_values(np.linspace(start, end, steps), as_dtype(dtype), device)
    return t.requires_grad_(True) if requires_grad else t


def from_numpy(array) -> Tensor:
    """A CPU tensor with a copy of a numpy array's values, of its dtype (no bfloat16 in numpy).
    (PyTorch shares the array's memory; lowlevel's CPU storage is its own, so this copies.)"""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    return from_numpy_values(array, as_dtype(array.dtype), Device("cpu"))


# ---- dtypes and Python numbers ------------------------------------------------------------------------
def _one_element(op: str, x: Tensor):
    if x.numel() != 1:
        raise ShapeError(f"{op}: only a tensor with one element can be converted to a Python number, "
                         f"this one has {x.numel()} (shape {x.shape})")
    if x.device.type == "cuda":
        refuse_while_capturing(op)      # named here, before item() would name itself
    return x.item()


_METHODS = {
    "unsqueeze": unsqueeze, "squeeze": squeeze, "flatten": flatten,
    "half": lambda self: to(self, dt.float16), "float": lambda self: to(self, dt.float32),
    "double": lambda self: to(self, dt.float64),
    "__float__": lambda self: float(_one_element("float()", self)),
    "__int__": lambda self: int(_one_element("int()", self)),
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

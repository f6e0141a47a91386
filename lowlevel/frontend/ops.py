"""Layer 1, the frontend ops: validate in Python, then hand the call to the dispatcher.

Every check here runs before any driver call: operands on different devices, or of shapes
that do not broadcast (or do not multiply) raise an error (a RuntimeError, as in PyTorch:
errors.py) that names both operands. Operands of different dtypes, and Python numbers, are
promoted as PyTorch promotes them (promotion.py): each operand is cast to the result type
(a number becomes its 0-d tensor) before the op is dispatched.

Beside the basic arithmetic: sqrt rsqrt log log1p expm1 tanh sigmoid abs, minimum, pow,
clamp (maximum then minimum) and min (the reduction, as -max(-x)).

The end of this module attaches the ops to Tensor as its methods and operators.
"""
import builtins
import math
import time

import numpy as np

from .. import trace
from ..cuda.context import device_of_thread
from ..cuda.graph import refuse_while_capturing
from ..dispatch import Autograd, KeySet, backend_for, call, redispatch
from . import dtypes as dt
from .creation import from_numpy_values, full
from .device import Device, cpu_scalar_to_device, on_their_device
from .dtypes import DType, as_dtype, is_dtype_name
from .errors import ArgumentError, DeviceError, DTypeError, DTypeNotImplemented, ShapeError
from .fast_ops import COMMUTATIVE, NUMBER_OVERLOADS, binary_op, unary_op
from .promotion import binary_dtype, promoted, true_divide_dtype
from .shapes import broadcast_shapes
from .tensor import Tensor

# CUDA work on its tensors' device; `dispatch`, the dispatcher's own call, for an op whose
# operands' device is current already (a CPU tensor, or one on the current CUDA device)
dispatch = call
call, redispatch = on_their_device(call), on_their_device(redispatch)


def _caller(x: Tensor):
    """The call that runs an op on x's device: the dispatcher's own where no other device
    is to be made current (on_their_device's test, made here once), else the guarded one."""
    device = x.device
    return dispatch if device.type != "cuda" or device.index == device_of_thread.ordinal else call


def _describe(x) -> str:
    return f"{tuple(x.shape)} {x.dtype.name} on {x.device}" if isinstance(x, Tensor) else repr(x)


def _same_device(op: str, a: Tensor, b: Tensor) -> None:
    if a.device is not b.device and a.device != b.device:
        raise DeviceError(f"{op}: operands are on different devices: a is {_describe(a)}, b is {_describe(b)}")


def _same_device_and_dtype(op: str, a: Tensor, b: Tensor) -> None:
    _same_device(op, a, b)
    if a.dtype is not b.dtype:
        raise DTypeError(f"{op}: operands have different dtypes: a is {_describe(a)}, b is {_describe(b)}; "
                         f"convert one with .to(dtype)")


def _binary(op: str, a, b) -> Tensor:
    """Every case of a binary op but the common ones fast_ops.binary_op dispatches itself:
    each check, and each error, of a binary op is here."""
    # Validation is timed only while a trace records it (here and in every op below).
    start = time.perf_counter() if trace.active is not None else 0.0
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: needs at least one tensor, got {type(a).__name__} and {type(b).__name__}")
    for x in (a, b):
        if not isinstance(x, (Tensor, int, float, bool, np.number)):
            raise TypeError(f"{op}: cannot combine a tensor with {type(x).__name__}")
    like = a if isinstance(a, Tensor) else b
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        a, b = cpu_scalar_to_device(a, b)
        _same_device(op, a, b)
        broadcast_shapes(op, a.shape, b.shape)
    # Both operands become the result type (promotion.py): a tensor by a cast, a number as
    # a 0-d tensor of it, that carries the number too (a kernel may take it as an argument).
    dtype = true_divide_dtype(a, b) if op == "div" else binary_dtype(a, b)
    # A Python float beside a tensor of the result type goes as the op's number overload
    # (fast_ops.binary_op, which makes it a 0-d tensor where no kernel takes it).
    overload = NUMBER_OVERLOADS.get(op)
    if overload is not None and (type(b) is float or (type(a) is float and op in COMMUTATIVE)):
        a, b = (a, b) if type(b) is float else (b, a)
        if trace.active is not None:
            trace.note_validation(op, time.perf_counter() - start)
        return call(overload, promoted(a, dtype, a), b)
    a, b = (promoted(x, dtype, like) for x in (a, b))
    if trace.active is not None:
        trace.note_validation(op, time.perf_counter() - start)
    return call(op, a, b)


checked_binary = _binary         # for the modules that make more binary ops (division.py)
add = binary_op(_binary, "add")
_sub = binary_op(_binary, "sub")


def is_bool(x) -> bool:
    """Whether x is a bool tensor or a Python (numpy) bool."""
    return x.dtype is dt.bool_ if type(x) is Tensor else isinstance(x, (bool, np.bool_))


def sub(a, b) -> Tensor:
    if is_bool(a) or is_bool(b):
        raise DTypeError("sub: - with a bool operand is not supported (as in PyTorch); to invert a mask use "
                         "ll.eq(mask, False)")
    return _sub(a, b)


mul = binary_op(_binary, "mul")
# a / b, true division: integer and bool operands divide into the default float dtype
div = binary_op(_binary, "div", true_division=True)


maximum = binary_op(_binary, "maximum")


# ---- comparisons (bool results) and where ------------------------------------------------------
def _compare(op: str, a, b) -> Tensor:
    """Elementwise a OP b as a bool tensor, broadcasting; compared in the operands' result type."""
    return _binary(op, a, b)


def eq(a, b) -> Tensor:
    return _compare("eq", a, b)


def ne(a, b) -> Tensor:
    return _compare("ne", a, b)


def lt(a, b) -> Tensor:
    return _compare("lt", a, b)


def le(a, b) -> Tensor:
    return _compare("le", a, b)


def gt(a, b) -> Tensor:
    return _compare("gt", a, b)


def ge(a, b) -> Tensor:
    return _compare("ge", a, b)


def where(cond, a, b) -> Tensor:
    """a where cond is true, else b (broadcasting all three), in a's and b's result type."""
    if not isinstance(cond, Tensor) or cond.dtype.name != "bool":
        raise DTypeError(f"where: cond must be a bool tensor, got {_describe(cond)}")
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if like is None and (np.ndim(a) or np.ndim(b)):
        raise TypeError("where: a or b must be a tensor, or both numbers")
    like = cond if like is None else like          # two numbers: on cond's device
    a, b = (x if isinstance(x, Tensor) or np.ndim(x) == 0 else from_numpy_values(np.array(x), like.dtype, like.device)
            for x in (a, b))
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        _same_device("where", a, b)
    # a number becomes the 0-d constant of an op's number (no host copy: allowed in a graph capture)
    dtype = binary_dtype(a, b)
    a, b = (promoted(x, dtype, like) for x in (a, b))
    if cond.device != a.device:
        raise DeviceError(f"where: cond is {_describe(cond)}, a is {_describe(a)}: different devices")
    broadcast_shapes("where", broadcast_shapes("where", a.shape, b.shape), cond.shape)
    # The values come first: their dtype is what chooses the kernel.
    return call("where", a, b, cond)


def _unary(op: str, x, floats_only: bool = False) -> Tensor:
    start = time.perf_counter() if trace.active is not None else 0.0
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if floats_only and not x.dtype.is_float:
        x = cast(x, dt.float32)         # an integer or bool tensor computes in the default float dtype
    if trace.active is not None:
        trace.note_validation(op, time.perf_counter() - start)
    return call(op, x)


def neg(x) -> Tensor:
    if isinstance(x, Tensor) and x.dtype.name == "bool":
        raise DTypeError("neg: - on a bool tensor is not supported (as in PyTorch); to invert a mask use "
                        "ll.eq(mask, False)")
    return _unary("neg", x)


relu = unary_op(_unary, "relu")
exp = unary_op(_unary, "exp", floats_only=True)


def _reduction(op: str, x, dim, keepdim: bool) -> Tensor:
    start = time.perf_counter() if trace.active is not None else 0.0
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if dim is not None:
        if not isinstance(dim, (int, np.integer)):
            raise TypeError(f"{op}: dim must be an int or None, got {dim!r}")
        nd = len(x.shape)
        if not -nd <= dim < (nd or 1):
            raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape {x.shape}")
        dim = int(dim) % (nd or 1)
    if op == "mean" and not x.dtype.is_float:
        raise DTypeError(f"mean: needs a floating-point tensor, got {_describe(x)}")
    if op == "max" and (x.numel() == 0 or (dim is not None and x.shape[dim] == 0)):
        raise ValueError(f"max: the reduced dimension of {_describe(x)} is empty")
    if trace.active is not None:
        trace.note_validation(op, time.perf_counter() - start)
    return _caller(x)(op, x, dim=dim, keepdim=bool(keepdim))


def sum(x, dim=None, keepdim=False) -> Tensor:       # noqa: A001 - the op's name
    if isinstance(x, Tensor) and x.dtype.name == "bool":
        x = x.to("int64")           # a count of the true elements, int64 as in PyTorch and numpy
    return _reduction("sum", x, dim, keepdim)


def mean(x, dim=None, keepdim=False) -> Tensor:
    return _reduction("mean", x, dim, keepdim)


def max(x, dim=None, keepdim=False) -> Tensor:       # noqa: A001
    """The largest value (over everything, or along dim); NaN if any is NaN."""
    return _reduction("max", x, dim, keepdim)


def softmax(x, dim=-1) -> Tensor:
    start = time.perf_counter() if trace.active is not None else 0.0
    if not isinstance(x, Tensor) or not x.dtype.is_float:
        raise DTypeNotImplemented(f"softmax: needs a floating-point tensor, got {_describe(x)}")
    nd = len(x.shape)
    if nd == 0 or not -nd <= dim < nd:
        raise IndexError(f"softmax: dim {dim} is out of range for a tensor of shape {x.shape}")
    if trace.active is not None:
        trace.note_validation("softmax", time.perf_counter() - start)
    return _caller(x)("softmax", x, dim=dim % nd)


def matmul(a, b) -> Tensor:
    """Matrix product: 1-D x 1-D (dot), 2-D x 2-D, and batched 3-D (a 2-D operand broadcasts);
    more batch dimensions, or batches that broadcast, through math_ops.batched_matmul."""
    start = time.perf_counter() if trace.active is not None else 0.0
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul: needs two tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.device is not b.device or a.dtype is not b.dtype:
        _same_device_and_dtype("matmul", a, b)
    sa, sb = a.shape, b.shape
    na, nb = len(sa), len(sb)
    if not (na and nb):
        raise ShapeError(f"matmul: both operands need at least one dimension, got a {sa} and b {sb}")
    k_a = sa[-1]
    k_b = sb[0] if nb == 1 else sb[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: a is {sa} and b is {sb}: inner dimensions {k_a} and {k_b} differ")
    if na > 3 or nb > 3 or (na == 3 and nb == 3 and sa[0] != sb[0]):
        # batch dimensions that broadcast: math_ops.batched_matmul, as 3-D products
        return call("matmul_broadcast", a, b)
    if trace.active is not None:
        trace.note_validation("matmul", time.perf_counter() - start)
    return _caller(a)("matmul", a, b)


# ---- math after the basic arithmetic: unary float ops, abs, minimum, pow, clamp, min --------------------
FLOAT_UNARY = ("sqrt", "rsqrt", "log", "log1p", "expm1", "tanh", "sigmoid")


sqrt, rsqrt, log, log1p, expm1, tanh, sigmoid = (unary_op(_unary, op, floats_only=True) for op in FLOAT_UNARY)
abs = unary_op(_unary, "abs")           # noqa: A001 - the op's name


minimum = binary_op(_binary, "minimum")
minimum.__doc__ = "Elementwise minimum (broadcasting); NaN if either is NaN, as in numpy and PyTorch."


def pow(x, exponent) -> Tensor:         # noqa: A001
    """x ** exponent, elementwise (a number or a tensor of x's dtype and device, broadcasting)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"pow: the base must be a tensor, got {type(x).__name__}")
    if not binary_dtype(x, exponent).is_float:
        raise DTypeError(f"pow: integer powers are not supported (a floating-point base or exponent is), got "
                         f"{tuple(x.shape)} {x.dtype.name} ** {_describe(exponent)}")
    return _binary("pow", x, exponent)


def _bound(op: str, x: Tensor, name: str, value):
    if value is None or isinstance(value, Tensor):
        return value
    if not isinstance(value, (int, float, np.number)) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a number or a tensor, got {type(value).__name__}")
    return value


def clamp(x, min=None, max=None) -> Tensor:         # noqa: A002 - PyTorch's keyword names
    """x limited to [min, max] (either may be None; numbers or tensors, broadcasting); a NaN in
    x stays NaN. min > max gives max everywhere, as in PyTorch."""
    if not isinstance(x, Tensor):
        raise TypeError(f"clamp: expected a tensor, got {type(x).__name__}")
    lo, hi = _bound("clamp", x, "min", min), _bound("clamp", x, "max", max)
    if lo is None and hi is None:
        raise ArgumentError("clamp: at least one of min and max must be given")
    out = x if lo is None else maximum(x, lo)
    return out if hi is None else minimum(out, hi)


def min(x, dim=None, keepdim=False) -> Tensor:      # noqa: A001
    """The smallest value (over everything, or along dim); NaN if any is NaN."""
    if not isinstance(x, Tensor):
        raise TypeError(f"min: expected a tensor, got {type(x).__name__}")
    if x.dtype.name in ("int32", "int64"):
        # -x wraps at the most negative integer (min([-2^31, 0]) would be 0): -1 - x is an
        # order-reversing map of the integers onto themselves that never overflows
        return sub(-1, max(sub(-1, x), dim, keepdim))
    if x.dtype.name == "bool":          # not max(not x): -x is refused for bool, as in PyTorch
        return eq(max(eq(x, False), dim, keepdim), False)
    return neg(max(neg(x), dim, keepdim))



# ---- truth reductions, arg-reductions, boolean masks ----------------------------------------------------
def _truth(op: str, x) -> Tensor:
    """x as a bool tensor (x != 0 unless it is bool already; NaN counts as true)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    return x if x.dtype.name == "bool" else ne(x, 0)


def _count_false(op: str, x, dim, keepdim, false_is=1.0) -> Tensor:
    # How many elements are false (or true): a float32 count by where and sum, so that any
    # device with float32 where and sum (the CPU and CUDA backends) runs it.
    truth = _truth(op, x)
    counted, other = (full((), v, dtype=dt.float32, device=truth.device) for v in (false_is, 1.0 - false_is))
    ones = where(truth, other, counted)
    return sum(ones, dim, keepdim)


def all(x, dim=None, keepdim=False) -> Tensor:      # noqa: A001
    """Whether every element is true (nonzero; NaN is true): a bool tensor. all() of nothing is True."""
    return eq(_count_false("all", x, dim, keepdim, 1.0), 0.0)


def any(x, dim=None, keepdim=False) -> Tensor:      # noqa: A001
    """Whether some element is true (nonzero; NaN is true): a bool tensor. any() of nothing is False."""
    return gt(_count_false("any", x, dim, keepdim, 0.0), 0.0)


def _arg(op: str, x, dim, keepdim) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if dim is not None:
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"{op}: dim must be an int or None, got {dim!r}")
        if not -builtins.max(1, x.ndim) <= dim < builtins.max(1, x.ndim):
            raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape {x.shape}")
        dim = int(dim) % builtins.max(1, x.ndim)
    if x.numel() == 0 or (dim is not None and x.ndim and x.shape[dim] == 0):
        raise ValueError(f"{op}: the reduced dimension of {_describe(x)} is empty")
    return call(op, x, dim=dim, keepdim=bool(keepdim))


def argmax(x, dim=None, keepdim=False) -> Tensor:
    """The int64 index of the first largest value (of the flattened tensor when dim is None);
    a NaN counts as the largest, as in PyTorch."""
    return _arg("argmax", x, dim, keepdim)


def argmin(x, dim=None, keepdim=False) -> Tensor:
    return _arg("argmin", x, dim, keepdim)


def masked_select(x, mask) -> Tensor:
    """The elements of x where the bool mask (broadcast to x's shape) is true, as a new 1-D tensor."""
    if not isinstance(x, Tensor) or not isinstance(mask, Tensor):
        raise TypeError(f"masked_select: needs two tensors, got {type(x).__name__} and {type(mask).__name__}")
    if mask.dtype.name != "bool":
        raise DTypeError(f"masked_select: the mask must be a bool tensor, got {_describe(mask)}")
    if mask.device != x.device:
        raise DeviceError(f"masked_select: x is {_describe(x)}, the mask is {_describe(mask)}: different devices")
    broadcast_shapes("masked_select", x.shape, mask.shape)
    if x.device.type == "cuda":
        refuse_while_capturing("masked_select (t[mask])", "the size of its result is the count of true "
                               "elements, which the host must read from the GPU")
    return call("masked_select", x, mask)


def masked_scatter(src, mask) -> Tensor:
    """The inverse of masked_select (its gradient): a tensor of mask's shape holding src's
    elements in order where the bool mask is true, zeros elsewhere."""
    if not isinstance(src, Tensor) or not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        raise TypeError(f"masked_scatter: needs a tensor and a bool mask, got {_describe(src)} and {_describe(mask)}")
    if src.ndim != 1:
        raise ValueError(f"masked_scatter: src must be 1-D (one element per true mask element), got {src.shape}")
    return call("masked_scatter", src, mask)


_plain_getitem = Tensor.__getitem__


def _getitem(self, index):
    """t[mask] for a bool tensor mask (a copy, like PyTorch's); everything else is a view."""
    if isinstance(index, Tensor):
        if index.dtype.name != "bool":
            raise TypeError(f"indexing with a {index.dtype.name} tensor is not supported (bool masks, ints, "
                            f"slices, None and ... are)")
        if index.shape != self.shape[:index.ndim]:
            raise IndexError(f"the mask of shape {index.shape} does not match the indexed tensor's leading "
                             f"dimensions {self.shape[:index.ndim]}")
        # selected whole rows, in order: (count, *the dimensions the mask did not cover)
        picked = masked_select(self, index.reshape(*index.shape, *([1] * (self.ndim - index.ndim))))
        if index.ndim == self.ndim:
            return picked
        rest = self.shape[index.ndim:]
        per_row = math.prod(rest)
        rows = picked.numel() // per_row if per_row else int(_count_false("mask", index, None, False, 0.0).item())
        return picked.reshape(rows, *rest)
    return _plain_getitem(self, index)

# The ops above named sum, max, min, abs and pow shadow the builtins in this module; the
# code above uses builtins.max explicitly for that reason.


# ---- data movement ------------------------------------------------------------------------
def contiguous(x: Tensor) -> Tensor:
    """`x` itself when its elements are laid out row-major, else a contiguous copy."""
    return x if x.is_contiguous() else clone(x)


def clone(x: Tensor) -> Tensor:
    """A contiguous copy on the same device (the "contiguous" kernels always copy)."""
    return call("contiguous", x)


def cast(x: Tensor, dtype) -> Tensor:
    return call("cast", x, dtype=dtype)


def to(x: Tensor, target) -> Tensor:
    """A copy on another device ("cpu", "cuda", ...) or in another dtype; x if same."""
    if isinstance(target, (DType, np.dtype, type)) or (isinstance(target, str) and is_dtype_name(target)):
        dtype = as_dtype(target)
        return x if dtype is x.dtype else cast(x, dtype)
    device = Device(target)
    return x if device == x.device else copy_to_device(x, device)


def copy_to_device(x: Tensor, device: Device) -> Tensor:
    """A copy to another device: between two CUDA devices device to device (the backend's
    to_device, a peer copy); between two other backends through the host."""
    if x.device.type != "cpu" and device.type != "cpu" and x.device.type != device.type:
        return copy_to_device(copy_to_device(x, Device("cpu")), device)
    if x.device.type == "cpu" or x.device.type == device.type:
        # The target's backend is not among the argument's keys when x is on the CPU: name
        # it, with Autograd above it when x requires grad (the copy is recorded like any op).
        keys = [backend_for(device.type)] + ([Autograd] if x.requires_grad else [])
        return redispatch("to_device", KeySet(keys), x, device=device)
    return call("to_host", x)


# ---- the Tensor methods that run ops -----------------------------------------------------------
# tensor.py imports nothing above itself; the methods that run an op are attached here,
# beside the ops they call, so that ops.py (which needs Tensor) and tensor.py form no cycle.
def _swapped(op):
    def method(self, other):
        return op(other, self)
    return method


def _comparison(op):
    """The operator form: NotImplemented for what is not a tensor or a number, so that
    `t == None` or `t == "x"` is Python's False as in PyTorch, not an error."""
    def method(self, other):
        if not isinstance(other, (Tensor, int, float, bool, np.number)):
            return NotImplemented
        return op(self, other)
    return method


_METHODS = {
    "__add__": add, "__radd__": _swapped(add), "__sub__": sub, "__rsub__": _swapped(sub),
    "__mul__": mul, "__rmul__": _swapped(mul), "__truediv__": div, "__rtruediv__": _swapped(div),
    "__matmul__": matmul, "__rmatmul__": _swapped(matmul), "__neg__": neg,
    "sum": sum, "mean": mean, "max": max, "softmax": softmax, "relu": relu, "exp": exp,
    "to": to, "contiguous": contiguous, "clone": clone,
    "__eq__": _comparison(eq), "__ne__": _comparison(ne), "__lt__": _comparison(lt),
    "__le__": _comparison(le), "__gt__": _comparison(gt), "__ge__": _comparison(ge),
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "sqrt": sqrt, "rsqrt": rsqrt, "log": log, "log1p": log1p, "expm1": expm1, "tanh": tanh, "sigmoid": sigmoid,
    "abs": abs, "__abs__": abs, "minimum": minimum, "maximum": maximum, "pow": pow, "__pow__": pow,
    "clamp": clamp, "min": min, "all": all, "any": any, "argmax": argmax, "argmin": argmin,
    "masked_select": masked_select, "__getitem__": _getitem,
}
for _name, _op in _METHODS.items():
    setattr(Tensor, _name, _op)

"""Layer 1: writing into tensors. copy_, fill_, zero_, the in-place arithmetic add_ sub_
mul_ div_ (and +=, -=, *=, /=, which now change the tensor itself, so that every alias and
view sees the new values), and item assignment (t[index] = value). The in-place arithmetic
computes in the operands' result type and refuses one its tensor cannot hold (promotion.py).

Every write goes through one dispatched op, `copy_(dst, src)`: src (of dst's dtype, on its
device, broadcastable to its shape) is written into the view dst. The CPU backend assigns
through numpy; the CUDA backend scatters with the strided-store kernel. Each write bumps the
storage's version counter, which autograd checks against what its nodes saved.

The in-place arithmetic computes out of place, then writes the result back: one extra
temporary, but the result is right for any dst view and any broadcast operand. Where
autograd records (an operand requires grad), the new values are computed from a clone of
dst, so that what a node saved is never the tensor being overwritten, and dst takes the
history of the values; an in-place op on a leaf that requires grad is refused.
"""
import numpy as np

from ..dispatch import Autograd, call, exclude
from .autograd import rebase_history, records_inplace
from .creation import from_numpy_values
from .device import on_their_device
from .ops import add, clamp, clone, div, mul, sub, to, where
from .promotion import binary_dtype, check_inplace, result_type, true_divide_dtype
from .shapes import broadcast_shapes
from .tensor import Tensor

call = on_their_device(call)          # CUDA work on its tensors' device


def _self_overlapping(t: Tensor) -> bool:
    """Whether two elements of view t are one memory location (an expanded dimension);
    a view without elements has none (the stride of a (2, 0) tensor's first dimension is 0)."""
    return t.numel() > 0 and any(st == 0 and s > 1 for s, st in zip(t.shape, t.strides))


def _as_source(dst: Tensor, src) -> Tensor:
    """src as a tensor of dst's dtype and device (a number becomes a 0-d tensor)."""
    if not isinstance(src, Tensor):
        if not isinstance(src, (int, float, bool, np.number)):
            raise TypeError(f"cannot write {type(src).__name__} into a tensor (numbers and tensors can be)")
        return from_numpy_values(np.array(src), dst.dtype, dst.device)
    if src.device != dst.device:
        src = to(src, dst.device)
    return src if src.dtype is dst.dtype else to(src, dst.dtype)


def _check_writable(op: str, dst: Tensor, shape) -> None:
    if not isinstance(dst, Tensor):
        raise TypeError(f"{op}: expected a tensor to write into, got {type(dst).__name__}")
    if dst.storage.constant is not None:
        # only reachable through what an autograd node saved (node.saved()): never handed out
        raise RuntimeError(f"{op}: the tensor is (a view of) the 0-d constant lowlevel keeps for the number "
                           f"{dst.storage.constant!r}, which every op with that number reads; it cannot be "
                           f"written: clone() it first")
    if broadcast_shapes(op, tuple(shape), dst.shape) != dst.shape:
        raise RuntimeError(f"{op}: output with shape {list(dst.shape)} doesn't match the broadcast shape "
                           f"{list(broadcast_shapes(op, tuple(shape), dst.shape))}")
    if _self_overlapping(dst):
        # PyTorch's message: an expanded view has many elements at one address.
        raise RuntimeError(f"{op}: unsupported operation: some elements of the input tensor and the written-to "
                           f"tensor refer to a single memory location. Please clone() the tensor before "
                           f"performing the operation.")


def write(dst: Tensor, src: Tensor) -> Tensor:
    """The raw write (no autograd): src's values into dst, then dst's version moves on."""
    with exclude(Autograd):          # moving bytes is not an op of the graph
        if src.storage is dst.storage:
            src = clone(src)         # the kernels must not read what they are overwriting
        call("copy_", dst, src)
    dst.storage.version += 1
    return dst


def _apply(op: str, dst: Tensor, other, compute) -> Tensor:
    """Run compute(base) (the new values, out of place, from base = dst or, where autograd
    records, a clone of it), check its shape fits dst, write it."""
    recorded = records_inplace(dst, other)
    values = compute(clone(dst) if recorded else dst)
    _check_writable(op, dst, values.shape)
    if values.dtype is not dst.dtype:
        values = to(values, dst.dtype)      # computed in the result type, written in dst's (promotion.py)
    write(dst, values)
    if recorded:
        rebase_history(dst, values)
    return dst


def copy_(dst: Tensor, src) -> Tensor:
    """Write src into dst (broadcasting src to dst's shape; converting its dtype and device)."""
    _check_writable("copy_", dst, src.shape if isinstance(src, Tensor) else ())
    return _apply("copy_", dst, src, lambda base: _as_source(base, src))


def fill_(dst: Tensor, value) -> Tensor:
    if isinstance(value, Tensor) and value.numel() != 1:
        raise RuntimeError(f"fill_ only supports a 0-dimensional value tensor, got shape {value.shape}")
    return copy_(dst, value.reshape(()) if isinstance(value, Tensor) else value)


def zero_(dst: Tensor) -> Tensor:
    return fill_(dst, 0)


def inplace_op(name: str, op, result_dtype=binary_dtype):
    """The in-place form of the binary op `op`: computed in the operands' result type
    (`result_dtype(self, other)`), refused where self cannot hold that (`i += 1.5` on an
    integer tensor, as PyTorch refuses it), written back into self in its own dtype."""
    def method(self, other):
        _check_writable(name, self, other.shape if isinstance(other, Tensor) else ())
        check_inplace(name, result_dtype(self, other), self.dtype)
        return _apply(name, self, other, lambda base: op(base, other))
    method.__name__ = name
    return method


add_, sub_, mul_ = (inplace_op(n, f) for n, f in (("add_", add), ("sub_", sub), ("mul_", mul)))
div_ = inplace_op("div_", div, true_divide_dtype)


def clamp_(self: Tensor, min=None, max=None) -> Tensor:       # noqa: A002 - PyTorch's keyword names
    """self limited to [min, max] in place (numbers or tensors broadcastable to self)."""
    bound = next((b for b in (min, max) if isinstance(b, Tensor) and b.requires_grad), None)
    check_inplace("clamp_", result_type(self, *(b for b in (min, max) if b is not None)), self.dtype)
    return _apply("clamp_", self, bound, lambda base: clamp(base, min, max))


def setitem(self: Tensor, index, value) -> None:
    """t[index] = value: index as __getitem__ takes it (ints, slices with steps, None, ...),
    value a number or a tensor broadcastable to the indexed view. A bool tensor index (a mask
    of self's shape, or of its leading dimensions) writes value where the mask is true."""
    if isinstance(index, Tensor) and index.dtype.name == "bool":
        mask = index.reshape(*index.shape, *([1] * (self.ndim - index.ndim))) if index.ndim <= self.ndim else index
        if self.shape[:index.ndim] != index.shape:
            raise IndexError(f"the mask of shape {index.shape} does not match the indexed tensor's leading "
                             f"dimensions {self.shape[:index.ndim]}")
        copy_(self, where(mask, _as_source(self, value), self))
        return
    copy_(self[index], value)


_METHODS = {
    "copy_": copy_, "fill_": fill_, "zero_": zero_, "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "clamp_": clamp_,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_, "__setitem__": setitem,
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

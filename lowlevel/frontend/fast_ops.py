"""The common cases of the element-wise ops, checked and dispatched in one frame.

ops.py's functions check every case of an op and make every error; an op made here by
binary_op or unary_op first tries the cases that need no more than a few identity tests
(two tensors of one device, dtype and shape; a tensor and a Python number; a tensor of a
dtype the op takes) and hands everything else, unchanged, to ops.py's function. Where no
other device is to be made current (a CPU tensor, or one on the current CUDA device:
on_their_device's own test), the dispatcher is called directly, without that wrapper.
While a trace records, every call takes ops.py's way (which times its checks).
"""
from .. import trace
from ..cuda.context import device_of_thread
from ..dispatch import call
from .creation import scalar_tensor
from .device import on_their_device
from .tensor import Tensor

guarded_call = on_their_device(call)
_NUMBERS = frozenset({int, float})          # bool is not one: it takes the checked way


def binary_op(checked, op: str):
    """The function of the binary op `op`; `checked(op, a, b)` is the one that makes every
    check: the fast cases are those where each of its checks passes (same device, same
    dtype, equal shapes; or a number on either side, which takes the tensor's dtype and
    device)."""
    def fn(a, b):
        if trace.active is not None:
            return checked(op, a, b)
        if type(a) is not Tensor:
            if type(a) not in _NUMBERS or type(b) is not Tensor:
                return checked(op, a, b)
            device = b.device
            a = scalar_tensor(a, b.dtype, device)      # number OP tensor (2.0 * x, 1 - p)
        elif type(b) is Tensor:
            device = a.device
            if b.device is not device or b.dtype is not a.dtype or b.shape != a.shape:
                return checked(op, a, b)
        elif type(b) in _NUMBERS:
            device = a.device
            b = scalar_tensor(b, a.dtype, device)      # as `checked` makes it
        else:
            return checked(op, a, b)
        if device.type != "cuda" or device.index == device_of_thread.ordinal:
            return call(op, a, b)
        return guarded_call(op, a, b)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise {op} of two tensors of one dtype and device, broadcasting, or of a tensor and a number."
    return fn


def unary_op(checked, op: str, floats_only: bool = False):
    """The function of the unary op `op`; `checked(op, x, floats_only)` makes every check
    (a tensor; of a floating-point dtype where `floats_only`)."""
    def fn(x):
        if type(x) is Tensor and trace.active is None and (x.dtype.is_float or not floats_only):
            device = x.device
            if device.type != "cuda" or device.index == device_of_thread.ordinal:
                return call(op, x)
        return checked(op, x, floats_only)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise {op} of a {'floating-point ' if floats_only else ''}tensor."
    return fn

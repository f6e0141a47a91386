"""The common cases of the element-wise ops, checked and dispatched in one frame.

ops.py's functions check every case of an op and make every error; an op made here by
binary_op or unary_op first tries the cases that need no more than a few identity tests
(two tensors of one device, dtype and shape; a tensor and a Python number of its dtype's
category; a tensor of a dtype the op takes) and hands everything else, unchanged, to
ops.py's function, which promotes (promotion.py). Where no other device is to be made
current (a CPU tensor, or one on the current CUDA device: on_their_device's own test), the
dispatcher is called directly, without that wrapper, with the key set computed here
(call_known). A tensor and a Python float dispatch the op's
number overload, `mul.Scalar` (as in PyTorch): no 0-d tensor is made for the number where
a backend's kernel takes it as an argument. While a trace records, every call takes
ops.py's way (which times its checks).
"""
from .. import trace
from ..cuda.context import device_of_thread
from ..dispatch import AUTOGRAD_BIT, call, call_known, register_decomposition
from . import dtypes as dt
from .creation import scalar_tensor
from .device import on_their_device
from .tensor import Tensor

guarded_call = on_their_device(call)
# a Python bool takes the checked way (bool tensor + True is bool, int32 tensor + True int32)
FLOATS = frozenset({dt.float16, dt.bfloat16, dt.float32, dt.float64})
NOT_BOOL = frozenset({dt.int32, dt.int64, *FLOATS})
ALL_DTYPES = frozenset(dt.ALL)
NUMBER_OVERLOADS: dict = {}                 # op -> its number overload, "mul" -> "mul.Scalar"
COMMUTATIVE = frozenset({"add", "mul"})       # exactly, in IEEE arithmetic (maximum: not for 0.0 and -0.0)


def on_device(op: str, a, b, device):
    """call(op, a, b) for the operands of a fast case, both on `device` (b a tensor or a
    float): with call()'s pass over the arguments done here, where both are known (the
    device's backend key, Autograd's where an operand requires grad, the dtype), or, where
    another device is to be made current, through the guard."""
    if device.type != "cuda" or device.index == device_of_thread.ordinal:
        grad = a.requires_grad is True or (type(b) is Tensor and b.requires_grad is True)
        return call_known(op, device.key_bit | AUTOGRAD_BIT if grad else device.key_bit, a.dtype.name, a, b)
    return guarded_call(op, a, b)


def binary_op(checked, op: str, true_division: bool = False):
    """The function of the binary op `op`; `checked(op, a, b)` is the one that makes every
    check and promotes the operands (promotion.py): the fast cases are those where each of
    its checks passes and the result type is the tensor's own dtype (same device, same
    dtype, equal shapes; a Python float beside a floating-point tensor; a Python int beside
    a tensor that is not bool), which a set lookup per dtype tells. `true_division`: the
    op's result is floating-point (a / b), so only floating-point tensors take the fast
    cases. A tensor and a Python float go to the dispatcher as the op's number overload
    (`op.Scalar`, as PyTorch's `mul.Scalar`): a backend with a kernel for it takes the
    number as a kernel argument; elsewhere its decomposition (below) makes the number's 0-d
    tensor, as `checked` does."""
    scalar_op = NUMBER_OVERLOADS[op] = f"{op}.Scalar"
    # the dtypes that are the result type of (tensor, same-dtype tensor) and (tensor, int)
    keeps_own = FLOATS if true_division else ALL_DTYPES
    keeps_int = FLOATS if true_division else NOT_BOOL

    def fn(a, b):
        if trace.active is not None:
            return checked(op, a, b)
        if type(a) is Tensor:
            device = a.device
            if type(b) is Tensor:
                if b.device is not device or b.dtype is not a.dtype or b.shape != a.shape \
                        or a.dtype not in keeps_own:
                    return checked(op, a, b)
                # on_device, inline in the two common cases (a frame is 0.06 us of the op)
                if device.type != "cuda" or device.index == device_of_thread.ordinal:
                    grad = a.requires_grad is True or b.requires_grad is True
                    return call_known(op, device.key_bit | AUTOGRAD_BIT if grad else device.key_bit, a.dtype.name,
                                      a, b)
                return guarded_call(op, a, b)
            if type(b) is float and a.dtype in FLOATS:
                if device.type != "cuda" or device.index == device_of_thread.ordinal:
                    grad = a.requires_grad is True
                    return call_known(scalar_op, device.key_bit | AUTOGRAD_BIT if grad else device.key_bit,
                                      a.dtype.name, a, b)
                return guarded_call(scalar_op, a, b)
            if type(b) is int and a.dtype in keeps_int:
                return on_device(op, a, scalar_tensor(b, a.dtype, device), device)
        elif type(b) is Tensor:
            if type(a) is float and b.dtype in FLOATS:
                if op in COMMUTATIVE:
                    return on_device(scalar_op, b, a, b.device)              # 2.0 * x is x * 2.0
                return on_device(op, scalar_tensor(a, b.dtype, b.device), b, b.device)     # 1.0 - p
            if type(a) is int and b.dtype in keeps_int:
                return on_device(op, scalar_tensor(a, b.dtype, b.device), b, b.device)     # 1 - p
        return checked(op, a, b)

    def decomposed(a, b):
        """`op.Scalar` where no kernel takes it: the number as the tensor's 0-d tensor."""
        return guarded_call(op, a, scalar_tensor(b, a.dtype, a.device))
    register_decomposition(scalar_op, decomposed, name=f"{op}_scalar_as_tensor")
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
                return call_known(op, device.key_bit | AUTOGRAD_BIT if x.requires_grad is True else device.key_bit,
                                  x.dtype.name, x)
        return checked(op, x, floats_only)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise {op} of a {'floating-point ' if floats_only else ''}tensor."
    return fn

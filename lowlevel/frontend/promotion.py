"""Type promotion as PyTorch defines it (torch.result_type, torch.promote_types).

The dtype of `a OP b` when a and b differ:

  * categories: bool < integer < floating. A higher category wins; within one category the
    wider dtype wins, and float16 with bfloat16 meet at float32. (Complex is a fourth
    category PyTorch has and lowlevel does not: a complex operand is refused.)
  * priorities: tensors with dimensions over 0-d tensors over Python numbers ("wrapped
    numbers": bool, int, float). An operand of a lower priority may raise the result's
    category but never its width within the category: int32 tensor + 0-d int64 tensor is
    int32, float16 tensor + 2.5 is float16, but int32 tensor + 2.5 is float32 (the default
    float dtype) and int32 tensor + 0-d float64 tensor is float64.
  * a Python float stands for the default float dtype (float32), a Python int for int64,
    a Python bool for bool.

On top of result_type, the ops: true division of integers or bools gives the default float
dtype (true_divide_dtype); an in-place op refuses a result type its output cannot hold
(check_inplace: `i += 1.5` on an int64 tensor, as PyTorch's "result type Float can't be
cast to the desired output type Long").

result_type of two operands is cached per (dtype, priority) pair (binary_dtype), so an op
pays a dict lookup for its promotion.
"""
import numpy as np

from ..dispatch import call
from . import dtypes as dt
from .creation import scalar_tensor
from .device import on_their_device
from .errors import DTypeError
from .tensor import Tensor

guarded_call = on_their_device(call)          # CUDA work on its tensors' device

BOOL, INTEGER, FLOATING = 0, 1, 2
CATEGORY = {dt.bool_: BOOL, dt.int32: INTEGER, dt.int64: INTEGER,
            dt.float16: FLOATING, dt.bfloat16: FLOATING, dt.float32: FLOATING, dt.float64: FLOATING}
DEFAULT_FLOAT = dt.float32          # PyTorch's default dtype, what a Python float stands for

# PyTorch's names of the dtypes, as its messages print them
TORCH_NAME = {dt.bool_: "Bool", dt.int32: "Int", dt.int64: "Long", dt.float16: "Half", dt.bfloat16: "BFloat16",
              dt.float32: "Float", dt.float64: "Double"}

# Where the rank within a category decides: the wider dtype (bits of range and precision).
_RANK = {dt.bool_: 0, dt.int32: 1, dt.int64: 2, dt.float16: 3, dt.bfloat16: 3, dt.float32: 4, dt.float64: 5}

# priorities of an operand, highest first
DIMENSIONED, ZERO_DIM, NUMBER = 0, 1, 2


def promote_types(a: dt.DType, b: dt.DType) -> dt.DType:
    """torch.promote_types: the smallest dtype both a and b convert to within the higher
    category (float16 and bfloat16: float32)."""
    if a is b:
        return a
    ca, cb = CATEGORY[a], CATEGORY[b]
    if ca != cb:
        return a if ca > cb else b
    if {a, b} == {dt.float16, dt.bfloat16}:
        return dt.float32
    return a if _RANK[a] >= _RANK[b] else b


def number_dtype(x) -> dt.DType:
    """The dtype a Python (or numpy) number stands for: bool, int64, or the default float."""
    if isinstance(x, (bool, np.bool_)):
        return dt.bool_
    if isinstance(x, (int, np.integer)):
        return dt.int64
    if isinstance(x, (float, np.floating)):
        return DEFAULT_FLOAT
    if isinstance(x, (complex, np.complexfloating)):
        raise DTypeError(f"complex numbers are not supported: lowlevel has no complex dtype (got {x!r})")
    raise DTypeError(f"cannot combine a tensor with {type(x).__name__}")


def _operand(x) -> tuple:
    """(priority, dtype) of one operand."""
    if isinstance(x, Tensor):
        return (DIMENSIONED if x.shape else ZERO_DIM), x.dtype
    return NUMBER, number_dtype(x)


def _combine(higher, lower):
    """PyTorch's combine_categories: the result of a higher-priority group (or None) with a
    lower-priority one (or None): the lower may only raise the category."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if CATEGORY[higher] == FLOATING:
        return higher
    if higher is dt.bool_ or CATEGORY[lower] == FLOATING:
        # a bool group takes the lower's dtype; an integer group meeting floats takes the
        # floats' own width (int32 tensor + 0-d float64 tensor is float64)
        return promote_types(higher, lower)
    return higher


def _result(kinds) -> dt.DType:
    groups = [None, None, None]
    for priority, dtype in kinds:
        group = groups[priority]
        groups[priority] = dtype if group is None else promote_types(group, dtype)
    return _combine(groups[DIMENSIONED], _combine(groups[ZERO_DIM], groups[NUMBER]))


def result_type(*operands) -> dt.DType:
    """torch.result_type of tensors and Python numbers (any count, at least one)."""
    if not operands:
        raise TypeError("result_type: needs at least one operand")
    return _result([_operand(x) for x in operands])


_binary_cache: dict = {}        # ((priority, dtype), (priority, dtype)) -> the result dtype


def binary_dtype(a, b) -> dt.DType:
    """result_type(a, b), cached per the operands' (priority, dtype)."""
    key = (_operand(a), _operand(b))
    found = _binary_cache.get(key)
    if found is None:
        found = _binary_cache[key] = _result(key)
    return found


def true_divide_dtype(a, b) -> dt.DType:
    """The dtype of a / b: the result type, or the default float where that is bool or integer."""
    found = binary_dtype(a, b)
    return found if CATEGORY[found] == FLOATING else DEFAULT_FLOAT


def can_cast(source: dt.DType, target: dt.DType) -> bool:
    """torch.can_cast: a value of `source` may be written into `target` unless that lowers
    its category (float into an integer tensor, an integer into a bool tensor)."""
    return CATEGORY[source] <= CATEGORY[target]


def check_inplace(op: str, result: dt.DType, out: dt.DType) -> None:
    """Refuse an in-place op whose result type its output cannot hold, with PyTorch's message."""
    if not can_cast(result, out):
        raise DTypeError(f"{op}: result type {TORCH_NAME[result]} can't be cast to the desired output type "
                         f"{TORCH_NAME[out]}")


def promoted(x, dtype: dt.DType, like: Tensor):
    """An operand as the op's result type: a tensor cast to it (the backends' cast kernels),
    a number as its 0-d tensor on like's device (creation.scalar_tensor)."""
    if isinstance(x, Tensor):
        return x if x.dtype is dtype else guarded_call("cast", x, dtype=dtype)
    return scalar_tensor(x, dtype, like.device)

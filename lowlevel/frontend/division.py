"""Layer 1: floor division and the remainder, as Python and PyTorch define them.

    floor_divide(a, b)   a // b: the quotient rounded toward minus infinity (-7 // 2 == -4),
                         for floats too (7.5 // 2 == 3.0)
    remainder(a, b)      a % b: a - (a // b) * b, with the divisor's sign (-7 % 2 == 1)

Both promote their operands like every binary op (promotion.py: int tensor // 2.5 is
float32); two bool operands are refused, as in PyTorch. An integer division by zero is
refused on the CPU (PyTorch's "ZeroDivisionError") and undefined on CUDA, as a GPU's
division leaves it. remainder has a gradient (a: g, b: -g * (a // b)); floor_divide has
none, as in PyTorch. Attached to Tensor: //, %, their reflected and in-place forms, and the
methods floor_divide, remainder, floor_divide_, remainder_.
"""
from .autograd.formulas import formula, sum_to
from .errors import DTypeNotImplemented
from .fast_ops import binary_op
from .inplace import inplace_op
from .ops import checked_binary, is_bool
from .tensor import Tensor

_floor_divide = binary_op(checked_binary, "floor_divide")
_remainder = binary_op(checked_binary, "remainder")


def _refuse_bools(op: str, a, b) -> None:
    if is_bool(a) and is_bool(b):
        raise DTypeNotImplemented(f"{op}: not implemented for two bool operands (as in PyTorch); convert one with "
                         f".to(lowlevel.int64)")


def floor_divide(a, b) -> Tensor:
    """a // b elementwise (broadcasting), rounded toward minus infinity."""
    _refuse_bools("floor_divide", a, b)
    return _floor_divide(a, b)


def remainder(a, b) -> Tensor:
    """a % b elementwise (broadcasting), with the sign of b (Python's and PyTorch's %)."""
    _refuse_bools("remainder", a, b)
    return _remainder(a, b)


@formula("remainder", save="inputs")
def _remainder_backward(node, g):
    a, b = node.saved()
    return sum_to(g, a.shape), sum_to(-g * floor_divide(a, b), b.shape)


def _swapped(op):
    def method(self, other):
        return op(other, self)
    return method


floor_divide_ = inplace_op("floor_divide_", floor_divide)
remainder_ = inplace_op("remainder_", remainder)

_METHODS = {
    "__floordiv__": floor_divide, "__rfloordiv__": _swapped(floor_divide), "__mod__": remainder,
    "__rmod__": _swapped(remainder), "floor_divide": floor_divide, "remainder": remainder,
    "floor_divide_": floor_divide_, "remainder_": remainder_, "__ifloordiv__": floor_divide_, "__imod__": remainder_,
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

"""The exceptions the frontend raises where PyTorch raises RuntimeError.

PyTorch raises RuntimeError for most refusals (shapes that do not broadcast, a bad view or
reshape, a bad cat, item() of many elements, a dtype an op cannot take); lowlevel raised
ValueError or TypeError there before. Each class here is both: a subclass of RuntimeError
(so code written for PyTorch catches it) and of the ValueError or TypeError lowlevel's
callers caught until now (so their code keeps working).

    ShapeError   RuntimeError and ValueError: shapes, sizes, element counts
    DTypeError   RuntimeError and TypeError: dtypes an op cannot take or produce
    DeviceError  RuntimeError and ValueError: operands on different devices
    ValueRangeError  RuntimeError and ValueError: a number its dtype cannot hold
    ArgumentError    RuntimeError and ValueError: an argument an op cannot take
    DTypeNotImplemented  NotImplementedError (a RuntimeError) and TypeError: no kernel for a dtype
"""


class ShapeError(RuntimeError, ValueError):
    """Shapes that do not fit together: no broadcast, a bad view or reshape, a bad cat."""


class DTypeError(RuntimeError, TypeError):
    """A dtype an op cannot take, or a result type its output cannot hold."""


class DeviceError(RuntimeError, ValueError):
    """Operands of one op on different devices."""


class ValueRangeError(RuntimeError, ValueError):
    """A number a dtype cannot hold (an int beyond int32 into an int32 tensor)."""


class ArgumentError(RuntimeError, ValueError):
    """An argument an op cannot take (clamp without bounds, a zero arange step)."""


class DTypeNotImplemented(NotImplementedError, TypeError):
    """An op that has no kernel for a dtype, as PyTorch's NotImplementedError ("... not
    implemented for 'Bool'"; NotImplementedError is a RuntimeError)."""

"""Python ints become C integers only when they fit.

ctypes converts an int passed for a c_uint, c_size_t or c_int argument by keeping its low
bits, without an error: a grid of 2**32 + 1 reaches the driver as 1, an allocation of
2**64 + 64 bytes as 64. So an integer crosses into C only through here:

  - `c_integer(value, ctype, what)` is the conversion the Python API uses for what a user
    passes (sizes, counts, dimensions, memset values), so the error names the parameter;
  - `IntegerArguments` is the same check at the binding boundary, for every integer
    argument of every C function in a binding table (driver and cuBLAS), so that nothing
    the API layer does not check, now or later, can wrap around either.

A value that is no integer (1.5, None, a string) is a TypeError; one the C type cannot
hold is a ValueError. What the C type holds but the driver refuses (a grid.y of 70000)
still reaches the driver, which answers as it does on a GPU (CUDA_ERROR_INVALID_VALUE).
"""
import ctypes
import operator

# The ctypes integer types the binding tables use (c_size_t and c_uint64 are one type on
# 64-bit Linux, as are c_int64 and c_long).
INTEGER_TYPES = frozenset({ctypes.c_ubyte, ctypes.c_ushort, ctypes.c_int, ctypes.c_uint, ctypes.c_int64,
                           ctypes.c_uint64, ctypes.c_size_t})


def c_range(ctype) -> tuple[int, int]:
    """The smallest and largest value of a ctypes integer type."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value == -1:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def c_name(ctype) -> str:
    """'an unsigned 32-bit' for c_uint: what a message says the value must fit."""
    signed = ctype(-1).value == -1
    return f"{'a signed' if signed else 'an unsigned'} {8 * ctypes.sizeof(ctype)}-bit"


def integer(value, what: str) -> int:
    """`value` as a Python int: TypeError naming `what` if it is not an integer (numpy
    integers are; floats and bools are not, even 2.0: a size is never a float)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    return operator.index(value)


def c_integer(value, ctype, what: str) -> int:
    """`value` as a Python int that `ctype` holds exactly: TypeError naming `what` if it is
    not an integer, ValueError if `ctype` cannot hold it."""
    number = integer(value, what)
    low, high = c_range(ctype)
    if not low <= number <= high:
        raise ValueError(f"{what} = {number} does not fit {c_name(ctype)} C integer [{low}, {high}]")
    return number


class IntegerArguments:
    """The integer parameters of one C function, checked before each call.

    Built once per bound function from its argument types; `check(args)` is on every
    driver call, so the common case (a plain int in range) is one comparison each.
    """

    __slots__ = ("symbol", "checks")

    def __init__(self, symbol: str, argtypes):
        self.symbol = symbol
        self.checks = tuple((i, *c_range(t), t) for i, t in enumerate(argtypes)
                            if t in INTEGER_TYPES)

    def check(self, args) -> None:
        for i, low, high, ctype in self.checks:
            if i < len(args):
                value = args[i]
                if type(value) is not int or not low <= value <= high:
                    self._refuse_or_accept(i, value, ctype)

    def _refuse_or_accept(self, i: int, value, ctype) -> None:
        if isinstance(value, (ctype, bool)):
            return                      # a C value of exactly this type, or False/True (0/1)
        c_integer(value, ctype, f"{self.symbol}: argument {i + 1}")

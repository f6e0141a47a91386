"""The CPU backend's kernels for frontend/math_ops.py: sin cos floor ceil round trunc and
the bitwise ops, through numpy (cpu.py's values() and result(): bfloat16 and float16
computed in float32, rounded once on the way out). round is half to even, as PyTorch's."""
import numpy as np

from ..dispatch import CPU, register_kernel
from .cpu import result, values

UNARY = {"sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
         "bitwise_not": np.invert}
BINARY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


def _register() -> None:
    for name, fn in UNARY.items():
        def kernel(x, fn=fn):
            with np.errstate(all="ignore"):
                return result(fn(values(x)), x)
        register_kernel(name, CPU, kernel, name=name)
    for name, fn in BINARY.items():
        def kernel(a, b, fn=fn):
            return result(fn(values(a), values(b)), a)
        register_kernel(name, CPU, kernel, name=name)


_register()

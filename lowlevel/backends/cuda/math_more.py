"""The CUDA kernels of frontend/math_ops.py: sin cos floor ceil round trunc (float32 and
float64 in ptx/math_more.ptx; float16 and bfloat16 widened to float32 around them, exact,
with one rounding back) and the bitwise ops (and or xor not on bool, int32, int64), on
contiguous operands of the output's shape (a broadcast operand is materialised first).
"""
import math

from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.shapes import broadcast_shapes
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch
from .layout import cast, materialize

MODULE = "math_more"
FLOAT_UNARY = ("sin", "cos", "floor", "ceil", "round", "trunc")
WIDTH = {dt.bool_: "b8", dt.int32: "b32", dt.int64: "b64"}


def _run(kernel: str, shape: tuple, like: Tensor, *operands: Tensor) -> Tensor:
    out = empty(shape, dtype=like.dtype, device=like.device)
    n = math.prod(shape)
    if n:
        launch(MODULE, kernel, grid_for(n), BLOCK, (out, *(materialize(t, shape) for t in operands), n))
    return out


def _float_unary(op: str):
    def kernel(x: Tensor) -> Tensor:
        if x.dtype in (dt.float16, dt.bfloat16):
            return cast(kernel(cast(x, dt.float32)), x.dtype)
        return _run(f"{op}_{'f64' if x.dtype is dt.float64 else 'f32'}", x.shape, x, x)
    return kernel


def _bitwise(op: str):
    def kernel(a: Tensor, b: Tensor) -> Tensor:
        return _run(f"{op}_{WIDTH[a.dtype]}", tuple(broadcast_shapes(op, a.shape, b.shape)), a, a, b)
    return kernel


def bitwise_not(x: Tensor) -> Tensor:
    return _run(f"not_{WIDTH[x.dtype]}", x.shape, x, x)


def _register() -> None:
    floats = [dt.float32, dt.float64, dt.float16, dt.bfloat16]
    for op in FLOAT_UNARY:
        register_kernel(op, CUDA, _float_unary(op), dtypes=floats, name=op)
    for op in ("and", "or", "xor"):
        register_kernel(f"bitwise_{op}", CUDA, _bitwise(op), dtypes=list(WIDTH), name=f"bitwise_{op}")
    register_kernel("bitwise_not", CUDA, bitwise_not, dtypes=list(WIDTH), name="bitwise_not")


_register()

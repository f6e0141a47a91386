"""The CUDA backend's floor division and remainder (a // b, a % b with the divisor's sign):
the kernels of ptx/floordiv.ptx (tools/gen_floordiv_ptx.py) for int32, int64 and float64;
float32, float16 and bfloat16 are widened to float64 (exact), divided there, and rounded
back once. Operands are made contiguous in the output's shape first (broadcasting).
"""
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.shapes import broadcast_shapes
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch, suffix
from .layout import cast, materialize

_KERNEL = {"floor_divide": "floordiv", "remainder": "remainder"}
_WIDENED = (dt.float32, dt.float16, dt.bfloat16)


def _division_kernel(op: str):
    def kernel(a: Tensor, b: Tensor) -> Tensor:
        if a.dtype in _WIDENED:
            return cast(kernel(cast(a, dt.float64), cast(b, dt.float64)), a.dtype)
        shape = broadcast_shapes(op, a.shape, b.shape)
        out = empty(shape, dtype=a.dtype, device=a.device)
        n = out.numel()
        if n:
            sfx = suffix(a)
            launch("floordiv", f"{_KERNEL[op]}_{sfx}", grid_for(n), BLOCK,
                   (out, materialize(a, shape), materialize(b, shape), n))
        return out
    return kernel


for _op in _KERNEL:
    register_kernel(_op, CUDA, _division_kernel(_op), dtypes=[dt.int32, dt.int64, dt.float64, *_WIDENED], name=_op)

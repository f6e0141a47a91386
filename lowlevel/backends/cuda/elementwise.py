"""The CUDA backend's element-wise ops (float32 and float16): the kernels of
ptx/elementwise_f32.ptx and elementwise_f16.ptx, on contiguous operands of the output's
shape (a broadcast operand is first materialised by the strided-copy kernel, with stride 0
along its broadcast dimensions).
"""
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.shapes import broadcast_shapes
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch, suffix
from .layout import materialize

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max"}
_UNARY = {"neg": "neg", "relu": "relu", "exp": "exp"}


def _binary_kernel(op: str, name: str):
    def kernel(a: Tensor, b: Tensor) -> Tensor:
        sfx = suffix(a)
        shape = broadcast_shapes(op, a.shape, b.shape)
        out = empty(shape, dtype=a.dtype, device=a.device)
        n = out.numel()
        if n:
            a2, b2 = materialize(a, shape), materialize(b, shape)
            launch(f"elementwise_{sfx}", f"{name}_{sfx}", grid_for(n), BLOCK, (out, a2, b2, n))
        return out
    return kernel


def _unary_kernel(op: str, name: str):
    def kernel(x: Tensor) -> Tensor:
        sfx = suffix(x)
        out = empty(x.shape, dtype=x.dtype, device=x.device)
        n = out.numel()
        if n:
            x2 = materialize(x, x.shape)
            launch(f"elementwise_{sfx}", f"{name}_{sfx}", grid_for(n), BLOCK, (out, x2, n))
        return out
    return kernel


def _register() -> None:
    for op, name in _BINARY.items():
        register_kernel(op, CUDA, _binary_kernel(op, name), dtypes=[dt.float32, dt.float16], name=op)
    for op, name in _UNARY.items():
        register_kernel(op, CUDA, _unary_kernel(op, name), dtypes=[dt.float32, dt.float16], name=op)


_register()

"""The CUDA backend's element-wise ops (float32 and float16): the kernels of
ptx/elementwise_f32.ptx and elementwise_f16.ptx, on contiguous operands of the output's
shape (a broadcast operand is first materialised by the strided-copy kernel, with stride 0
along its broadcast dimensions).

Each op keeps a plan per (dtype, shapes, strides) of its operands: the output's shape and
element count, which operands must be made contiguous first, and the prepared kernel. A
repeat call is a dict lookup, the output's allocation and the launch.
"""
import math

from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import new_contiguous
from ...frontend.shapes import broadcast_shapes, contiguous_strides
from ...frontend.tensor import Tensor
from .launch import BLOCK, Plans, grid_for, prepared, run, suffix
from .layout import materialize

_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max"}
# op -> (kernel of x OP s, kernel of s OP x) in ptx/scalar_f32.ptx, for float32 operands of
# which one is a number (creation.scalar_tensor): the number is a kernel argument
_SCALAR = {"add": ("add_scalar_f32", "add_scalar_f32"), "sub": ("sub_scalar_f32", "rsub_scalar_f32"),
           "mul": ("mul_scalar_f32", "mul_scalar_f32"), "div": ("div_scalar_f32", "rdiv_scalar_f32")}
_UNARY = {"neg": "neg", "relu": "relu", "exp": "exp"}


class _Plan:
    """What a call with operands of these dtypes, shapes and strides does."""

    __slots__ = ("shape", "strides", "n", "ready", "kernel")

    def __init__(self, shape, operands, module: str, kernel: str):
        self.shape, self.strides = shape, contiguous_strides(shape)
        self.n = math.prod(shape)
        # an operand that is already contiguous in the output's shape is read in place
        self.ready = tuple(t.shape == shape and t.is_contiguous() for t in operands)
        self.kernel = (module, kernel, grid_for(self.n), BLOCK) if self.n else None


def _binary_kernel(op: str, name: str):
    plans = Plans()

    def plan(a: Tensor, b: Tensor) -> _Plan:
        sfx = suffix(a)
        return _Plan(broadcast_shapes(op, a.shape, b.shape), (a, b), f"elementwise_{sfx}", f"{name}_{sfx}")

    scalar_kernels = _SCALAR.get(op)

    def with_scalar(x: Tensor, s: float, name: str) -> Tensor:
        """x OP s (or s OP x) with s a kernel argument: no copy of s, no broadcast of it."""
        key = (name, x.shape, x.strides)
        p = plans.get(key) or plans.add(key, _Plan(x.shape, (x,), "scalar_f32", name))
        out = new_contiguous(p.shape, p.strides, x.dtype, x.device)
        if p.kernel is not None:
            x2 = x if p.ready[0] else materialize(x, p.shape)
            run(prepared(*p.kernel), (out, x2), (out.data_ptr, x2.data_ptr, s, p.n))
        return out

    def kernel(a: Tensor, b: Tensor) -> Tensor:
        if scalar_kernels is not None and a.dtype is dt.float32:
            if b.scalar_value is not None and b.ndim == 0:
                return with_scalar(a, b.scalar_value, scalar_kernels[0])
            if a.scalar_value is not None and a.ndim == 0:
                return with_scalar(b, a.scalar_value, scalar_kernels[1])
        key = (a.dtype, a.shape, a.strides, b.shape, b.strides)
        p = plans.get(key) or plans.add(key, plan(a, b))
        out = new_contiguous(p.shape, p.strides, a.dtype, a.device)
        if p.kernel is not None:
            ready_a, ready_b = p.ready
            a2 = a if ready_a else materialize(a, p.shape)
            b2 = b if ready_b else materialize(b, p.shape)
            run(prepared(*p.kernel), (out, a2, b2), (out.data_ptr, a2.data_ptr, b2.data_ptr, p.n))
        return out
    return kernel


def _unary_kernel(op: str, name: str):
    plans = Plans()

    def plan(x: Tensor) -> _Plan:
        sfx = suffix(x)
        return _Plan(x.shape, (x,), f"elementwise_{sfx}", f"{name}_{sfx}")

    def kernel(x: Tensor) -> Tensor:
        key = (x.dtype, x.shape, x.strides)
        p = plans.get(key) or plans.add(key, plan(x))
        out = new_contiguous(p.shape, p.strides, x.dtype, x.device)
        if p.kernel is not None:
            x2 = x if p.ready[0] else materialize(x, p.shape)
            run(prepared(*p.kernel), (out, x2), (out.data_ptr, x2.data_ptr, p.n))
        return out
    return kernel


def _register() -> None:
    for op, name in _BINARY.items():
        register_kernel(op, CUDA, _binary_kernel(op, name), dtypes=[dt.float32, dt.float16], name=op)
    for op, name in _UNARY.items():
        register_kernel(op, CUDA, _unary_kernel(op, name), dtypes=[dt.float32, dt.float16], name=op)


_register()

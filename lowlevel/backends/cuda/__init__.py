"""The CUDA backend: the handwritten kernels of ptx/ and cuBLAS, on the current stream.

    launch.py        launching a kernel of ptx/ on the current stream; telling the caching
                     allocator which streams use a tensor
    layout.py        contiguous copies of strided views, broadcasting, casts (every pair of dtypes),
                     host <-> device
    elementwise.py   add sub mul div maximum minimum neg relu exp abs sqrt pow and the math ops
                     (float32, float16, bfloat16, float64; the arithmetic also int32, int64, bool)
    compare.py       comparisons (-> bool) and where (every dtype), copy_ into strided views
    division.py      floor_divide and remainder (// and %, floor semantics; ptx/floordiv.ptx)
    reductions.py    sum max mean softmax (float32), by rows
    dtype_reductions.py  the other dtypes' reductions and softmax, argmax, argmin
    broadcast.py     the shape and strides two operands broadcast to, for the kernels' stride arguments
    fill.py          zeros ones full on the device: memsets, or fill_u16 / fill_u64 of ptx/fill.ptx
    indexing.py      gather, scatter, scatter_add, argsort (a stable rank sort), cumsum, cumprod
                     (ptx/index_ops.ptx)
    math_more.py     sin cos floor ceil round trunc, bitwise and or xor not (ptx/math_more.ptx)
    random.py        rand randn randint on the device: Philox4x32-10 (ptx/philox.ptx)
    masks.py         t[mask] (masked_select) and its gradient's scatter
    matmul.py        matmul on cuBLAS (float32, float64, float16, bfloat16)
    matmul_ptx.py    or on the handwritten sgemm_tiled / hgemm_mma: matmul_library("ptx")
    peer_copy.py     copies of tensors between two CUDA devices (peer access, or through the host)

Everything is queued on `lowlevel.cuda.current_stream()` and returns at once; nothing here
waits for the GPU except `to_host`, which must hand bytes to the CPU.

`lowlevel.backends.cuda.allow_tf32 = True` lets float32 matmul use TF32 tensor cores.
`lowlevel.backends.cuda.matmul_library("ptx")` (also a context manager) runs matmul on the
handwritten kernels of ptx/ instead of cuBLAS.
"""
import sys
import types

from . import (compare, division, dtype_reductions, elementwise, fill, indexing, layout, masks, math_more,  # noqa: F401
               matmul, random, reductions)  # (each registers its kernels)
from .matmul_ptx import matmul_library  # noqa: F401  (lowlevel.backends.cuda.matmul_library)


class _Package(types.ModuleType):
    """This package, with allow_tf32 read and set where matmul.py reads it (a plain module
    attribute here would be a copy that matmul.py never sees)."""

    @property
    def allow_tf32(self) -> bool:
        return matmul.allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        matmul.allow_tf32 = value


sys.modules[__name__].__class__ = _Package

"""Which library runs the CUDA backend's matmul: cuBLAS (the default) or the handwritten
kernels of ptx/ (float32: sgemm_tiled, float16: hgemm_mma), so the two can be compared.

    lowlevel.backends.cuda.matmul_library()            # "cublas" or "ptx": the current one
    lowlevel.backends.cuda.matmul_library("ptx")       # from now on
    with lowlevel.backends.cuda.matmul_library("ptx"): # for a block, then back
        c = a @ b

LOWLEVEL_MATMUL_LIBRARY=ptx|cublas sets the default at import. The ptx route has kernels
for float32 and float16 only (another dtype is a TypeError naming it, not a silent switch
to cuBLAS), and hgemm_mma needs N and K to be multiples of 8 and a GPU of sm_80 or newer
(a ValueError names the shape, or the GPU). `lowlevel trace matmul --library ptx` shows
the route.
"""
import os

from ...cuda import GPU
from ...cuda.context import ensure_context
from ...frontend import dtypes as dt
from ...frontend.tensor import Tensor
from .launch import prepared, run
from .layout import contiguous

LIBRARIES = ("cublas", "ptx")
KERNELS = {dt.float32: ("sgemm_tiled", 256), dt.float16: ("hgemm_mma", 128)}   # kernel, threads a block


def _checked(name) -> str:
    if name not in LIBRARIES:
        raise ValueError(f"matmul_library: {name!r} is not a matmul library; choose one of "
                         f"{', '.join(LIBRARIES)}")
    return name


_current = _checked(os.environ.get("LOWLEVEL_MATMUL_LIBRARY", "cublas"))


class matmul_library:  # noqa: N801  (a function to call, that is also a context manager)
    """matmul_library() -> the library in use; matmul_library(name) switches to it, and as
    a context manager switches back to the previous one on leaving the block."""

    def __new__(cls, name=None):
        if name is None:
            return _current
        return super().__new__(cls)

    def __init__(self, name=None):
        global _current
        self.previous, _current = _current, _checked(name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        global _current
        _current = self.previous

    def __repr__(self):
        return f"matmul_library({_current!r})"


def use_ptx() -> bool:
    return _current == "ptx"


_capabilities: dict = {}      # (driver, device) -> compute capability, asked once


def _capability() -> tuple[int, int]:
    """The compute capability of the current context's device."""
    drv, ctx = ensure_context()
    key = (id(drv), ctx.ordinal)
    if key not in _capabilities:
        _capabilities[key] = GPU(ctx.ordinal).compute_capability
    return _capabilities[key]


def _check(a: Tensor, m: int, n: int, k: int) -> tuple:
    found = KERNELS.get(a.dtype)
    if found is None:
        raise TypeError(f"matmul_library('ptx') has handwritten kernels for float32 (sgemm_tiled) "
                        f"and float16 (hgemm_mma), not {a.dtype.name}")
    if a.dtype is dt.float16:
        if n % 8 or k % 8:
            raise ValueError(f"hgemm_mma multiplies ({m} x {k}) @ ({k} x {n}) only when N and K are "
                             f"multiples of 8 (it copies rows in 16-byte pieces); got N = {n}, K = {k}")
        major, minor = _capability()
        if (major, minor) < (8, 0):
            raise ValueError(f"hgemm_mma needs tensor cores of sm_80 or newer; this GPU is sm_{major}{minor}")
    return found


def gemm(a: Tensor, b: Tensor, out: Tensor, m: int, n: int, k: int, batch: int) -> None:
    """out = a @ b (row-major, out contiguous: batch x m x n) by the handwritten kernel for
    the dtype, one launch per matrix of the batch."""
    kernel, threads = _check(a, m, n, k)
    a = a if a.is_contiguous() else contiguous(a)
    b = b if b.is_contiguous() else contiguous(b)
    k_prepared = prepared(kernel, kernel, (-(-n // 64), -(-m // 64)), (threads, 1, 1))
    size = a.dtype.itemsize
    for i in range(batch):
        pa = a.data_ptr + (i * m * k * size if a.ndim == 3 else 0)
        pb = b.data_ptr + (i * k * n * size if b.ndim == 3 else 0)
        run(k_prepared, (a, b, out), [pa, pb, out.data_ptr + i * m * n * size, m, n, k])

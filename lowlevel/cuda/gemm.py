"""Row-major matrix multiply on cuBLAS, for the tensor layer.

cuBLAS is column-major. A row-major matrix with row stride ld is, read column-major, its
transpose with the same leading dimension. So for row-major C = op(A) @ op(B):

    C^T = op(B)^T @ op(A)^T      (column-major)

which is one cuBLAS call with the operands swapped, m and n swapped, and no copies: a
transposed view (a matrix stored the other way round) is just a transpose flag.
"""
import numpy as np

from . import cublas
from ..capi.cublas_constants import MATH_MODE

_EX_TYPES = {np.dtype(np.float16): "R_16F", "bfloat16": "R_16BF"}


def gemm_rowmajor(handle, A, B, C, m: int, n: int, k: int, *, dtype, lda: int, ldb: int, ldc: int,
                  trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0,
                  batch: int = 1, stride_a: int = 0, stride_b: int = 0, stride_c: int = 0,
                  tf32: bool = False) -> None:
    """C (m x n, row stride ldc) = alpha * op(A) @ op(B) + beta * C, all row-major.

    op(A) is m x k: A is stored m x k (row stride lda), or k x m when trans_a (a transposed
    view). Likewise op(B) is k x n. `batch` > 1 multiplies batch pairs whose matrices lie
    stride_* elements apart. dtype: float32 (Sgemm; TF32 tensor cores when tf32=True, via
    the handle's math mode), float64 (Dgemm), float16 or "bfloat16" (GemmEx, float32 compute).
    """
    op_a, op_b = "T" if trans_a else "N", "T" if trans_b else "N"
    # Column-major view: C^T (n x m) = op(B)^T (n x k) @ op(A)^T (k x m).
    args = (handle, op_b, op_a, n, m, k)
    key = dtype if dtype == "bfloat16" else np.dtype(dtype)
    if key == np.float32:
        previous = handle.math_mode if tf32 else None
        if tf32:
            handle.math_mode = "CUBLAS_TF32_TENSOR_OP_MATH"
        try:
            if batch == 1:
                cublas.sgemm(*args, alpha, B, ldb, A, lda, beta, C, ldc)
            else:
                cublas.sgemm_strided_batched(*args, alpha, B, ldb, stride_b, A, lda, stride_a, beta, C, ldc,
                                             stride_c, batch)
        finally:
            if tf32:
                handle.math_mode = previous
    elif key == np.float64:
        if batch != 1:
            for i in range(batch):
                cublas.dgemm(*args, alpha, int(B) + 8 * i * stride_b, ldb, int(A) + 8 * i * stride_a, lda,
                             beta, int(C) + 8 * i * stride_c, ldc)
        else:
            cublas.dgemm(*args, alpha, B, ldb, A, lda, beta, C, ldc)
    elif key in _EX_TYPES:
        t = _EX_TYPES[key]
        # float32 compute means float32 all the way: no split-K reduction in half precision.
        previous = handle.math_mode
        handle.math_mode = previous | MATH_MODE["CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION"]
        try:
            if batch == 1:
                cublas.gemm_ex(*args, alpha, B, t, ldb, A, t, lda, beta, C, t, ldc, "32F")
            else:
                cublas.gemm_strided_batched_ex(*args, alpha, B, t, ldb, stride_b, A, t, lda, stride_a, beta, C, t,
                                               ldc, stride_c, batch, "32F")
        finally:
            handle.math_mode = previous
    else:
        raise TypeError(f"gemm_rowmajor: no cuBLAS path for dtype {dtype!r} "
                        f"(float32, float64, float16 and bfloat16 have one)")

"""The CUDA backend's matmul, on cuBLAS: float32 (cublasSgemm_v2, full precision unless
allow_tf32), float64, and float16 / bfloat16 through cublasGemmEx with float32
accumulation; 1-D operands, 2-D, and batches of 3-D. Transposed views are passed to cuBLAS
as transposed operands, not copied. matmul_ptx.py: the handwritten kernels instead, when
asked (`lowlevel.backends.cuda.matmul_library("ptx")`).
"""
from ... import trace
from ...cuda import cublas, current_stream, memset_d8
from ...cuda.gemm import gemm_rowmajor
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.tensor import Tensor
from . import matmul_ptx
from .launch import record_uses
from .layout import contiguous

# float32 matmul on TF32 tensor cores: opt in, as it loses precision. Set it as
# lowlevel.backends.cuda.allow_tf32 (the package forwards it here).
allow_tf32 = False


def _as_matrix(t: Tensor):
    """(tensor, transposed, ld) for a 2-D view cuBLAS can read in place, copying otherwise."""
    rows, cols = t.shape[-2], t.shape[-1]
    rs, cs = t.strides[-2], t.strides[-1]
    if cs == 1 and rs >= max(1, cols):
        return t, False, rs
    if rs == 1 and cs >= max(1, rows):
        return t, True, cs                       # a transposed view: stored cols x rows
    t = contiguous(t)
    return t, False, max(1, cols)


@register_kernel("matmul", CUDA, dtypes=[dt.float32, dt.float64, dt.float16, dt.bfloat16])
def matmul(a: Tensor, b: Tensor) -> Tensor:
    a_vector, b_vector = a.ndim == 1, b.ndim == 1
    if a_vector:
        a = a[None, :]
    if b_vector:
        b = b[:, None]
    batch = a.shape[0] if a.ndim == 3 else b.shape[0] if b.ndim == 3 else 1
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out_shape = ((batch,) if max(a.ndim, b.ndim) == 3 else ()) + (m, n)
    out = empty(out_shape, dtype=a.dtype, device=a.device)
    if out.numel():
        if k == 0:
            memset_d8(out.data_ptr, 0, out.numel() * out.dtype.itemsize, stream=current_stream())
        elif matmul_ptx.use_ptx():               # the handwritten kernels, when asked
            matmul_ptx.gemm(a, b, out, m, n, k, batch)
        else:
            a2, ta, lda = _as_matrix(a)
            b2, tb, ldb = _as_matrix(b)
            handle = cublas.get_handle(current_stream())
            record_uses((a2, b2, out), current_stream())
            dtype = "bfloat16" if a.dtype is dt.bfloat16 else a.dtype.storage
            gemm_rowmajor(handle, a2.data_ptr, b2.data_ptr, out.data_ptr, m, n, k, dtype=dtype, lda=lda, ldb=ldb,
                          ldc=n, trans_a=ta, trans_b=tb, batch=batch,
                          stride_a=a2.strides[0] if a2.ndim == 3 else 0,
                          stride_b=b2.strides[0] if b2.ndim == 3 else 0, stride_c=m * n,
                          tf32=allow_tf32 and a.dtype is dt.float32)
            if trace.active is not None:
                trace.note_launch(kernel=f"cuBLAS gemm ({a.dtype.name})", module="cublas", grid=None, block=None,
                                  image_kind="sass" if handle.lib.kind == "cuda" else "emulated",
                                  stream=current_stream())
    if a_vector:
        out = out[..., 0, :]
    if b_vector:
        out = out[..., 0]
    return out

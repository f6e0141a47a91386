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
from .launch import OpPlan, Plans, new_output, record_uses, record_uses_on
from .layout import contiguous

# float32 matmul on TF32 tensor cores: opt in, as it loses precision. Set it as
# lowlevel.backends.cuda.allow_tf32 (the package forwards it here).
allow_tf32 = False


class _GemmPlan(OpPlan):
    """A float32 2-D @ 2-D product whose operands cuBLAS reads in place (row-major, or
    transposed views), in full precision: the output's shape and, per context, the prepared
    sgemm (cublas.PreparedSgemm: sizes, leading dimensions and flags checked once)."""

    __slots__ = ("dims",)

    def __init__(self, m: int, n: int, k: int, a_layout, b_layout):
        super().__init__((m, n), (n, 1), 4 * m * n, None)
        (ta, lda), (tb, ldb) = a_layout, b_layout
        # row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T (see cuda/gemm.py)
        self.dims = ("T" if tb else "N", "T" if ta else "N", n, m, k, 1.0, ldb, lda, 0.0, n)

    def runner_for(self, drv, ctx):
        return cublas.PreparedSgemm(cublas.library(), *self.dims)


def _in_place_layout(t: Tensor):
    """(transposed, ld) when cuBLAS reads the 2-D `t` in place (as _as_matrix), else None."""
    (rows, cols), (rs, cs) = t.shape, t.strides
    if cs == 1 and rs >= max(1, cols):
        return False, rs
    if rs == 1 and cs >= max(1, rows):
        return True, cs
    return None


_plans = Plans()


def _gemm_plan(a: Tensor, b: Tensor) -> _GemmPlan | None:
    """The plan of a @ b, None when it takes the general path (another dtype, TF32, 1-D or
    3-D operands, an empty product, an operand that must be copied first, the handwritten
    kernels asked for instead of cuBLAS)."""
    if allow_tf32 or matmul_ptx.use_ptx():
        return None
    key = (a.dtype, a.shape, a.strides, b.shape, b.strides)
    plan = _plans.get(key, False)
    if plan is False:
        if len(a.shape) != 2 or len(b.shape) != 2 or a.dtype is not dt.float32:
            return _plans.add(key, None)
        (m, k), n = a.shape, b.shape[1]
        a_layout, b_layout = _in_place_layout(a), _in_place_layout(b)
        ok = m and n and k and a_layout is not None and b_layout is not None
        plan = _plans.add(key, _GemmPlan(m, n, k, a_layout, b_layout) if ok else None)
    return plan


def _planned(plan: _GemmPlan, a: Tensor, b: Tensor) -> Tensor:
    out, address, stream, handle, bound = new_output(plan, dt.float32, a.device)
    ctx = bound.ctx
    h = cublas.handle_in(ctx.drv, ctx, stream)
    record_uses_on((a, b), stream, handle)
    bound.runner(h, b.data_ptr, a.data_ptr, address)
    if trace.active is not None:
        trace.note_launch(kernel="cuBLAS gemm (float32)", module="cublas", grid=None, block=None,
                          image_kind="sass" if h.lib.kind == "cuda" else "emulated", stream=stream)
    return out


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
    plan = _gemm_plan(a, b)
    if plan is not None:
        return _planned(plan, a, b)
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

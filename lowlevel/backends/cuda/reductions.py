"""The CUDA backend's reductions and softmax (float32): sum, max and mean over everything or
one dimension, by rows of a contiguous matrix with the reduced dimension last (the row
kernels of ptx/tensor_ops.ptx and ptx/softmax.ptx, and ptx/reduce_sum.ptx for a full sum).
"""
import numpy as np

from ...cuda import current_stream, memset_d32
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch, rows_grid
from .layout import materialize, rows_last


def _zeros_f32(shape, device) -> Tensor:
    out = empty(shape, dtype=dt.float32, device=device)
    if out.numel():
        memset_d32(out.data_ptr, 0, out.numel(), stream=current_stream())
    return out


def _reduce_rows(kind: str, x: Tensor, dim: int | None, keepdim: bool) -> Tensor:
    """sum or max of float32 x over `dim` (or everything), by rows of a contiguous matrix."""
    if dim is None:
        rows_view, cols, out_shape = materialize(x, x.shape), x.numel(), ()
    else:
        rows_view, _ = rows_last(x, dim)
        cols = x.shape[dim]
        out_shape = tuple(s for i, s in enumerate(x.shape) if i != dim)
    rows = rows_view.numel() // max(1, cols) if cols else int(np.prod(out_shape, dtype=np.int64))
    if dim is None and kind == "sum":
        out = _zeros_f32((), x.device)                 # reduce_sum adds into its output
        if cols:
            launch("reduce_sum", "reduce_sum_f32", grid_for(cols), BLOCK, (rows_view, out, cols))
    else:
        out = empty(out_shape, dtype=dt.float32, device=x.device)
        if rows:
            launch("tensor_ops", f"reduce_rows_{kind}_f32", rows_grid(rows), BLOCK, (rows_view, out, rows, cols))
    if keepdim:
        out = out.reshape([1 if dim is None or i == dim else s for i, s in enumerate(x.shape)])
    return out


@register_kernel("sum", CUDA, dtypes=[dt.float32])
def sum_(x, dim, keepdim):
    return _reduce_rows("sum", x, dim, keepdim)


@register_kernel("max", CUDA, dtypes=[dt.float32])
def max_(x, dim, keepdim):
    return _reduce_rows("max", x, dim, keepdim)


@register_kernel("mean", CUDA, dtypes=[dt.float32])
def mean(x, dim, keepdim):
    total = _reduce_rows("sum", x, dim, keepdim)
    count = x.numel() if dim is None else x.shape[dim]
    out = empty(total.shape, dtype=dt.float32, device=x.device)
    n = out.numel()
    scale = np.float32(1.0 / count) if count else np.float32(np.nan)
    launch("tensor_ops", "scale_f32", grid_for(n), BLOCK, (out, total, scale, n))
    return out


@register_kernel("softmax", CUDA, dtypes=[dt.float32])
def softmax(x, dim):
    rows_view, order = rows_last(x, dim)
    cols = x.shape[dim]
    rows = rows_view.numel() // max(1, cols)
    out = empty(rows_view.shape, dtype=dt.float32, device=x.device)
    if rows and cols:
        launch("softmax", "softmax_rows_f32", rows_grid(rows), BLOCK, (rows_view, out, rows, cols))
    inverse = [order.index(d) for d in range(x.ndim)]
    return out.permute(inverse)

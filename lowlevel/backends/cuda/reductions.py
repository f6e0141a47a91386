"""The CUDA backend's reductions and softmax (float32): sum, max and mean over everything or
one dimension, by rows of a contiguous matrix with the reduced dimension last (the row
kernels of ptx/tensor_ops.ptx and ptx/softmax.ptx, and ptx/reduce_sum.ptx for a full sum).
"""
import math

import numpy as np

from ...cuda import current_stream, memset_d32
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.shapes import contiguous_strides
from ...frontend.tensor import Tensor
from .launch import BLOCK, OpPlan, Plans, grid_for, launch, launch_plan, new_output, rows_grid
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


class _RowsPlan(OpPlan):
    """A reduction or softmax along the last dimension of a contiguous float32 tensor: the
    rows, in place, with no permute or copy first. Other layouts take the general path."""

    __slots__ = ("rows", "cols")

    def __init__(self, x: Tensor, out_shape: tuple, module: str, kernel: str):
        cols, rows = x.shape[-1], math.prod(x.shape[:-1])
        super().__init__(out_shape, contiguous_strides(out_shape), 4 * math.prod(out_shape),
                         (module, kernel, rows_grid(rows), BLOCK) if rows and cols else None)
        self.rows, self.cols = rows, cols


_plans = Plans()


def _last_dim_plan(what: str, x: Tensor, dim, keepdim: bool) -> _RowsPlan | None:
    """The plan for `what` ("sum", "max", "softmax") over `dim` of x, None when x is not a
    contiguous tensor reduced along its last dimension."""
    key = (what, x.shape, x.strides, dim, keepdim)
    plan = _plans.get(key, False)
    if plan is False:
        plan = None
        if x.ndim and dim == x.ndim - 1 and x.is_contiguous():
            if what == "softmax":
                plan = _RowsPlan(x, x.shape, "softmax", "softmax_rows_f32")
            else:
                shape = x.shape[:-1] + ((1,) if keepdim else ())
                plan = _RowsPlan(x, shape, "tensor_ops", f"reduce_rows_{what}_f32")
        _plans.add(key, plan)
    return plan


def _rows(plan: _RowsPlan, x: Tensor) -> Tensor:
    out, address, stream, handle, bound = new_output(plan, dt.float32, x.device)
    if plan.kernel is not None:
        launch_plan(bound, (x,), (x.data_ptr, address, plan.rows, plan.cols), stream, handle)
    return out


def _reduce(kind: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    # _last_dim_plan's lookup, inline: a repeat call is one dict lookup, not a frame more
    plan = _plans.get((kind, x.shape, x.strides, dim, keepdim), False)
    if plan is False:
        plan = _last_dim_plan(kind, x, dim, keepdim)
    if plan is None or plan.kernel is None:     # no rows, or empty ones: the general path's zeros
        return _reduce_rows(kind, x, dim, keepdim)
    return _rows(plan, x)


@register_kernel("sum", CUDA, dtypes=[dt.float32])
def sum_(x, dim, keepdim):
    return _reduce("sum", x, dim, keepdim)


@register_kernel("max", CUDA, dtypes=[dt.float32])
def max_(x, dim, keepdim):
    return _reduce("max", x, dim, keepdim)


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
    plan = _plans.get(("softmax", x.shape, x.strides, dim, False), False)    # as in _reduce
    if plan is False:
        plan = _last_dim_plan("softmax", x, dim, False)
    if plan is not None:
        return _rows(plan, x)
    rows_view, order = rows_last(x, dim)
    cols = x.shape[dim]
    rows = rows_view.numel() // max(1, cols)
    out = empty(rows_view.shape, dtype=dt.float32, device=x.device)
    if rows and cols:
        launch("softmax", "softmax_rows_f32", rows_grid(rows), BLOCK, (rows_view, out, rows, cols))
    inverse = [order.index(d) for d in range(x.ndim)]
    return out.permute(inverse)

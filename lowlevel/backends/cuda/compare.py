"""The CUDA backend's comparisons (-> bool), where, and copy_: writing into a strided view
(the kernels of ptx/compare_f32.ptx, the generated compare_{i32,i64,f64}.ptx and
where_bits.ptx, and ptx/strided_store.ptx).

Comparisons run for float32, float64, int32 and int64, for float16 and bfloat16 by widening
both operands to float32 first (exact, so the comparison is too), and for bool as int32
(False = 0 < True = 1, as numpy and PyTorch order them); where for every dtype, by the width
of its elements. Another dtype finds no kernel here and the dispatcher's
NotImplementedError names the op and the dtype (no silent host round trip).
"""
import struct

from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.creation import empty
from ...frontend.shapes import broadcast_shapes
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch, suffix
from .layout import MAX_DIMS, cast, materialize

_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_STORE_KERNEL = {1: "strided_store_b8", 2: "strided_store_b16", 4: "strided_store_b32", 8: "strided_store_b64"}


# compared in a wider dtype, exactly: the halves as float32, bool as int32
_WIDER = {dt.float16: dt.float32, dt.bfloat16: dt.float32, dt.bool_: dt.int32}


def _compare_kernel(op: str):
    def kernel(a: Tensor, b: Tensor) -> Tensor:
        shape = broadcast_shapes(op, a.shape, b.shape)
        out = empty(shape, dtype=dt.bool_, device=a.device)
        n = out.numel()
        if n:
            if a.dtype in _WIDER:
                a, b = cast(a, _WIDER[a.dtype]), cast(b, _WIDER[a.dtype])
            sfx = suffix(a)
            launch(f"compare_{sfx}", f"{op}_{sfx}", grid_for(n), BLOCK,
                   (out, materialize(a, shape), materialize(b, shape), n))
        return out
    return kernel


for _op in _COMPARE:
    register_kernel(_op, CUDA, _compare_kernel(_op), dtypes=[dt.float32, dt.float64, dt.int32, dt.int64, *_WIDER],
                    name=_op)

# where moves raw bits: one kernel per element width
_WHERE_KERNEL = {1: ("where_bits", "where_b8"), 2: ("where_bits", "where_b16"), 4: ("compare_f32", "where_f32"),
                 8: ("where_bits", "where_b64")}


@register_kernel("where", CUDA, dtypes=dt.ALL)
def where(a: Tensor, b: Tensor, cond: Tensor) -> Tensor:
    shape = broadcast_shapes("where", broadcast_shapes("where", a.shape, b.shape), cond.shape)
    out = empty(shape, dtype=a.dtype, device=a.device)
    n = out.numel()
    if n:
        launch(*_WHERE_KERNEL[a.dtype.itemsize], grid_for(n), BLOCK,
               (out, materialize(cond, shape), materialize(a, shape), materialize(b, shape), n))
    return out


def view_layout(t: Tensor) -> tuple[bytes, int]:
    """The 104-byte Layout struct of ptx/strided_store.ptx for the view t, and its ndim."""
    # Size-1 dimensions are dropped (their stride never matters), so more views fit MAX_DIMS.
    dims = [(s, st) for s, st in zip(t.shape, t.strides) if s != 1] or [(1, 0)]
    if len(dims) > MAX_DIMS:
        raise NotImplementedError(f"copy_ on CUDA writes views of up to {MAX_DIMS} dimensions, got {t.shape}")
    shape = [s for s, _ in dims] + [1] * (MAX_DIMS - len(dims))
    strides = [st for _, st in dims] + [0] * (MAX_DIMS - len(dims))
    return struct.pack("<13Q", len(dims), *shape, *strides), len(dims)


@register_kernel("copy_", CUDA)
def copy_(dst: Tensor, src: Tensor) -> Tensor:
    """Write src (of dst's dtype, broadcastable to dst's shape, not overlapping dst) into the
    view dst: src is made contiguous in dst's shape, then scattered by strided_store."""
    if dst.dtype.itemsize not in _STORE_KERNEL:
        raise NotImplementedError(f"copy_ on CUDA writes 1, 2, 4 and 8-byte elements, not {dst.dtype.name}")
    n = dst.numel()
    if n:
        layout, _ = view_layout(dst)
        launch("strided_store", _STORE_KERNEL[dst.dtype.itemsize], grid_for(n), BLOCK,
               (dst, materialize(src, dst.shape), n, layout))
    return dst

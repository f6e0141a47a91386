"""The CUDA backend's layout kernels: contiguous copies of strided views (the strided-copy
kernel of ptx/tensor_ops.ptx), broadcasting by materialising, casts, and copies between
the host and the device. Only `to_host` waits: it must hand bytes to the CPU.
"""
import struct

from ...cuda import current_stream, memcpy_dtoh_async
from ...cuda.graph import refuse_while_capturing
from ...dispatch import CUDA, call, register_kernel
from ...frontend.creation import empty, from_numpy_values
from ...frontend.tensor import Tensor
from .launch import BLOCK, SUFFIX, grid_for, launch, record_uses, suffix
from .peer_copy import peer_copy

_COPY_KERNEL = {1: "strided_copy_b8", 2: "strided_copy_b16", 4: "strided_copy_b32", 8: "strided_copy_b64"}
MAX_DIMS = 6


@register_kernel("contiguous", CUDA)
def contiguous(x: Tensor) -> Tensor:
    """A contiguous copy of any strided view (the strided-copy kernel of ptx/tensor_ops.ptx)."""
    out = empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.numel()
    if n == 0:
        return out
    if x.dtype.itemsize not in _COPY_KERNEL:
        raise NotImplementedError(f"contiguous() on CUDA copies 1, 2, 4 and 8-byte elements, not {x.dtype.name}")
    # Drop size-1 dimensions (their stride does not matter) so more views fit MAX_DIMS.
    dims = [(s, st) for s, st in zip(x.shape, x.strides) if s != 1] or [(1, 0)]
    if len(dims) > MAX_DIMS:
        raise NotImplementedError(f"contiguous() on CUDA handles up to {MAX_DIMS} dimensions, got {x.shape}")
    shape = [s for s, _ in dims] + [1] * (MAX_DIMS - len(dims))
    strides = [st for _, st in dims] + [0] * (MAX_DIMS - len(dims))
    layout = struct.pack("<13Q", len(dims), *shape, *strides)
    launch("tensor_ops", _COPY_KERNEL[x.dtype.itemsize], grid_for(n), BLOCK, (out, x, n, layout))
    return out


def materialize(t: Tensor, shape: tuple) -> Tensor:
    """`t` broadcast to `shape`, contiguous (a copy only when needed)."""
    if t.shape == tuple(shape) and t.is_contiguous():
        return t
    return contiguous(t.expand(shape))


def rows_last(x: Tensor, dim: int) -> tuple[Tensor, list]:
    """x with `dim` moved last, contiguous, and the permutation used."""
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    return materialize(x.permute(order), tuple(x.shape[d] for d in order)), order


# ---- casts and copies ----------------------------------------------------------------------------------
# Every pair of dtypes converts on the device, by cast_<from>_<to>: the handwritten kernels of
# ptx/tensor_ops.ptx and ptx/cast_bf16.ptx, the other pairs generated into ptx/cast_all.ptx by
# tools/gen_cast_ptx.py (its header gives the rules: numpy's and PyTorch's; float -> int
# truncates, and where that is undefined in C, PTX's cvt.rzi gives NaN -> 0 and saturates).
_HANDWRITTEN = {("f32", "f16"): "tensor_ops", ("f16", "f32"): "tensor_ops", ("f32", "f64"): "tensor_ops",
                ("f64", "f32"): "tensor_ops", ("i32", "f32"): "tensor_ops", ("f32", "i32"): "tensor_ops",
                ("f32", "bf16"): "cast_bf16", ("bf16", "f32"): "cast_bf16"}


def suffix_of(dtype) -> str:
    return SUFFIX[dtype]


@register_kernel("cast", CUDA)
def cast(x: Tensor, dtype) -> Tensor:
    pair = (suffix(x), suffix_of(dtype))
    out = empty(x.shape, dtype=dtype, device=x.device)
    n = out.numel()
    if n:
        launch(_HANDWRITTEN.get(pair, "cast_all"), f"cast_{pair[0]}_{pair[1]}", grid_for(n), BLOCK,
               (out, materialize(x, x.shape), n))
    return out


@register_kernel("to_device", CUDA)
def to_device(x: Tensor, device) -> Tensor:
    """Host tensor -> CUDA: an async copy on the current stream (staged from pageable memory);
    a tensor of another CUDA device: a peer copy (peer_copy.py)."""
    if x.device.type == "cuda":
        return peer_copy(materialize(x, x.shape), device)
    return from_numpy_values(x.dtype.to_numpy_values(x.host_view()), x.dtype, device)


@register_kernel("to_host", CUDA)
def to_host(x: Tensor) -> Tensor:
    """CUDA -> host: queued on the current stream, so it follows the work that made x; a copy
    into pageable memory returns only when the bytes have arrived."""
    refuse_while_capturing("a copy to the host (to('cpu'))")
    src = materialize(x, x.shape)
    out = empty(x.shape, dtype=x.dtype, device="cpu")
    nbytes = out.numel() * x.dtype.itemsize
    if nbytes:
        stream = current_stream()
        record_uses((src,), stream)
        memcpy_dtoh_async(out.storage.host[:nbytes], src.data_ptr, stream)
    return out


@register_kernel("cat", CUDA)
def cat(*tensors, dim: int) -> Tensor:
    """Each tensor written into its slice of one new tensor along dim (by copy_'s kernels)."""
    first = tensors[0]
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    out = empty(tuple(shape), dtype=first.dtype, device=first.device)
    at = 0
    for t in tensors:
        size = t.shape[dim]
        if size and t.numel():
            call("copy_", out[(slice(None),) * dim + (slice(at, at + size),)], t)
        at += size
    return out

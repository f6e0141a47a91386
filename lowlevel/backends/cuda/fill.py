"""zeros, ones, full (and zeros_like, ones_like) on CUDA: the value's bit pattern written on
the device, with no copy from host memory, so that they are fast for big tensors and may be
captured in a CUDA graph (a copy from pageable memory may not).

    every byte alike (0, -1 of an int, ...)   cuMemsetD8Async over all the bytes
    4-byte pattern, or 8 bytes of two equal   cuMemsetD32Async
    32-bit halves
    other 2-byte patterns (float16 1.0)       fill_u16 of ptx/fill.ptx
    other 8-byte patterns (float64 1.0)       fill_u64 of ptx/fill.ptx

and arange: start + i * step, computed per element on the device (ptx/sequence.ptx) in
float64 or int64; the frontend casts it to the tensor's dtype there.
"""
import numpy as np

from ...cuda import current_stream, memset_d8, memset_d32
from ...dispatch import CUDA, register_kernel
from ...frontend import dtypes as dt
from ...frontend.tensor import Tensor
from .launch import BLOCK, grid_for, launch, record_uses


def pattern(t: Tensor, value) -> np.ndarray:
    """The bytes of one element of t's dtype holding `value`, as the tensor stores it."""
    return np.array(t.dtype.from_numpy_values(np.array(value))).reshape(-1).view(np.uint8)


@register_kernel("fill", CUDA)
def fill(t: Tensor, value) -> Tensor:
    """Every element of the contiguous tensor t = value (in place; t is returned)."""
    n = t.numel()
    if n == 0:
        return t
    b = pattern(t, value)
    stream = current_stream()
    if (b == b[0]).all():
        record_uses((t,), stream)
        memset_d8(t.data_ptr, int(b[0]), n * b.size, stream)
    elif b.size == 4 or (b.size == 8 and (b[:4] == b[4:]).all()):
        record_uses((t,), stream)
        memset_d32(t.data_ptr, int(b[:4].view(np.uint32)[0]), n * b.size // 4, stream)
    elif b.size == 2:
        launch("fill", "fill_u16", grid_for(n), BLOCK, (t, int(b.view(np.uint16)[0]), n))
    else:
        launch("fill", "fill_u64", grid_for(n), BLOCK, (t, int(b.view(np.uint64)[0]), n))
    return t


@register_kernel("arange", CUDA, dtypes=[dt.float64, dt.int64])
def arange(t: Tensor, start, step) -> Tensor:
    """t[i] = start + i * step for the contiguous float64 or int64 tensor t (ptx/sequence.ptx)."""
    n = t.numel()
    if t.dtype is dt.float64:
        launch("sequence", "arange_f64", grid_for(n), BLOCK, (t, float(start), float(step), n))
    else:
        mask = (1 << 64) - 1
        launch("sequence", "arange_i64", grid_for(n), BLOCK, (t, int(start) & mask, int(step) & mask, n))
    return t

"""Device memory, pinned host memory, copies and memsets.

Copies take numpy arrays on the host side and check sizes before anything reaches the
driver: a copy that does not fit is a ValueError naming both sizes. Device pointers are
DeviceAllocation objects or plain ints.
"""
import ctypes

import numpy as np

from .context import ContextResource, ensure_context


class DeviceAllocation(ContextResource):
    """A block of device memory: `.ptr` (the CUdeviceptr), `.size` in bytes, `int()`.

    Freed by `.free()` or when garbage collected. One allocated with a stream
    (mem_alloc_async) is freed in that stream's order (cuMemFreeAsync).
    """

    def __init__(self, ptr: int, size: int, stream=None):
        self.ptr = ptr
        self.size = size
        self._stream = stream
        self._adopt()

    def __int__(self):
        return self.ptr

    def __index__(self):
        return self.ptr

    def __repr__(self):
        state = "freed" if self.ptr is None else f"{self.ptr:#x}"
        return f"<DeviceAllocation {state}, {self.size} bytes>"

    def free(self, stream=None) -> None:
        """Release the memory now (cuMemFree), or in `stream`'s order (cuMemFreeAsync)."""
        if stream is not None:
            self._stream = stream
        self.release()
        self.ptr = None         # also when the context was reset: the pointer means nothing now

    def _release(self) -> None:
        ptr, self.ptr = self.ptr, None
        if self._stream is not None:
            self._drv.cuMemFreeAsync(ptr, self._stream.handle)
        else:
            self._drv.cuMemFree(ptr)


def _ptr(x) -> int:
    if isinstance(x, DeviceAllocation):
        if x.ptr is None:
            raise ValueError("the DeviceAllocation has been freed")
        return x.ptr
    if isinstance(x, (int, np.integer)):
        return int(x)
    raise TypeError(f"expected a DeviceAllocation or an int device pointer, got {type(x).__name__}")


def _stream_handle(stream) -> int:
    return 0 if stream is None else stream.handle


def mem_alloc(nbytes: int) -> DeviceAllocation:
    """Allocate `nbytes` of device memory (cuMemAlloc)."""
    if nbytes <= 0:
        raise ValueError(f"mem_alloc: size must be positive, got {nbytes}")
    drv, _ = ensure_context()
    ptr = ctypes.c_uint64()
    drv.cuMemAlloc(ctypes.byref(ptr), nbytes)
    return DeviceAllocation(ptr.value, nbytes)


def mem_alloc_async(nbytes: int, stream) -> DeviceAllocation:
    """Stream-ordered allocation (cuMemAllocAsync); freed in the same stream's order."""
    if nbytes <= 0:
        raise ValueError(f"mem_alloc_async: size must be positive, got {nbytes}")
    drv, _ = ensure_context()
    ptr = ctypes.c_uint64()
    drv.cuMemAllocAsync(ctypes.byref(ptr), nbytes, _stream_handle(stream))
    return DeviceAllocation(ptr.value, nbytes, stream=stream)


def mem_get_info() -> tuple[int, int]:
    """(free, total) bytes of device memory."""
    drv, _ = ensure_context()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    drv.cuMemGetInfo(ctypes.byref(free), ctypes.byref(total))
    return free.value, total.value


# ---- pinned host memory --------------------------------------------------------------------
class _PinnedBlock(ContextResource):
    """Owns one cuMemAllocHost block; frees it when the last array over it goes away."""

    def __init__(self, nbytes: int):
        self._adopt()
        p = ctypes.c_void_p()
        self._drv.cuMemAllocHost(ctypes.byref(p), nbytes)
        self.address, self.nbytes = p.value, nbytes

    def _release(self) -> None:
        self._drv.cuMemFreeHost(self.address)


def pinned_empty(shape, dtype=np.float32) -> np.ndarray:
    """A numpy array in page-locked host memory (cuMemAllocHost): copies to and from it
    are truly asynchronous. The memory is freed when the array is garbage collected."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    block = _PinnedBlock(max(1, count * dtype.itemsize))
    raw = (ctypes.c_char * block.nbytes).from_address(block.address)
    raw._owner = block              # the array's base keeps the block alive
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


# ---- copies and memsets --------------------------------------------------------------------
def _host_array(arr, what: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what}: expected a numpy array, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{what}: the host array must be C-contiguous (use np.ascontiguousarray)")
    return arr


def _check_fits(dev, nbytes: int, what: str) -> None:
    if isinstance(dev, DeviceAllocation) and nbytes > dev.size:
        raise ValueError(f"{what}: {nbytes} bytes do not fit the {dev.size}-byte device allocation")


def memcpy_htod(dst, src: np.ndarray) -> None:
    """Copy a host array into device memory; returns when the host buffer may be reused."""
    src = _host_array(src, "memcpy_htod source")
    _check_fits(dst, src.nbytes, "memcpy_htod")
    drv, _ = ensure_context()
    drv.cuMemcpyHtoD(_ptr(dst), src.ctypes.data, src.nbytes)


def memcpy_dtoh(dst: np.ndarray, src) -> None:
    """Fill a host array from device memory; returns when the data has arrived."""
    dst = _host_array(dst, "memcpy_dtoh destination")
    if not dst.flags.writeable:
        raise ValueError("memcpy_dtoh: the destination array is read-only")
    _check_fits(src, dst.nbytes, "memcpy_dtoh")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoH(dst.ctypes.data, _ptr(src), dst.nbytes)


def memcpy_dtod(dst, src, nbytes: int) -> None:
    """Copy `nbytes` between device buffers (asynchronous with respect to the host)."""
    _check_fits(dst, nbytes, "memcpy_dtod destination")
    _check_fits(src, nbytes, "memcpy_dtod source")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoD(_ptr(dst), _ptr(src), nbytes)


def memcpy_htod_async(dst, src: np.ndarray, stream=None) -> None:
    """Queue a host-to-device copy on `stream`. From pinned memory it returns at once; from
    pageable memory the driver stages the bytes first, so `src` may be reused on return."""
    src = _host_array(src, "memcpy_htod_async source")
    _check_fits(dst, src.nbytes, "memcpy_htod_async")
    drv, _ = ensure_context()
    drv.cuMemcpyHtoDAsync(_ptr(dst), src.ctypes.data, src.nbytes, _stream_handle(stream))


def memcpy_dtoh_async(dst: np.ndarray, src, stream=None) -> None:
    """Queue a device-to-host copy on `stream`. Into pinned memory it returns at once (read
    `dst` only after synchronising); into pageable memory the driver waits for it."""
    dst = _host_array(dst, "memcpy_dtoh_async destination")
    _check_fits(src, dst.nbytes, "memcpy_dtoh_async")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoHAsync(dst.ctypes.data, _ptr(src), dst.nbytes, _stream_handle(stream))


def memcpy_dtod_async(dst, src, nbytes: int, stream=None) -> None:
    _check_fits(dst, nbytes, "memcpy_dtod_async destination")
    _check_fits(src, nbytes, "memcpy_dtod_async source")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoDAsync(_ptr(dst), _ptr(src), nbytes, _stream_handle(stream))


def memset_d8(dst, value: int, count: int, stream=None) -> None:
    """Set `count` bytes to `value` (0-255), in stream order."""
    if not 0 <= value <= 0xFF:
        raise ValueError(f"memset_d8: value {value} is not a byte")
    _check_fits(dst, count, "memset_d8")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemsetD8(_ptr(dst), value, count)
    else:
        drv.cuMemsetD8Async(_ptr(dst), value, count, stream.handle)


def memset_d32(dst, value: int, count: int, stream=None) -> None:
    """Set `count` 32-bit words to `value` (a bit pattern: use np.float32(x).view(np.uint32)
    for a float), in stream order."""
    value = int(value)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"memset_d32: value {value} is not a 32-bit pattern")
    _check_fits(dst, 4 * count, "memset_d32")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemsetD32(_ptr(dst), value, count)
    else:
        drv.cuMemsetD32Async(_ptr(dst), value, count, stream.handle)

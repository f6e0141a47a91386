"""Device memory, pinned host memory, copies and memsets.

Copies take numpy arrays on the host side and check sizes before anything reaches the
driver: a copy that does not fit is a ValueError naming both sizes. Device pointers are
DeviceAllocation objects or plain ints.
"""
import ctypes
import math
from ctypes import c_size_t

import numpy as np

from .checked import c_integer, integer
from .context import ContextBound, ContextResource, ensure_context
from .stream import stream_handle


class DeviceAllocation(ContextResource):
    """A block of device memory: `.ptr` (the CUdeviceptr), `.size` in bytes, `int()`.

    Freed by `.free()` or when garbage collected. One allocated with a stream
    (mem_alloc_async) is freed in that stream's order (cuMemFreeAsync). After
    cuda.reset_device() `.ptr` raises ContextResetError: the address may be another
    allocation's now.
    """

    ptr = ContextBound("_address")

    def __init__(self, ptr: int, size: int, stream=None):
        self._address = ptr
        self.size = size
        self._stream = stream
        self._adopt()

    def __int__(self):
        return self.ptr

    def __index__(self):
        return self.ptr

    def __repr__(self):
        state = "freed" if self._address is None else f"{self._address:#x}"
        return f"<DeviceAllocation {state}, {self.size} bytes>"

    def free(self, stream=None) -> None:
        """Release the memory now (cuMemFree), or in `stream`'s order (cuMemFreeAsync)."""
        if stream is not None:
            self._stream = stream
        self.release()
        self._address = None    # also when the context was reset: the pointer means nothing now

    def _release(self) -> None:
        ptr, self._address = self._address, None
        if self._stream is not None:
            self._drv.cuMemFreeAsync(ptr, self._stream.handle)
        else:
            self._drv.cuMemFree(ptr)


def device_pointer(x) -> int:
    """The CUdeviceptr a DeviceAllocation or an int stands for (refused once freed)."""
    if isinstance(x, DeviceAllocation):
        if x.ptr is None:
            raise ValueError("the DeviceAllocation has been freed")
        return x.ptr
    if isinstance(x, (int, np.integer)):
        return int(x)
    raise TypeError(f"expected a DeviceAllocation or an int device pointer, got {type(x).__name__}")


def _allocation_size(nbytes, what: str) -> int:
    """An allocation's byte count: an integer a size_t holds, and not 0."""
    nbytes = integer(nbytes, f"{what}: nbytes")
    if nbytes <= 0:
        raise ValueError(f"{what}: size must be positive, got {nbytes}")
    return c_integer(nbytes, c_size_t, f"{what}: nbytes")


def mem_alloc(nbytes: int) -> DeviceAllocation:
    """Allocate `nbytes` of device memory (cuMemAlloc)."""
    nbytes = _allocation_size(nbytes, "mem_alloc")
    drv, _ = ensure_context()
    ptr = ctypes.c_uint64()
    drv.cuMemAlloc(ctypes.byref(ptr), nbytes)
    return DeviceAllocation(ptr.value, nbytes)


def mem_alloc_async(nbytes: int, stream) -> DeviceAllocation:
    """Stream-ordered allocation (cuMemAllocAsync); freed in the same stream's order."""
    nbytes = _allocation_size(nbytes, "mem_alloc_async")
    handle = stream_handle(stream, "mem_alloc_async: stream")
    drv, _ = ensure_context()
    ptr = ctypes.c_uint64()
    drv.cuMemAllocAsync(ctypes.byref(ptr), nbytes, handle)
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
    shape = tuple(integer(d, "pinned_empty: shape") for d in ((shape,) if hasattr(shape, "__index__") else shape))
    if any(d < 0 for d in shape):
        raise ValueError(f"pinned_empty: negative dimension in shape {shape}")
    count = math.prod(shape)            # exact: np.prod would wrap around in int64
    nbytes = c_integer(max(1, count * dtype.itemsize), c_size_t, "pinned_empty: nbytes")
    block = _PinnedBlock(nbytes)
    raw = (ctypes.c_char * block.nbytes).from_address(block.address)
    raw.owner = block               # the array's base keeps the block alive
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


# ---- copies and memsets --------------------------------------------------------------------
def _host_array(arr, what: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{what}: expected a numpy array, got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{what}: the host array must be C-contiguous (use np.ascontiguousarray)")
    return arr


def _writable(arr: np.ndarray, what: str) -> np.ndarray:
    if not arr.flags.writeable:
        raise ValueError(f"{what}: the destination array is read-only")
    return arr


def check_fits(dev, nbytes: int, what: str) -> None:
    """Refuse `nbytes` that a DeviceAllocation `dev` does not hold (a raw address: unchecked)."""
    if isinstance(dev, DeviceAllocation) and nbytes > dev.size:
        raise ValueError(f"{what}: {nbytes} bytes do not fit the {dev.size}-byte device allocation")


def memcpy_htod(dst, src: np.ndarray) -> None:
    """Copy a host array into device memory; returns when the host buffer may be reused."""
    src = _host_array(src, "memcpy_htod source")
    check_fits(dst, src.nbytes, "memcpy_htod")
    drv, _ = ensure_context()
    drv.cuMemcpyHtoD(device_pointer(dst), src.ctypes.data, src.nbytes)


def memcpy_dtoh(dst: np.ndarray, src) -> None:
    """Fill a host array from device memory; returns when the data has arrived."""
    dst = _writable(_host_array(dst, "memcpy_dtoh destination"), "memcpy_dtoh")
    check_fits(src, dst.nbytes, "memcpy_dtoh")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoH(dst.ctypes.data, device_pointer(src), dst.nbytes)


def memcpy_dtod(dst, src, nbytes: int) -> None:
    """Copy `nbytes` between device buffers (asynchronous with respect to the host)."""
    nbytes = c_integer(nbytes, c_size_t, "memcpy_dtod: nbytes")
    check_fits(dst, nbytes, "memcpy_dtod destination")
    check_fits(src, nbytes, "memcpy_dtod source")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoD(device_pointer(dst), device_pointer(src), nbytes)


def memcpy_htod_async(dst, src: np.ndarray, stream=None) -> None:
    """Queue a host-to-device copy on `stream`. From pinned memory it returns at once; from
    pageable memory the driver stages the bytes first, so `src` may be reused on return."""
    src = _host_array(src, "memcpy_htod_async source")
    check_fits(dst, src.nbytes, "memcpy_htod_async")
    handle = stream_handle(stream, "memcpy_htod_async: stream")
    drv, _ = ensure_context()
    drv.cuMemcpyHtoDAsync(device_pointer(dst), src.ctypes.data, src.nbytes, handle)


def memcpy_dtoh_async(dst: np.ndarray, src, stream=None) -> None:
    """Queue a device-to-host copy on `stream`. Into pinned memory it returns at once (read
    `dst` only after synchronising); into pageable memory the driver waits for it."""
    dst = _writable(_host_array(dst, "memcpy_dtoh_async destination"), "memcpy_dtoh_async")
    check_fits(src, dst.nbytes, "memcpy_dtoh_async")
    handle = stream_handle(stream, "memcpy_dtoh_async: stream")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoHAsync(dst.ctypes.data, device_pointer(src), dst.nbytes, handle)


def memcpy_dtod_async(dst, src, nbytes: int, stream=None) -> None:
    nbytes = c_integer(nbytes, c_size_t, "memcpy_dtod_async: nbytes")
    check_fits(dst, nbytes, "memcpy_dtod_async destination")
    check_fits(src, nbytes, "memcpy_dtod_async source")
    handle = stream_handle(stream, "memcpy_dtod_async: stream")
    drv, _ = ensure_context()
    drv.cuMemcpyDtoDAsync(device_pointer(dst), device_pointer(src), nbytes, handle)


# bits -> (the word size in bytes, how a value that is not one is named, the driver functions)
_MEMSET_WORDS = {8: (1, "a byte", "cuMemsetD8", "cuMemsetD8Async"),
                 16: (2, "a 16-bit pattern", "cuMemsetD16", "cuMemsetD16Async"),
                 32: (4, "a 32-bit pattern", "cuMemsetD32", "cuMemsetD32Async")}


def _memset(bits: int, dst, value: int, count: int, stream) -> None:
    """cuMemsetD{bits} (synchronous, stream None) or cuMemsetD{bits}Async on `stream`:
    `count` words of `value`, every argument checked first."""
    name = f"memset_d{bits}"
    size, word, synchronous, asynchronous = _MEMSET_WORDS[bits]
    value = integer(value, f"{name}: value")         # a float would be truncated, not its bits
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{name}: value {value} is not {word}")
    count = c_integer(count, c_size_t, f"{name}: count")
    check_fits(dst, size * count, name)
    handle = stream_handle(stream, f"{name}: stream")
    drv, _ = ensure_context()
    if stream is None:
        getattr(drv, synchronous)(device_pointer(dst), value, count)
    else:
        getattr(drv, asynchronous)(device_pointer(dst), value, count, handle)


def memset_d8(dst, value: int, count: int, stream=None) -> None:
    """Set `count` bytes to `value` (0-255), in stream order."""
    _memset(8, dst, value, count, stream)


def memset_d16(dst, value: int, count: int, stream=None) -> None:
    """Set `count` 16-bit words to `value` (a bit pattern), in stream order."""
    _memset(16, dst, value, count, stream)


def memset_d32(dst, value: int, count: int, stream=None) -> None:
    """Set `count` 32-bit words to `value` (a bit pattern: use np.float32(x).view(np.uint32)
    for a float), in stream order."""
    _memset(32, dst, value, count, stream)


def device_address(value):
    """The device address an object stands for (a DeviceAllocation, anything with a
    __cuda_array_interface__), or None if it is not device memory."""
    if isinstance(value, DeviceAllocation):
        if value.ptr is None:
            raise ValueError("the DeviceAllocation has been freed")
        return value.ptr
    iface = getattr(value, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    return None

"""Pitched memory: 2-D and 3-D allocations whose rows start at aligned addresses, the copies
between them and host arrays (cuMemcpy2D, cuMemcpy3D), and the memsets of such rows.

`alloc_pitch(width_bytes, height)` returns a PitchedAllocation: `.pitch` is the distance in
bytes between row starts, a multiple of the device's CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT,
chosen by the driver. A host side of a copy is a numpy array whose rows are contiguous: its
pitch is its row stride, so a view of a wider array copies just those columns. Every region is
checked against its array or allocation before the driver is called: a copy that does not fit
is a ValueError naming the side; the driver checks device memory again.
"""
import ctypes
from ctypes import c_size_t

import numpy as np

from ..capi.memory_constants import MEMORY_TYPE
from ..capi.structs import CUDA_MEMCPY2D, CUDA_MEMCPY3D
from .checked import c_integer, integer
from .context import ensure_context
from .memory import DeviceAllocation, check_fits, device_pointer
from .stream import stream_handle

HOST, DEVICE = MEMORY_TYPE["CU_MEMORYTYPE_HOST"], MEMORY_TYPE["CU_MEMORYTYPE_DEVICE"]


class PitchedAllocation(DeviceAllocation):
    """`height` rows of `width_bytes`, each `pitch` bytes apart (cuMemAllocPitch)."""

    def __init__(self, ptr: int, pitch: int, width_bytes: int, height: int):
        super().__init__(ptr, pitch * height)
        self.pitch, self.width_bytes, self.height = pitch, width_bytes, height

    def __repr__(self):
        return f"<PitchedAllocation {self.height} rows of {self.width_bytes} bytes, pitch {self.pitch}>"


def alloc_pitch(width_bytes: int, height: int, element_size: int = 4) -> PitchedAllocation:
    """Device memory for `height` rows of `width_bytes`; `element_size` (4, 8 or 16) is the
    size of what kernels read, which the driver may align the pitch for."""
    width_bytes = c_integer(width_bytes, c_size_t, "alloc_pitch: width_bytes")
    height = c_integer(height, c_size_t, "alloc_pitch: height")
    if width_bytes <= 0 or height <= 0:
        raise ValueError(f"alloc_pitch: width_bytes and height must be positive, got {width_bytes} x {height}")
    if element_size not in (4, 8, 16):
        raise ValueError(f"alloc_pitch: element_size must be 4, 8 or 16, got {element_size!r}")
    drv, _ = ensure_context()
    ptr, pitch = ctypes.c_uint64(), ctypes.c_size_t()
    drv.cuMemAllocPitch(ctypes.byref(ptr), ctypes.byref(pitch), width_bytes, height, element_size)
    return PitchedAllocation(ptr.value, pitch.value, width_bytes, height)


class _Side:
    """One side of a copy: its memory type, address, pitch, rows per slice, and extent."""

    def __init__(self, x, pitch, rows, what: str, writable: bool, depth_axis: bool):
        self.what = what
        if isinstance(x, np.ndarray):
            self._array(x, writable, depth_axis)
            if pitch is not None or rows is not None:
                raise ValueError(f"{what}: a host array's pitch and height are its own (give none)")
            return
        self.kind, self.address = DEVICE, device_pointer(x)
        self.pitch = getattr(x, "pitch", None) if pitch is None else c_integer(pitch, c_size_t, f"{what} pitch")
        if self.pitch is None:
            raise ValueError(f"{what}: the pitch of plain device memory must be given")
        self.rows = rows            # rows per slice (3-D); by default the copy's height
        self.extent = x.size if isinstance(x, DeviceAllocation) else None
        self.row_bytes = self.pitch

    def _array(self, a: np.ndarray, writable: bool, depth_axis: bool) -> None:
        if a.ndim != (3 if depth_axis else 2):
            raise ValueError(f"{self.what}: expected a {3 if depth_axis else 2}-D host array, got {a.ndim}-D")
        if a.strides[-1] != a.itemsize or any(s < 0 for s in a.strides):
            raise ValueError(f"{self.what}: the host array's rows must be contiguous")
        if writable and not a.flags.writeable:
            raise ValueError(f"{self.what}: the destination array is read-only")
        self.kind, self.address, self.pitch = HOST, a.ctypes.data, a.strides[-2]
        self.rows = a.strides[0] // a.strides[1] if depth_axis else None
        if depth_axis and a.strides[0] % a.strides[1]:
            raise ValueError(f"{self.what}: the host array's slices are not a whole number of rows apart")
        self.row_bytes = a.shape[-1] * a.itemsize
        last = sum((n - 1) * s for n, s in zip(a.shape[:-1], a.strides[:-1]))
        self.extent = last + self.row_bytes if a.size else 0

    def check(self, x: int, y: int, z: int, width: int, height: int, depth: int) -> None:
        if x + width > min(self.pitch, self.row_bytes):
            raise ValueError(f"{self.what}: x {x} + width {width} bytes leave a row of {min(self.pitch, self.row_bytes)}")
        if depth > 1 and (self.rows is None or self.rows < y + height):
            raise ValueError(f"{self.what}: a slice of {self.rows} rows does not hold rows {y}..{y + height - 1}")
        end = ((z + depth - 1) * (self.rows or 0) + y + height - 1) * self.pitch + x + width
        if self.extent is not None and end > self.extent:
            raise ValueError(f"{self.what}: the copy reaches byte {end} of a {self.extent}-byte region")

    def fill(self, c, prefix: str, x: int, y: int) -> None:
        setattr(c, f"{prefix}MemoryType", self.kind)
        setattr(c, f"{prefix}Host" if self.kind == HOST else f"{prefix}Device", self.address)
        setattr(c, f"{prefix}Pitch", self.pitch)
        setattr(c, f"{prefix}XInBytes", x)
        setattr(c, f"{prefix}Y", y)


def _offsets(*values, what: str):
    return [c_integer(v, c_size_t, f"{what}") for v in values]


def copy_2d(dst, src, width_bytes: int | None = None, height: int | None = None, *, dst_pitch=None,
            src_pitch=None, dst_x=0, dst_y=0, src_x=0, src_y=0, stream=None) -> None:
    """Copy `height` rows of `width_bytes` (default: the host array's) between pitched
    memory and host arrays, in either direction or device to device (cuMemcpy2D; with a
    stream, cuMemcpy2DAsync). x offsets are in bytes, y in rows."""
    d = _Side(dst, dst_pitch, None, "copy_2d destination", True, False)
    s = _Side(src, src_pitch, None, "copy_2d source", False, False)
    host = next((a for a in (src, dst) if isinstance(a, np.ndarray)), None)
    width_bytes = host.shape[1] * host.itemsize if width_bytes is None and host is not None else width_bytes
    height = host.shape[0] if height is None and host is not None else height
    if width_bytes is None or height is None:
        raise ValueError("copy_2d: width_bytes and height must be given for a device-to-device copy")
    width_bytes, height, dst_x, dst_y, src_x, src_y = _offsets(width_bytes, height, dst_x, dst_y, src_x, src_y,
                                                               what="copy_2d: sizes and offsets")
    d.check(dst_x, dst_y, 0, width_bytes, height, 1)
    s.check(src_x, src_y, 0, width_bytes, height, 1)
    c = CUDA_MEMCPY2D(WidthInBytes=width_bytes, Height=height)
    d.fill(c, "dst", dst_x, dst_y)
    s.fill(c, "src", src_x, src_y)
    handle = stream_handle(stream, "copy_2d: stream")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemcpy2D(ctypes.byref(c))
    else:
        drv.cuMemcpy2DAsync(ctypes.byref(c), handle)


def copy_3d(dst, src, extent=None, *, dst_pitch=None, dst_height=None, src_pitch=None, src_height=None,
            stream=None) -> None:
    """Copy a box of `extent` = (width_bytes, height, depth) (default: the host array's)
    between a 3-D host array and pitched device memory whose slices are `height` rows
    (cuMemcpy3D; with a stream, cuMemcpy3DAsync)."""
    d = _Side(dst, dst_pitch, dst_height, "copy_3d destination", True, True)
    s = _Side(src, src_pitch, src_height, "copy_3d source", False, True)
    host = next((a for a in (src, dst) if isinstance(a, np.ndarray)), None)
    if extent is None:
        if host is None:
            raise ValueError("copy_3d: the extent must be given for a device-to-device copy")
        extent = (host.shape[2] * host.itemsize, host.shape[1], host.shape[0])
    width, height, depth = _offsets(*extent, what="copy_3d: extent")
    for side in (d, s):
        side.rows = height if side.rows is None else integer(side.rows, f"{side.what} height")
        side.check(0, 0, 0, width, height, depth)
    c = CUDA_MEMCPY3D(WidthInBytes=width, Height=height, Depth=depth, dstHeight=d.rows, srcHeight=s.rows)
    d.fill(c, "dst", 0, 0)
    s.fill(c, "src", 0, 0)
    handle = stream_handle(stream, "copy_3d: stream")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemcpy3D(ctypes.byref(c))
    else:
        drv.cuMemcpy3DAsync(ctypes.byref(c), handle)


def memset_d2d32(dst, value: int, width: int, height: int, pitch: int | None = None, stream=None) -> None:
    """Set `width` 32-bit words in each of `height` rows `pitch` bytes apart (a
    PitchedAllocation's own by default) to `value` (a bit pattern), in stream order."""
    value = integer(value, "memset_d2d32: value")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"memset_d2d32: value {value} is not a 32-bit pattern")
    pitch = getattr(dst, "pitch", None) if pitch is None else pitch
    if pitch is None:
        raise ValueError("memset_d2d32: the pitch of plain device memory must be given")
    width, height, pitch = _offsets(width, height, pitch, what="memset_d2d32: width, height and pitch")
    if height > 1 and pitch < 4 * width:
        raise ValueError(f"memset_d2d32: {width} words do not fit a pitch of {pitch} bytes")
    check_fits(dst, (height - 1) * pitch + 4 * width if height else 0, "memset_d2d32")
    handle = stream_handle(stream, "memset_d2d32: stream")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemsetD2D32(device_pointer(dst), pitch, value, width, height)
    else:
        drv.cuMemsetD2D32Async(device_pointer(dst), pitch, value, width, height, handle)

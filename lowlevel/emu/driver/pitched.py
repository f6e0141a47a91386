"""Pitched memory: cuMemAllocPitch, cuMemcpy2D/3D(Async), cuMemsetD16, cuMemsetD2D32.

A copy is a list of rows (width bytes each), every row's address computed from the struct's
X, Y, Z, pitch and height. Each device side is checked whole before anything moves: the span
from its first row's start to its last row's end must lie inside one live allocation, or the
call fails with CUDA_ERROR_INVALID_VALUE (never a silent overrun). Host memory is the
caller's, as with the driver: only its address is taken. CUDA arrays are not emulated.
"""
import ctypes

from ...capi.constants import DEVICE_ATTRIBUTE
from ...capi.memory_constants import MEMORY_TYPE
from ...capi.structs import CUDA_MEMCPY2D, CUDA_MEMCPY3D
from ..engine.memory import AccessFault
from ..tools.timemodel import copy_segment, host_segment, memset_segment
from . import device
from .capture import refuse_unsafe
from .context import api, current
from .entry import write_out
from .errors import EmuError
from .memory import allocate, modelled
from .pointer import locate

HOST, DEVICE, ARRAY, UNIFIED = (MEMORY_TYPE[f"CU_MEMORYTYPE_{k}"] for k in ("HOST", "DEVICE", "ARRAY", "UNIFIED"))
PITCH_ALIGNMENT = 512        # what the driver's pitches are multiples of (TEXTURE_ALIGNMENT)


def _max_pitch() -> int:
    return device.attributes()[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_MAX_PITCH"]]


@api
def cuMemAllocPitch(dptr_out, pitch_out, width, height, element_size):
    ctx = current()
    refuse_unsafe(ctx, "cuMemAllocPitch")
    if element_size not in (4, 8, 16):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"ElementSizeBytes must be 4, 8 or 16, got {element_size}")
    if width == 0 or height == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cannot allocate {width} x {height} bytes")
    pitch = -(-width // PITCH_ALIGNMENT) * PITCH_ALIGNMENT
    if pitch > _max_pitch():
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"WidthInBytes {width} exceeds the maximum pitch {_max_pitch()}")
    if not pitch_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL pPitch")
    write_out(ctypes.c_uint64, dptr_out, allocate(ctx, pitch * height))
    write_out(ctypes.c_size_t, pitch_out, pitch)


class _Side:
    """One side of a copy: where its rows are."""

    def __init__(self, what, kind, host, dev, pitch, x, y, z, height):
        self.what, self.pitch, self.x, self.y, self.z, self.height = what, pitch, x, y, z, height
        if kind == ARRAY:
            raise EmuError("CUDA_ERROR_NOT_SUPPORTED", f"{what}: CUDA arrays are not emulated")
        if kind not in (HOST, DEVICE, UNIFIED):
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{what}MemoryType {kind} is not a CUmemorytype")
        self.base = host if kind == HOST else dev
        if not self.base:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{what}: NULL pointer")
        hit = locate(self.base) if kind != HOST else None
        if kind == DEVICE and (hit is None or hit.kind not in ("device", "managed")):
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{what}Device {self.base:#x} is not device memory")
        # A unified address is whatever it points at: device memory, or host memory.
        self.memory = hit.ctx.memory if hit is not None and hit.kind in ("device", "managed") else None
        self.pinned = hit is not None and hit.kind in ("pinned", "registered")

    def row(self, y: int, z: int) -> int:
        return self.base + ((self.z + z) * self.height + self.y + y) * self.pitch + self.x

    def check(self, width: int, height: int, depth: int) -> None:
        if self.pitch < self.x + width:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"{self.what}Pitch {self.pitch} is less than {self.what}XInBytes + WidthInBytes "
                           f"({self.x} + {width})")
        if self.pitch > _max_pitch():
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{self.what}Pitch {self.pitch} exceeds the maximum pitch")
        if self.memory is None:
            return
        first, end = self.row(0, 0), self.row(height - 1, depth - 1) + width
        try:
            self.memory.check_range(first, end - first)
        except AccessFault:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"{self.what}: rows [{first:#x}, {end:#x}) are not inside one live allocation")

    def host_row(self, y: int, z: int) -> int:
        address = self.row(y, z)
        return address if self.memory is None else self.memory.host_address(address)


def _copy_segment(src: _Side, dst: _Side, nbytes: int):
    """The time model's figure for a 2-D/3-D copy of `nbytes` (host to host: none)."""
    if src.memory is not None and dst.memory is not None:
        return copy_segment("DtoD", nbytes, True)
    if src.memory is None and dst.memory is None:
        return host_segment(0.0)
    return copy_segment("HtoD", nbytes, src.pinned) if dst.memory is not None else copy_segment("DtoH", nbytes, dst.pinned)


def _run(stream_handle, src: _Side, dst: _Side, width, height, depth, asynchronous, label) -> None:
    ctx = current()
    if not asynchronous:
        refuse_unsafe(ctx, label)
    stream = ctx.stream(stream_handle)
    if width == 0 or height == 0 or depth == 0:
        return
    src.check(width, height, depth)
    dst.check(width, height, depth)
    rows = [(dst.host_row(y, z), src.host_row(y, z)) for z in range(depth) for y in range(height)]
    if src.memory is None and not src.pinned and stream.capture is None:
        # Pageable host memory is staged now: the caller may reuse it once the call returns
        # (the rows then read from buffers the work holds).
        rows = [(d, ctypes.create_string_buffer(ctypes.string_at(s, width), width)) for d, s in rows]

    def run():
        for d, s in rows:
            ctypes.memmove(d, s, width)
    item = ctx.submit(stream, modelled(ctx, run, _copy_segment(src, dst, width * height * depth)), label)
    # Synchronous calls return when done, as do copies into pageable host memory; a copy
    # between device buffers is asynchronous with respect to the host either way.
    device_to_device = src.memory is not None and dst.memory is not None
    waits = (not asynchronous and not device_to_device) or (dst.memory is None and not dst.pinned)
    if waits and item is not None:
        item.done.wait()
        current()


def _sides_2d(p: int):
    c = CUDA_MEMCPY2D.from_address(_struct(p))
    src = _Side("src", c.srcMemoryType, c.srcHost, c.srcDevice, c.srcPitch, c.srcXInBytes, c.srcY, 0, 0)
    dst = _Side("dst", c.dstMemoryType, c.dstHost, c.dstDevice, c.dstPitch, c.dstXInBytes, c.dstY, 0, 0)
    return src, dst, c.WidthInBytes, c.Height, 1


def _sides_3d(p: int):
    c = CUDA_MEMCPY3D.from_address(_struct(p))
    if c.srcLOD or c.dstLOD or c.reserved0 or c.reserved1:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "srcLOD, dstLOD, reserved0 and reserved1 must be 0")
    for what, h in (("src", c.srcHeight), ("dst", c.dstHeight)):
        if c.Depth > 1 and h < c.Height:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{what}Height {h} is less than Height {c.Height}")
    src = _Side("src", c.srcMemoryType, c.srcHost, c.srcDevice, c.srcPitch, c.srcXInBytes, c.srcY, c.srcZ,
                c.srcHeight)
    dst = _Side("dst", c.dstMemoryType, c.dstHost, c.dstDevice, c.dstPitch, c.dstXInBytes, c.dstY, c.dstZ,
                c.dstHeight)
    return src, dst, c.WidthInBytes, c.Height, c.Depth


def _struct(p: int) -> int:
    if not p:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL copy parameters")
    return p


@api
def cuMemcpy2D(p):
    _run(0, *_sides_2d(p), asynchronous=False, label="cuMemcpy2D")


@api
def cuMemcpy2DAsync(p, stream):
    _run(stream, *_sides_2d(p), asynchronous=True, label="cuMemcpy2DAsync")


@api
def cuMemcpy3D(p):
    _run(0, *_sides_3d(p), asynchronous=False, label="cuMemcpy3D")


@api
def cuMemcpy3DAsync(p, stream):
    _run(stream, *_sides_3d(p), asynchronous=True, label="cuMemcpy3DAsync")


# ---- memsets of 16-bit words and of pitched 32-bit rows ---------------------------------------
def _memset_rows(stream_handle, dptr, pitch, value, width, height, size: int, label: str) -> None:
    ctx = current()
    stream = ctx.stream(stream_handle)
    if dptr % size:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{label}: {dptr:#x} is not {size}-byte aligned")
    if height > 1 and (pitch < width * size or pitch % size):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{label}: pitch {pitch} does not hold {width} words of "
                                                   f"{size} bytes, aligned")
    if width == 0 or height == 0:
        return
    hit = locate(dptr)
    if hit is None or hit.kind not in ("device", "managed"):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{label}: {dptr:#x} is not device memory")
    span = (height - 1) * pitch + width * size
    try:
        offset = hit.ctx.memory.check_range(dptr, span)
    except AccessFault:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{label}: [{dptr:#x}, +{span}) is not inside one live allocation")
    view = hit.ctx.memory.view({2: "u2", 4: "u4"}[size])

    def run():
        for r in range(height):
            start = (offset + r * pitch) // size
            view[start:start + width] = value
    run = modelled(ctx, run, memset_segment(width * size * height))
    ctx.submit(stream, run, label)     # asynchronous with respect to the host, as memsets are


@api
def cuMemsetD16(dptr, value, count):
    _memset_rows(0, dptr, 0, value, count, 1, 2, "cuMemsetD16")


@api
def cuMemsetD16Async(dptr, value, count, stream):
    _memset_rows(stream, dptr, 0, value, count, 1, 2, "cuMemsetD16Async")


@api
def cuMemsetD2D32(dptr, pitch, value, width, height):
    _memset_rows(0, dptr, pitch, value, width, height, 4, "cuMemsetD2D32")


@api
def cuMemsetD2D32Async(dptr, pitch, value, width, height, stream):
    _memset_rows(stream, dptr, pitch, value, width, height, 4, "cuMemsetD2D32Async")

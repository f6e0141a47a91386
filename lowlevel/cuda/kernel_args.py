"""Packing Python values into a kernel's parameter buffer: the void** of cuLaunchKernel.

Each parameter has a size (from the driver) and, for kernels loaded from PTX, a declared
type. What may be passed:
  - a DeviceAllocation, or any object with `__cuda_array_interface__`, for an 8-byte param:
    its device address;
  - a numpy scalar (np.float32(2.0), np.uint64(n)): its bytes, if its size is the param's;
  - a Python int or float: converted to the declared type, with a range check (an int
    for a .u32 may be negative: nvcc declares C's `int` as .u32);
  - bytes (for struct-like `.b8 name[N]` params): exactly N of them;
  - a TensorMap (tensormap.py), for a 128-byte `.param .align 64 .b8 name[128]`
    (a __grid_constant__ CUtensorMap): its 128 bytes, by value.
Anything else, or a mismatch, is a TypeError or ValueError naming the kernel and the
parameter, raised before the driver is called.
"""
import ctypes
import struct

import numpy as np

from .memory import device_address
from .tensormap import MAP_BYTES, TensorMap

_INT_FORMAT = {1: "b", 2: "h", 4: "i", 8: "q"}
_FLOAT_FORMAT = {2: "e", 4: "f", 8: "d"}


def pack_value(kernel: str, index: int, name: str, ptype: str | None, size: int, value) -> bytes:
    """The `size` bytes that parameter `index` of `kernel` receives for `value`."""
    where = f"{kernel}: parameter {index} ({name}{', .' + ptype if ptype else ''}, {size} bytes)"
    address = device_address(value)
    if address is not None:
        if size != 8:
            raise TypeError(f"{where}: got a device pointer, which is 8 bytes")
        return struct.pack("<Q", address)
    if isinstance(value, TensorMap):
        if size != MAP_BYTES:
            raise TypeError(f"{where}: got a TensorMap, which is {MAP_BYTES} bytes (declare the parameter "
                            f"`.param .align 64 .b8 name[128]`)")
        return bytes(value)
    if isinstance(value, np.generic):
        data = value.tobytes()
        if len(data) != size:
            raise TypeError(f"{where}: got {value.dtype} ({len(data)} bytes)")
        return data
    if isinstance(value, bool):
        value = int(value)
    kind = (ptype or "")[:1]          # u s b f pred, or "" when the type is unknown
    if isinstance(value, int):
        if kind == "f":
            return pack_value(kernel, index, name, ptype, size, float(value))
        bits = 8 * size
        # nvcc declares C's int and long long parameters as .u32 and .u64: PTX does not say
        # whether a .u/.b parameter holds a signed value, so both readings are accepted and
        # a negative int is passed in two's complement. A .s parameter takes signed values only.
        lo = -(1 << (bits - 1))
        hi = (1 << (bits - 1)) - 1 if kind == "s" else (1 << bits) - 1
        if size not in _INT_FORMAT:
            raise TypeError(f"{where}: an int cannot fill a {size}-byte parameter; pass bytes")
        if not lo <= value <= hi:
            raise ValueError(f"{where}: {value} is out of range [{lo}, {hi}]")
        return (value & ((1 << bits) - 1)).to_bytes(size, "little")
    if isinstance(value, float):
        if kind != "f":
            what = f"an integer .{ptype}" if ptype else "a parameter of unknown type"
            raise TypeError(f"{where}: got a float for {what}; pass np.float32(x) or np.float64(x)"
                            if not ptype else f"{where}: got a float for {what}")
        fmt = _FLOAT_FORMAT.get(size)
        if fmt is None:
            raise TypeError(f"{where}: cannot pack a float into {size} bytes")
        narrow = {"e": np.float16, "f": np.float32}.get(fmt)
        if narrow is not None and np.isfinite(value) and abs(value) > float(np.finfo(narrow).max):
            raise ValueError(f"{where}: {value} overflows {np.dtype(narrow).name}")
        if fmt == "e":
            return np.float16(value).tobytes()
        return struct.pack("<" + fmt, value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if len(data) != size:
            raise ValueError(f"{where}: got {len(data)} bytes")
        return data
    if isinstance(value, ctypes._SimpleCData):  # noqa: SLF001  (the base of ctypes' scalar types; it has no public name)
        data = bytes(value)
        if len(data) != size:
            raise TypeError(f"{where}: got a {type(value).__name__} ({len(data)} bytes)")
        return data
    raise TypeError(f"{where}: cannot pass a {type(value).__name__}")


class PackedArgs:
    """Per-parameter buffers and the void* array pointing at them (kernelParams).

    Kept alive until cuLaunchKernel returns; the driver copies the values at launch.
    """

    def __init__(self, chunks: list[bytes]):
        self.buffers = [ctypes.create_string_buffer(c, len(c)) for c in chunks]
        self.pointers = (ctypes.c_void_p * max(1, len(chunks)))(*[ctypes.addressof(b) for b in self.buffers])

    @property
    def kernel_params(self):
        return self.pointers if self.buffers else None

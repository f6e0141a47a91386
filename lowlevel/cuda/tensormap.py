"""TensorMap: a TMA descriptor (CUtensorMap) for a tensor in device memory, passed to kernels.

    tmap = TensorMap.tiled(buf, np.float32, shape=(64, 128), box=(16, 32), swizzle=128)
    kernel.launch(grid, block, args=(tmap, out))       # into `.param .align 64 .b8 tmap[128]`
    tmap.replace_address(other_buf)                      # cuTensorMapReplaceAddress

Shapes, boxes and strides are given in numpy's order, outermost dimension first (`shape`
is the array's shape, `strides` its byte strides, default C-contiguous); the driver, and
the coordinates a kernel gives cp.async.bulk.tensor, count from the innermost dimension,
so the order is reversed when encoding. `im2col` describes an NDHWC/NHWC/NWC tensor for
convolution loads. Names that are not a known option (a dtype, a swizzle, an interleave, a
fill) are a ValueError naming the parameter; what the driver checks (alignment, ranges,
the swizzle against the box's inner bytes) is its CudaError, CUDA_ERROR_INVALID_VALUE with
the rule in `details`. The map is encoded once, at construction, before any launch.

A map is 128 bytes, 64-byte aligned, and a kernel receives it by value as a
__grid_constant__ parameter (PTX: `.param .align 64 .b8 name[128]`): `bytes(tmap)`.
"""
import ctypes

import numpy as np

from .context import ensure_context
from .memory import device_address

MAP_BYTES = 128
_ALIGN = 64
# CUtensorMapDataType by numpy dtype name ("bfloat16" and "tfloat32" by name)
DATA_TYPES = {"uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5, "float16": 6,
              "float32": 7, "float64": 8, "bfloat16": 9, "float32_ftz": 10, "tfloat32": 11, "tfloat32_ftz": 12}
SWIZZLES = {None: 0, 0: 0, "none": 0, 32: 1, 64: 2, 128: 3}
INTERLEAVES = {None: 0, 0: 0, "none": 0, 16: 1, 32: 2}
FILLS = {"zero": 0, "nan": 1}
L2_PROMOTIONS = {None: 0, 0: 0, "none": 0, 64: 1, 128: 2, 256: 3}


def _address(base) -> int:
    """The global address a map describes: device memory as kernel arguments take it
    (memory.device_address), or an int address."""
    try:
        address = device_address(base)
    except ValueError as e:                        # a freed allocation
        raise ValueError(f"TensorMap: base: {e}") from None
    if address is not None:
        return address
    if isinstance(base, int) and not isinstance(base, bool):
        return base
    raise TypeError(f"TensorMap: base: expected device memory or an address, got {type(base).__name__}")


def _option(table: dict, value, name: str) -> int:
    try:
        return table[value]
    except (KeyError, TypeError):
        shown = ", ".join(repr(k) for k in table if k is not None)
        raise ValueError(f"TensorMap: {name}={value!r} is not one of {shown}") from None


def _dtype(dtype) -> tuple[int, int]:
    """(CUtensorMapDataType, element bytes)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    code = _option(DATA_TYPES, name, "dtype")
    return code, {0: 1, 1: 2, 6: 2, 9: 2, 4: 8, 5: 8, 8: 8}.get(code, 4)


def _described(base, dtype, shape, strides):
    """dtype, shape and strides, each defaulting to what `base`'s __cuda_array_interface__ says."""
    iface = getattr(base, "__cuda_array_interface__", None)
    if iface is not None:
        dtype = np.dtype(iface["typestr"]) if dtype is None else dtype
        shape = tuple(iface["shape"]) if shape is None else shape
        strides = iface.get("strides") if strides is None else strides
    if dtype is None or shape is None:
        raise ValueError("TensorMap: dtype and shape are required for memory that does not describe itself")
    return dtype, shape, strides


def _u64s(values):
    return (ctypes.c_uint64 * max(1, len(values)))(*values)


def _u32s(values, name: str):
    for v in values:
        if not isinstance(v, (int, np.integer)) or v < 0 or v >= 1 << 32:
            raise ValueError(f"TensorMap: {name}: {v!r} is not a 32-bit unsigned integer")
    return (ctypes.c_uint32 * max(1, len(values)))(*values)


class TensorMap:
    """A CUtensorMap, 64-byte aligned in host memory; `bytes(tmap)` is what a kernel receives."""

    def __init__(self, base=None):
        self.base = base            # kept alive: the memory the map describes
        self._storage = (ctypes.c_ubyte * (MAP_BYTES + _ALIGN))()
        base = ctypes.addressof(self._storage)
        self.address = base + (-base % _ALIGN)      # where the driver writes the 128 bytes

    def __bytes__(self) -> bytes:
        return ctypes.string_at(self.address, MAP_BYTES)

    @classmethod
    def tiled(cls, base, dtype=None, shape=None, box=None, strides=None, element_strides=None, swizzle=None,
              interleave=None, l2_promotion=None, oob_fill="zero") -> "TensorMap":
        """cuTensorMapEncodeTiled: boxes of `box` elements out of a tensor of `shape`. For an
        object with `__cuda_array_interface__` (a CUDA tensor), dtype, shape and strides
        default to its own."""
        if box is None:
            raise ValueError("TensorMap.tiled: box is required (elements per dimension, outermost first)")
        dtype, shape, strides = _described(base, dtype, shape, strides)
        code, size = _dtype(dtype)
        dims, byte_strides = cls._layout(shape, strides, size)
        rank = len(dims)
        if len(box) != rank:
            raise ValueError(f"TensorMap: box has {len(box)} dimensions, shape has {rank}")
        estr = [1] * rank if element_strides is None else list(element_strides)
        if len(estr) != rank:
            raise ValueError(f"TensorMap: element_strides has {len(estr)} dimensions, shape has {rank}")
        tmap = cls(base)
        drv, _ = ensure_context()
        drv.cuTensorMapEncodeTiled(tmap.address, code, rank, _address(base), _u64s(dims), _u64s(byte_strides),
                                   _u32s(list(box)[::-1], "box"), _u32s(estr[::-1], "element_strides"),
                                   _option(INTERLEAVES, interleave, "interleave"),
                                   _option(SWIZZLES, swizzle, "swizzle"),
                                   _option(L2_PROMOTIONS, l2_promotion, "l2_promotion"),
                                   _option(FILLS, oob_fill, "oob_fill"))
        return tmap

    @classmethod
    def im2col(cls, base, dtype, shape, lower, upper, channels, pixels, strides=None,
               element_strides=None, swizzle=None, interleave=None, l2_promotion=None,
               oob_fill="zero") -> "TensorMap":
        """cuTensorMapEncodeIm2col: `shape` is (N, [D, [H,]] W, C); `lower`/`upper` the pixel
        box corners in the same order as the spatial dimensions ((D, H, W) or fewer)."""
        code, size = _dtype(dtype)
        dims, byte_strides = cls._layout(shape, strides, size)
        rank = len(dims)
        estr = [1] * rank if element_strides is None else list(element_strides)
        tmap = cls(base)
        drv, _ = ensure_context()
        corners = [(ctypes.c_int * 3)(*list(c)[::-1]) for c in (lower, upper)]
        drv.cuTensorMapEncodeIm2col(tmap.address, code, rank, _address(base), _u64s(dims), _u64s(byte_strides),
                                    corners[0], corners[1], channels, pixels, _u32s(estr[::-1], "element_strides"),
                                    _option(INTERLEAVES, interleave, "interleave"),
                                    _option(SWIZZLES, swizzle, "swizzle"),
                                    _option(L2_PROMOTIONS, l2_promotion, "l2_promotion"),
                                    _option(FILLS, oob_fill, "oob_fill"))
        return tmap

    @staticmethod
    def _layout(shape, strides, size):
        """(dims innermost first, byte strides of dimensions 1.. innermost first)."""
        shape = [int(d) for d in shape]
        if not 1 <= len(shape) <= 5:
            raise ValueError(f"TensorMap: shape has {len(shape)} dimensions (1 to 5)")
        if strides is None:
            strides, step = [], size
            for d in reversed(shape):
                strides.insert(0, step)
                step *= d
        strides = [int(s) for s in strides]
        if len(strides) != len(shape):
            raise ValueError(f"TensorMap: strides has {len(strides)} entries, shape has {len(shape)}")
        if strides[-1] != size:
            raise ValueError(f"TensorMap: strides[-1] = {strides[-1]}: the innermost dimension must be "
                             f"contiguous ({size}-byte elements)")
        return shape[::-1], strides[-2::-1]

    def replace_address(self, base) -> None:
        """cuTensorMapReplaceAddress: the same map over other memory."""
        drv, _ = ensure_context()
        drv.cuTensorMapReplaceAddress(self.address, _address(base))
        self.base = base

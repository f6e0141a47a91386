"""cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col, cuTensorMapReplaceAddress: TMA descriptors.

The driver fills the caller's 128-byte CUtensorMap (64-byte aligned) with the emulated GPU's
encoding (isa/tensormap.py, which the TMA instructions decode and tensormap.replace edits).
Every requirement cuda.h documents for these calls is checked, in the order of its list,
and a violation is CUDA_ERROR_INVALID_VALUE naming the argument and the rule (the details
of the CudaError). Sub-byte packed types (16U4/16U6) and the 128B-atom swizzles are
compute capability 10.0 features: refused here, as on an H200.
"""
import ctypes

from ..isa import tensormap as tm
from .context import api, current
from .errors import EmuError

_ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_FLOAT_TYPES = {6, 7, 8, 9, 10, 11, 12}
_INTERLEAVE_32B = 2
_SWIZZLE_32B = 1
# im2col: the range of each pixel-box corner offset, by rank (cuda.h)
_CORNER_RANGE = {3: (-32768, 32767), 4: (-128, 127), 5: (-16, 15)}


def _bad(what: str) -> EmuError:
    return EmuError("CUDA_ERROR_INVALID_VALUE", what)


def _array(ctype, address: int, count: int, name: str) -> list:
    if count and not address:
        raise _bad(f"{name} is NULL")
    return list((ctype * count).from_address(address)) if count else []


def _common(out, dtype, rank, address, dims_p, strides_p, estr_p, interleave, swizzle, l2, fill,
            ranks):
    """The checks both encodings share; (element bytes, dims, strides, element strides)."""
    current()
    if not out or out % tm.MAP_ALIGN:
        raise _bad(f"tensorMap {out:#x} is not {tm.MAP_ALIGN}-byte aligned")
    if not 0 <= dtype <= 15:
        raise _bad(f"tensorDataType {dtype} is not a CUtensorMapDataType")
    if dtype not in _ELEM_BYTES:
        raise _bad(f"tensorDataType {dtype} (a packed 4/6-bit type) needs compute capability 10.0")
    if rank not in ranks:
        raise _bad(f"tensorRank {rank} is outside {ranks[0]}..{ranks[-1]}")
    if interleave not in (0, 1, 2):
        raise _bad(f"interleave {interleave} is not a CUtensorMapInterleave")
    if interleave and rank < 3:
        raise _bad(f"tensorRank {rank}: an interleaved layout needs rank 3 or more")
    if swizzle not in (0, 1, 2, 3):
        raise _bad(f"swizzle {swizzle} is not a CUtensorMapSwizzle this device supports "
                   f"(the 128B atom modes need compute capability 10.0)")
    need = 32 if interleave == _INTERLEAVE_32B else 16
    if address % need:
        raise _bad(f"globalAddress {address:#x} is not {need}-byte aligned")
    dims = _array(ctypes.c_uint64, dims_p, rank, "globalDim")
    for i, d in enumerate(dims):
        if not 1 <= d <= 1 << 32:
            raise _bad(f"globalDim[{i}] = {d} is outside 1..2^32")
    strides = _array(ctypes.c_uint64, strides_p, rank - 1, "globalStrides")
    step = 32 if interleave == _INTERLEAVE_32B else 16
    for i, s in enumerate(strides):
        if s % step or s >= 1 << 40:
            raise _bad(f"globalStrides[{i}] = {s} is not a multiple of {step} below 2^40")
    estr = _array(ctypes.c_uint32, estr_p, rank, "elementStrides")
    for i, e in enumerate(estr):
        if not 1 <= e <= 8:
            raise _bad(f"elementStrides[{i}] = {e} is outside 1..8")
    if interleave == _INTERLEAVE_32B and swizzle != _SWIZZLE_32B:
        raise _bad(f"interleave 32B needs swizzle 32B (got swizzle {swizzle})")
    if l2 not in (0, 1, 2, 3):
        raise _bad(f"l2Promotion {l2} is not a CUtensorMapL2promotion")
    if fill not in (0, 1):
        raise _bad(f"oobFill {fill} is not a CUtensorMapFloatOOBfill")
    if fill == 1 and dtype not in _FLOAT_TYPES:
        raise _bad(f"oobFill NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType (got {dtype})")
    return _ELEM_BYTES[dtype], dims, strides, estr


def _inner_fits(inner_bytes: int, interleave: int, swizzle: int, what: str) -> None:
    span = tm.SWIZZLE_SPAN[swizzle]
    if interleave == 0 and swizzle and inner_bytes > span:
        raise _bad(f"{what} of {inner_bytes} bytes is wider than the swizzle's {span} bytes")


def _write(out: int, m: tm.TensorMap) -> None:
    ctypes.memmove(out, tm.encode(m), tm.MAP_BYTES)


@api
def cuTensorMapEncodeTiled(out, dtype, rank, address, dims_p, strides_p, box_p, estr_p,
                           interleave, swizzle, l2, fill):
    size, dims, strides, estr = _common(out, dtype, rank, address, dims_p, strides_p, estr_p,
                                        interleave, swizzle, l2, fill, (1, 2, 3, 4, 5))
    box = _array(ctypes.c_uint32, box_p, rank, "boxDim")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise _bad(f"boxDim[{i}] = {b} is outside 1..256")
    if interleave == 0 and box[0] * size % 16:
        raise _bad(f"boxDim[0] * element size = {box[0] * size} bytes is not a multiple of 16")
    _inner_fits(box[0] * size, interleave, swizzle, "the box's inner dimension (boxDim[0] * element size)")
    _write(out, tm.TensorMap(address, rank, tuple(dims), (size, *strides), tuple(box), tuple(estr),
                             tm.FROM_DRIVER_TYPE[dtype], interleave, swizzle, bool(fill), l2, tm.TILE))


@api
def cuTensorMapEncodeIm2col(out, dtype, rank, address, dims_p, strides_p, lower_p, upper_p,
                            channels, pixels, estr_p, interleave, swizzle, l2, fill):
    size, dims, strides, estr = _common(out, dtype, rank, address, dims_p, strides_p, estr_p,
                                        interleave, swizzle, l2, fill, (3, 4, 5))
    spatial = rank - 2
    lower = _array(ctypes.c_int, lower_p, spatial, "pixelBoxLowerCorner")
    upper = _array(ctypes.c_int, upper_p, spatial, "pixelBoxUpperCorner")
    lo, hi = _CORNER_RANGE[rank]
    for name, corner in (("pixelBoxLowerCorner", lower), ("pixelBoxUpperCorner", upper)):
        for i, v in enumerate(corner):
            if not lo <= v <= hi:
                raise _bad(f"{name}[{i}] = {v} is outside {lo}..{hi} for rank {rank}")
    for i in range(spatial):         # the box spans lower .. dim - 1 + upper in each of W, H, D
        if dims[1 + i] + upper[i] - lower[i] <= 0:
            raise _bad(f"the pixel bounding box has no area in spatial dimension {i} "
                       f"(globalDim {dims[1 + i]}, corners {lower[i]} and {upper[i]})")
    if not 1 <= channels <= 256:
        raise _bad(f"channelsPerPixel {channels} is outside 1..256")
    if not 1 <= pixels <= 1024:
        raise _bad(f"pixelsPerColumn {pixels} is outside 1..1024")
    _inner_fits(channels * size, interleave, swizzle, "the inner dimension (channelsPerPixel * element size)")
    pad = [0] * (3 - spatial)
    _write(out, tm.TensorMap(address, rank, tuple(dims), (size, *strides), (channels,) + (1,) * (rank - 1),
                             tuple(estr), tm.FROM_DRIVER_TYPE[dtype], interleave, swizzle, bool(fill), l2,
                             tm.IM2COL, tuple(lower + pad), tuple(upper + pad), channels, pixels))


@api
def cuTensorMapReplaceAddress(out, address):
    current()
    if not out or out % tm.MAP_ALIGN:
        raise _bad(f"tensorMap {out:#x} is not {tm.MAP_ALIGN}-byte aligned")
    raw = bytearray(ctypes.string_at(out, tm.MAP_BYTES))
    try:
        m = tm.decode(raw)
    except ValueError as e:
        raise _bad(f"tensorMap holds no encoded tensor map ({e})")
    need = 32 if m.interleave == _INTERLEAVE_32B else 16
    if address % need:
        raise _bad(f"globalAddress {address:#x} is not {need}-byte aligned")
    tm.replace(raw, "global_address", 0, address)
    ctypes.memmove(out, bytes(raw), tm.MAP_BYTES)

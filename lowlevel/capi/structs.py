"""C structs of cuda.h that driver calls take by pointer or by value, laid out as the header
declares them (tests/cuda/test_struct_layouts.py compares every offset with a C compiler's).

    CUDA_MEMCPY2D, CUDA_MEMCPY3D   cuMemcpy2D/3D(Async): pitched copies
    CUmemLocation                  cuMemPrefetchAsync, cuMemAdvise: a device or the host
    CUuuid                         cuDeviceGetUuid: 16 bytes
"""
import ctypes
from ctypes import c_int, c_size_t, c_uint64, c_void_p


class CUDA_MEMCPY2D(ctypes.Structure):
    _fields_ = [
        ("srcXInBytes", c_size_t), ("srcY", c_size_t),
        ("srcMemoryType", c_int), ("srcHost", c_void_p), ("srcDevice", c_uint64), ("srcArray", c_void_p),
        ("srcPitch", c_size_t),
        ("dstXInBytes", c_size_t), ("dstY", c_size_t),
        ("dstMemoryType", c_int), ("dstHost", c_void_p), ("dstDevice", c_uint64), ("dstArray", c_void_p),
        ("dstPitch", c_size_t),
        ("WidthInBytes", c_size_t), ("Height", c_size_t),
    ]


class CUDA_MEMCPY3D(ctypes.Structure):
    _fields_ = [
        ("srcXInBytes", c_size_t), ("srcY", c_size_t), ("srcZ", c_size_t), ("srcLOD", c_size_t),
        ("srcMemoryType", c_int), ("srcHost", c_void_p), ("srcDevice", c_uint64), ("srcArray", c_void_p),
        ("reserved0", c_void_p), ("srcPitch", c_size_t), ("srcHeight", c_size_t),
        ("dstXInBytes", c_size_t), ("dstY", c_size_t), ("dstZ", c_size_t), ("dstLOD", c_size_t),
        ("dstMemoryType", c_int), ("dstHost", c_void_p), ("dstDevice", c_uint64), ("dstArray", c_void_p),
        ("reserved1", c_void_p), ("dstPitch", c_size_t), ("dstHeight", c_size_t),
        ("WidthInBytes", c_size_t), ("Height", c_size_t), ("Depth", c_size_t),
    ]


class CUmemLocation(ctypes.Structure):
    # cuda.h: a CUmemLocationType and a union whose first member is `int id`
    _fields_ = [("type", c_int), ("id", c_int)]


class CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_char * 16)]


# struct name -> its ctypes class, for the layout test
STRUCTS = {cls.__name__: cls for cls in (CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUmemLocation, CUuuid)}

"""Layer 1, interchange: hand tensors to other libraries and take theirs, without copying.

DLPack: a capsule holds a DLManagedTensor: a pointer, device, dtype, shape and strides, and
a deleter the consumer calls when it is done. These are the C structs of dlpack.h, built
with ctypes; the capsule is a PyCapsule named "dltensor" (renamed "used_dltensor" by the
consumer that takes it). The CUDA array interface (v3) is a dict describing the same.

Tensor's __dlpack__, __dlpack_device__ and __cuda_array_interface__ are attached at the end
of this module (it needs Tensor, so tensor.py cannot import it).
"""
import ctypes
import itertools
import threading

import numpy as np

from ..cuda import Event, Stream, current_stream
from . import dtypes as dt
from .device import Device
from .shapes import contiguous_strides
from .tensor import Storage, Tensor

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]

_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
# The destructor gets the capsule as a raw pointer: it runs while the capsule is being
# freed, when making a Python object of it again would resurrect it.
CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CapsuleDestructor]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))


def device_code(device) -> tuple[int, int]:
    """(DLDeviceType, id) of a lowlevel device."""
    if device.type == "cpu":
        return (KDL_CPU, 0)
    if device.type == "cuda":
        return (KDL_CUDA, device.index or 0)
    raise TypeError(f"device {device} has no DLPack device type")


# ---- producing -------------------------------------------------------------------------------------
_exported: dict[int, tuple] = {}          # manager_ctx id -> (tensor, struct, shape, strides)
_ids = itertools.count(1)
_lock = threading.Lock()


def _delete(managed_ptr) -> None:
    with _lock:
        _exported.pop(managed_ptr.contents.manager_ctx, None)


_deleter = Deleter(_delete)


def _capsule_destructor(capsule) -> None:
    # Only a capsule no one consumed still has its own name: then the producer cleans up.
    if _raw_is_valid(capsule, _CAPSULE_NAME):
        ptr = _raw_get_pointer(capsule, _CAPSULE_NAME)
        managed = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor))
        managed.contents.deleter(managed)


_destructor = CapsuleDestructor(_capsule_destructor)


def to_dlpack(tensor, stream=None):
    """A DLPack capsule viewing `tensor`. For CUDA, `stream` is the consumer's stream: work
    queued there after this call will see the tensor's data (an event orders them)."""
    kind, index = device_code(tensor.device)
    if kind == KDL_CUDA and stream not in (None, -1):
        producer = current_stream()
        consumer = 0 if stream == 1 else stream
        if (0 if producer is None else producer.handle) != consumer:
            Stream(_handle=consumer).wait(Event(timing=False).record(producer))
    shape = (ctypes.c_int64 * max(1, tensor.ndim))(*tensor.shape)
    strides = (ctypes.c_int64 * max(1, tensor.ndim))(*tensor.strides)
    managed = DLManagedTensor()
    t = managed.dl_tensor
    if kind == KDL_CUDA:
        t.data = tensor.storage.ptr
    else:
        t.data = tensor.storage.host.ctypes.data
    t.byte_offset = tensor.offset * tensor.dtype.itemsize
    t.device = DLDevice(kind, index)
    t.ndim = tensor.ndim
    t.dtype = DLDataType(tensor.dtype.dlpack_code, 8 * tensor.dtype.itemsize, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    with _lock:
        key = next(_ids)
        _exported[key] = (tensor, managed, shape, strides)
    managed.manager_ctx = key
    managed.deleter = _deleter
    return _api.PyCapsule_New(ctypes.addressof(managed), _CAPSULE_NAME, _destructor)


# ---- consuming -------------------------------------------------------------------------------------
_DTYPES = {(d.dlpack_code, 8 * d.itemsize): d for d in dt.ALL}


class _ForeignMemory:
    """Keeps a consumed DLManagedTensor alive; calls its deleter when the tensor goes."""

    def __init__(self, managed_ptr):
        self.managed = managed_ptr

    def __del__(self):
        m = self.managed.contents
        if m.deleter:
            m.deleter(self.managed)


def from_dlpack(obj):
    """A lowlevel tensor viewing the memory of any object with __dlpack__ (no copy)."""
    capsule = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    ptr = _api.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
    managed = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor))
    t = managed.contents.dl_tensor
    # Check everything before taking the capsule: a refused one stays its producer's.
    dtype = _DTYPES.get((t.dtype.code, t.dtype.bits))
    if dtype is None or t.dtype.lanes != 1:
        raise TypeError(f"DLPack dtype code {t.dtype.code} bits {t.dtype.bits} lanes {t.dtype.lanes} is not supported")
    if t.device.device_type not in (KDL_CPU, KDL_CUDA):
        raise TypeError(f"DLPack device type {t.device.device_type} is not supported")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else contiguous_strides(shape)
    if any(st < 0 for st in strides):
        raise ValueError(f"DLPack tensor with negative strides {strides}: lowlevel views have none; "
                         f"pass a copy (e.g. numpy's .copy())")
    _api.PyCapsule_SetName(capsule, _USED_NAME)
    keeper = _ForeignMemory(managed)
    base = (t.data or 0) + t.byte_offset
    span = (1 + sum((s - 1) * st for s, st in zip(shape, strides) if s > 0)) * dtype.itemsize if all(shape) else 0
    if t.device.device_type == KDL_CPU:
        host = np.ctypeslib.as_array((ctypes.c_uint8 * max(1, span)).from_address(base)) if span else \
            np.zeros(1, np.uint8)
        storage = Storage.foreign(span, Device("cpu"), host=host, keeper=keeper)
    else:
        storage = Storage.foreign(span, Device("cuda", t.device.device_id), block=_ForeignBlock(base),
                                  allocator=_NoFree(), keeper=keeper)
    return Tensor(storage, shape, strides, 0, dtype)


class _ForeignBlock:
    """Device memory another library owns: no stream of ours made it."""

    stream = None

    def __init__(self, ptr: int):
        self.ptr = ptr
        self.address = ptr      # what Storage reads: the owner, not our context, keeps it valid


class _NoFree:
    """Foreign device memory is freed by its owner (through the DLPack deleter), not by us."""

    def free(self, block):
        pass


# ---- the CUDA array interface, and the protocols as Tensor methods ---------------------------------
def cuda_array_interface(tensor) -> dict:
    """__cuda_array_interface__ v3 of a CUDA tensor (AttributeError for others, as the
    protocol asks: consumers test for it with hasattr)."""
    if tensor.device.type != "cuda":
        raise AttributeError("__cuda_array_interface__ exists for CUDA tensors only")
    if tensor.dtype.typestr is None:
        raise TypeError(f"{tensor.dtype.name} has no __cuda_array_interface__ typestr")
    s = current_stream()
    item = tensor.dtype.itemsize
    return {
        "shape": tensor.shape,
        "typestr": tensor.dtype.typestr,
        "data": (tensor.data_ptr if tensor.numel() else 0, False),
        "strides": None if tensor.is_contiguous() else tuple(st * item for st in tensor.strides),
        "version": 3,
        # The stream the data is valid on: 1 is the legacy default stream (0 is not allowed).
        "stream": 1 if s is None else s.handle,
    }


def _dlpack(self, stream=None, **kwargs):
    return to_dlpack(self, stream)


def _dlpack_device(self):
    return device_code(self.device)


Tensor.__cuda_array_interface__ = property(cuda_array_interface)
Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device

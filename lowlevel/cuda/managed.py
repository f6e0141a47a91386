"""Managed (unified) memory and page-locking existing host memory.

`mem_alloc_managed(nbytes)` gives memory that kernels reach at its device pointer and the host
through numpy (`.array(shape, dtype)`). Read the host view after synchronising with the work
that writes it: on a device with CONCURRENT_MANAGED_ACCESS (an H200, the emulated GPU) the
host may touch managed memory while kernels run, though the two race like any two threads;
on one without it, touching managed memory from the host while any kernel runs faults.

`prefetch(...)` and `advise(...)` are hints to the Unified Memory driver (cuMemPrefetchAsync,
cuMemAdvise); `range_attribute(...)` reads back what was asked (cuMemRangeGetAttribute).

`register_host(array)` page-locks a numpy array in place (cuMemHostRegister) until
`.unregister()` or the end of its `with` block: async copies from and to it no longer stage.
"""
import ctypes
from ctypes import c_size_t

import numpy as np

from ..capi.memory_constants import MEM_LOCATION_TYPE, MEM_RANGE_ATTRIBUTE
from ..capi.enums import enum_value
from ..capi.structs import CUmemLocation
from .checked import c_integer, integer
from .context import ContextResource, ensure_context
from .memory import DeviceAllocation, device_pointer
from .pointer import pointer_attribute
from .stream import stream_handle

ATTACH = {"global": 0x1, "host": 0x2}
CU_DEVICE_CPU, CU_DEVICE_INVALID = -1, -2


class ManagedAllocation(DeviceAllocation):
    """Managed memory: `.ptr` for kernels, `.array(shape, dtype)` for the host."""

    def __init__(self, ptr: int, size: int):
        super().__init__(ptr, size)
        self._host = pointer_attribute(ptr, "HOST_POINTER")

    def array(self, shape=None, dtype=np.uint8) -> np.ndarray:
        """A numpy view of the memory (all of it as `dtype` by default); it keeps the
        allocation alive."""
        dtype = np.dtype(dtype)
        count = self.size // dtype.itemsize if shape is None else int(np.prod(shape, dtype=object))
        if count * dtype.itemsize > self.size:
            raise ValueError(f"ManagedAllocation.array: {count} x {dtype} exceed the {self.size}-byte allocation")
        self.check_context()              # after a reset the host address means nothing
        raw = (ctypes.c_char * self.size).from_address(self._host)
        raw.owner = self
        view = np.frombuffer(raw, dtype=dtype, count=count)
        return view if shape is None else view.reshape(shape)


def mem_alloc_managed(nbytes: int, attach: str = "global") -> ManagedAllocation:
    """`nbytes` of managed memory (cuMemAllocManaged); attach="host" leaves it attached to
    the host until a stream attaches it (CU_MEM_ATTACH_HOST)."""
    nbytes = c_integer(nbytes, c_size_t, "mem_alloc_managed: nbytes")
    if nbytes <= 0:
        raise ValueError(f"mem_alloc_managed: size must be positive, got {nbytes}")
    if attach not in ATTACH:
        raise ValueError(f"mem_alloc_managed: attach must be 'global' or 'host', got {attach!r}")
    drv, _ = ensure_context()
    ptr = ctypes.c_uint64()
    drv.cuMemAllocManaged(ctypes.byref(ptr), nbytes, ATTACH[attach])
    return ManagedAllocation(ptr.value, nbytes)


def location(where) -> CUmemLocation:
    """A CUmemLocation: a device ordinal (int) or "host"."""
    if where == "host":
        return CUmemLocation(MEM_LOCATION_TYPE["CU_MEM_LOCATION_TYPE_HOST"], 0)
    ordinal = c_integer(where, ctypes.c_int, "location: device ordinal")
    return CUmemLocation(MEM_LOCATION_TYPE["CU_MEM_LOCATION_TYPE_DEVICE"], ordinal)


def _span(ptr, nbytes, what: str) -> tuple[int, int]:
    address = device_pointer(ptr)
    if nbytes is None:
        if not isinstance(ptr, DeviceAllocation):
            raise ValueError(f"{what}: nbytes must be given for a plain pointer")
        nbytes = ptr.size
    return address, c_integer(nbytes, c_size_t, f"{what}: nbytes")


def prefetch(ptr, to=0, nbytes: int | None = None, stream=None) -> None:
    """Ask for managed memory to migrate to device `to` (an ordinal) or "host", in `stream`'s
    order (cuMemPrefetchAsync)."""
    address, nbytes = _span(ptr, nbytes, "prefetch")
    handle = stream_handle(stream, "prefetch: stream")
    drv, _ = ensure_context()
    drv.cuMemPrefetchAsync(address, nbytes, location(to), 0, handle)


def advise(ptr, advice: str, where=0, nbytes: int | None = None) -> None:
    """Advice on managed memory (cuMemAdvise): "SET_READ_MOSTLY", "SET_PREFERRED_LOCATION",
    "SET_ACCESSED_BY" and their UNSET_ forms; `where` is a device ordinal or "host"."""
    number = enum_value("memory advice", advice)
    address, nbytes = _span(ptr, nbytes, "advise")
    drv, _ = ensure_context()
    drv.cuMemAdvise(address, nbytes, number, location(where))


def range_attribute(ptr, name: str, nbytes: int | None = None) -> int | list[int]:
    """What was asked of a managed range (cuMemRangeGetAttribute): "READ_MOSTLY" (0/1),
    "PREFERRED_LOCATION", "LAST_PREFETCH_LOCATION" (a device ordinal, -1 for the host, -2
    for none or mixed), "ACCESSED_BY" (the devices, a list)."""
    full = name if name.startswith("CU_MEM_RANGE_ATTRIBUTE_") else "CU_MEM_RANGE_ATTRIBUTE_" + name.upper()
    if full not in MEM_RANGE_ATTRIBUTE:
        raise ValueError(f"unknown range attribute {name!r}")
    address, nbytes = _span(ptr, nbytes, "range_attribute")
    drv, _ = ensure_context()
    slots = 8 if full.endswith("ACCESSED_BY") else 1
    out = (ctypes.c_int * slots)()
    drv.cuMemRangeGetAttribute(out, 4 * slots, MEM_RANGE_ATTRIBUTE[full], address, nbytes)
    if slots == 1:
        return out[0]
    return [d for d in out if d != CU_DEVICE_INVALID]


class RegisteredHost(ContextResource):
    """A numpy array page-locked in place (cuMemHostRegister); `with` unregisters at the end."""

    def __init__(self, array: np.ndarray, portable: bool = False):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"register_host: expected a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous or array.nbytes == 0:
            raise ValueError("register_host: the array must be C-contiguous and not empty")
        self._adopt()
        self.array = array                  # kept alive while registered
        self.address, self.nbytes = array.ctypes.data, integer(array.nbytes, "register_host: nbytes")
        self._drv.cuMemHostRegister(self.address, self.nbytes, 0x1 if portable else 0)

    def unregister(self) -> None:
        self.release()

    def _release(self) -> None:
        self._drv.cuMemHostUnregister(self.address)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unregister()
        return False


def register_host(array: np.ndarray, portable: bool = False) -> RegisteredHost:
    """Page-lock `array` in place until `.unregister()` (or the end of a `with` block)."""
    return RegisteredHost(array, portable)

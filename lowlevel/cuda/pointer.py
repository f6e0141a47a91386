"""What the driver knows about an address: cuPointerGetAttribute(s).

`pointer_attributes(ptr)` answers in one call (cuPointerGetAttributes) for any address, even
one the driver does not know (its memory_type is then None); `pointer_attribute(ptr, name)`
asks for one attribute and fails as the driver does (CUDA_ERROR_INVALID_VALUE for an address
it does not know, or an attribute the memory lacks, such as the host pointer of device memory).
"""
import ctypes
from dataclasses import dataclass

from ..capi.memory_constants import MEMORY_TYPE, POINTER_ATTRIBUTE
from ..capi.enums import enum_value
from .checked import c_integer
from .context import ensure_context

_MEMORY_TYPES = {value: name.removeprefix("CU_MEMORYTYPE_").lower() for name, value in MEMORY_TYPE.items()}

# attribute -> how its *data is read back (bools may be written as one byte or four:
# the storage is zeroed, so the low byte decides either way)
_FIELDS = {
    "MEMORY_TYPE": ctypes.c_uint, "DEVICE_POINTER": ctypes.c_uint64, "HOST_POINTER": ctypes.c_void_p,
    "CONTEXT": ctypes.c_void_p, "RANGE_START_ADDR": ctypes.c_void_p, "RANGE_SIZE": ctypes.c_size_t,
    "IS_MANAGED": ctypes.c_bool, "DEVICE_ORDINAL": ctypes.c_int, "BUFFER_ID": ctypes.c_uint64,
    "MAPPED": ctypes.c_bool,
}
_POINTERS = {"HOST_POINTER", "CONTEXT", "RANGE_START_ADDR"}


@dataclass(frozen=True)
class PointerAttributes:
    """An address as the driver sees it. memory_type is "device", "host", "array", "unified",
    or None for memory the driver does not know (the other fields are then their defaults)."""
    memory_type: str | None
    device_pointer: int | None      # how kernels reach it (None: they cannot)
    host_pointer: int | None        # how the host reaches it (None: it cannot)
    context: int | None             # the CUcontext that owns it
    device_ordinal: int
    range_start: int | None         # the allocation it lies in
    range_size: int
    is_managed: bool
    buffer_id: int
    mapped: bool


def _read(name: str, cell) -> int | bool | None:
    value = _FIELDS[name].from_buffer(cell).value
    if name in _POINTERS or name == "DEVICE_POINTER":
        return value or None
    return value


def _address(ptr, what: str) -> int:
    return c_integer(int(ptr), ctypes.c_uint64, what)


def pointer_attributes(ptr) -> PointerAttributes:
    """Every attribute lowlevel reads of `ptr` (an int or a DeviceAllocation), in one call."""
    address = _address(ptr, "pointer_attributes: ptr")
    drv, _ = ensure_context()
    names = list(_FIELDS)
    numbers = (ctypes.c_int * len(names))(*(POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_" + n] for n in names))
    cells = [(ctypes.c_char * 8)() for _ in names]          # zeroed, 8 bytes: room for each type
    data = (ctypes.c_void_p * len(names))(*(ctypes.addressof(c) for c in cells))
    drv.cuPointerGetAttributes(len(names), numbers, data, address)
    values = {n: _read(n, c) for n, c in zip(names, cells)}
    return PointerAttributes(
        memory_type=_MEMORY_TYPES.get(values["MEMORY_TYPE"]), device_pointer=values["DEVICE_POINTER"],
        host_pointer=values["HOST_POINTER"], context=values["CONTEXT"], device_ordinal=values["DEVICE_ORDINAL"],
        range_start=values["RANGE_START_ADDR"], range_size=values["RANGE_SIZE"],
        is_managed=bool(values["IS_MANAGED"]), buffer_id=values["BUFFER_ID"], mapped=bool(values["MAPPED"]))


def pointer_attribute(ptr, name: str) -> int:
    """One attribute by name ("RANGE_SIZE" or "CU_POINTER_ATTRIBUTE_RANGE_SIZE"), as an int
    (cuPointerGetAttribute: an address the driver does not know is its CudaError)."""
    number = enum_value("pointer attribute", name)
    address = _address(ptr, "pointer_attribute: ptr")
    drv, _ = ensure_context()
    cell = (ctypes.c_char * 8)()
    drv.cuPointerGetAttribute(cell, number, address)
    if number in _SIGNED:
        return ctypes.c_int.from_buffer(cell).value
    return int.from_bytes(bytes(cell), "little")


_SIGNED = {POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL"],
           POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_LOCALITY_DOMAIN_ORDINAL"]}

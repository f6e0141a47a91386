"""cuPointerGetAttribute(s): what the emulated driver knows about an address.

Addresses are unified (one address space for every device and for pinned host memory), so a
pointer is looked up in every live context, whichever is current: the attributes name the
context and device that own it. Kinds of memory:

    device      cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch, module variables: no host
                pointer (the host faults on it)
    managed     cuMemAllocManaged: one address for host and device
    pinned      cuMemAllocHost, cuMemHostAlloc: host memory, at the same address on the
                device (unified addressing maps it, whatever the flags)
    registered  cuMemHostRegister: the same, for memory the program allocated
                (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 1)
"""
import ctypes
import itertools
from dataclasses import dataclass

from ...capi.memory_constants import MEMORY_TYPE, POINTER_ATTRIBUTE
from .context import Context, api, current, live_contexts
from .errors import EmuError

_buffer_ids = itertools.count(1)       # process-wide, never reused (as the driver documents)
CU_DEVICE_INVALID = -2                 # cuda.h: the device ordinal of no device


def note_allocation(ctx: Context, address: int) -> None:
    """A new allocation at `address` gets a fresh buffer id."""
    ctx.buffer_ids[address] = next(_buffer_ids)


def forget_allocation(ctx: Context, address: int) -> None:
    ctx.buffer_ids.pop(address, None)
    ctx.managed.pop(address, None)


@dataclass
class Located:
    kind: str              # "device", "managed", "pinned", "registered"
    ctx: Context
    start: int
    size: int
    address: int           # the address asked about, as the device sees it (host memory: as given)

    def buffer_id(self) -> int:
        if self.start not in self.ctx.buffer_ids:      # a module variable: an id on first query
            note_allocation(self.ctx, self.start)
        return self.ctx.buffer_ids[self.start]


def locate(ptr: int) -> Located | None:
    """The allocation (or host range) that contains `ptr`, in any live context."""
    for ctx in live_contexts():
        hit = ctx.memory.find(ptr)
        if hit is not None:
            kind = "managed" if hit[0] in ctx.managed else "pinned" if hit[0] in ctx.pinned else "device"
            return Located(kind, ctx, *hit, ptr)
        for start, size in list(ctx.registered.items()):
            if start <= ptr < start + size:
                return Located("registered", ctx, start, size, ptr)
    return None


def _device_pointer(hit: Located, ptr: int):
    return ptr                  # unified addressing: every kind, at the address itself


def _host_pointer(hit: Located, ptr: int):
    return None if hit.kind == "device" else ptr


_BOOL, _INT, _UINT, _U64, _PTR, _SIZE = (ctypes.c_bool, ctypes.c_int, ctypes.c_uint, ctypes.c_uint64,
                                         ctypes.c_void_p, ctypes.c_size_t)
# attribute -> (C type of *data, value for a pointer found (None: it has none), default for
# a pointer the driver does not know, in cuPointerGetAttributes)
_ATTRIBUTES = {
    "CONTEXT": (_PTR, lambda h, p: h.ctx.handle, 0),
    "MEMORY_TYPE": (_UINT, lambda h, p: MEMORY_TYPE["CU_MEMORYTYPE_DEVICE" if h.kind in ("device", "managed")
                                                     else "CU_MEMORYTYPE_HOST"], 0),
    "DEVICE_POINTER": (_U64, _device_pointer, 0),
    "HOST_POINTER": (_PTR, _host_pointer, 0),
    "SYNC_MEMOPS": (_BOOL, lambda h, p: False, False),
    "BUFFER_ID": (_U64, lambda h, p: h.buffer_id(), 0),
    "IS_MANAGED": (_BOOL, lambda h, p: h.kind == "managed", False),
    "DEVICE_ORDINAL": (_INT, lambda h, p: h.ctx.ordinal, CU_DEVICE_INVALID),
    "IS_LEGACY_CUDA_IPC_CAPABLE": (_BOOL, lambda h, p: False, False),      # no IPC here
    "RANGE_START_ADDR": (_PTR, lambda h, p: h.start, 0),
    "RANGE_SIZE": (_SIZE, lambda h, p: h.size, 0),
    "MAPPED": (_BOOL, lambda h, p: True, False),
    "ALLOWED_HANDLE_TYPES": (_U64, lambda h, p: 0, 0),
    "IS_GPU_DIRECT_RDMA_CAPABLE": (_BOOL, lambda h, p: False, False),
    "MEMPOOL_HANDLE": (_PTR, lambda h, p: 0, 0),                            # no memory pools here
    "MAPPING_SIZE": (_SIZE, lambda h, p: h.size, 0),
    "MAPPING_BASE_ADDR": (_PTR, lambda h, p: h.start, 0),
    "MEMORY_BLOCK_ID": (_U64, lambda h, p: h.buffer_id(), 0),
    "IS_HW_DECOMPRESS_CAPABLE": (_BOOL, lambda h, p: False, False),
    "LOCALITY_DOMAIN_ORDINAL": (_INT, lambda h, p: -1, -1),
}
_BY_NUMBER = {POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_" + name]: (name, entry) for name, entry in _ATTRIBUTES.items()}
# Defined by cuda.h, not modelled: the nv-p2p tokens and the access flags of VMM mappings.
_UNSUPPORTED = {POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_P2P_TOKENS"],
                POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_ACCESS_FLAGS"]}


def _attribute(number: int):
    if number in _UNSUPPORTED:
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", f"pointer attribute {number} is not emulated")
    if number not in _BY_NUMBER:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown pointer attribute {number}")
    name, (ctype, value, default) = _BY_NUMBER[number]
    return name, ctype, value, default


def _store(ctype, address: int, value) -> None:
    if not address:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL data pointer")
    ctype.from_address(address).value = value


@api
def cuPointerGetAttribute(data, attribute, ptr):
    current()
    name, ctype, value, _ = _attribute(attribute)
    hit = locate(ptr)
    if hit is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{ptr:#x} was not allocated by or registered with the driver")
    result = value(hit, ptr)
    if result is None:
        reach = "device" if name == "DEVICE_POINTER" else "host"
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{ptr:#x} ({hit.kind} memory) cannot be reached by the {reach}")
    _store(ctype, data, result)


@api
def cuPointerGetAttributes(count, attributes, data, ptr):
    # Unlike cuPointerGetAttribute, an unknown pointer is no error: every attribute gets
    # its default, and what a pointer lacks (a host pointer of device memory) is NULL.
    current()
    if count and not (attributes and data):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL attributes or data array")
    wanted = [_attribute(ctypes.c_int.from_address(attributes + 4 * i).value) for i in range(count)]
    hit = locate(ptr)
    for i, (_, ctype, value, default) in enumerate(wanted):
        result = default if hit is None else value(hit, ptr)
        _store(ctype, ctypes.c_void_p.from_address(data + 8 * i).value or 0, default if result is None else result)

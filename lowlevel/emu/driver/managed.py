"""Managed memory and registered host memory on the emulated GPU.

cuMemAllocManaged allocates in the device arena, which is host memory to begin with: the
host reaches it at its host pointer (CU_POINTER_ATTRIBUTE_HOST_POINTER), kernels at its
device pointer, and nothing migrates. The device reports CONCURRENT_MANAGED_ACCESS = 1 (as an
H200 does): the host may touch managed memory while kernels run, with the races that implies.

cuMemPrefetchAsync and cuMemAdvise move nothing either; they are validated as the driver
validates them and recorded per 4 KiB page (the CPU page the driver rounds to), so that
cuMemRangeGetAttribute answers what was asked for. Host NUMA locations are recorded as the
host (the emulated system has one NUMA node, 0).

With unified addressing, cuMemAllocManaged memory sits at one address for host and kernels:
its pages of the host window (engine/hostwindow.py) are open.

cuMemHostRegister page-locks (here: records) an existing host range: copies from and to it
are truly asynchronous, as from cuMemAllocHost memory, and kernels of every device reach it
at its host address (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 1, as on Linux), checked
against the range (HOST_RANGES). Read-only and I/O registrations are refused.
"""
import ctypes

import numpy as np

from ...capi.memory_constants import MEM_ADVISE, MEM_LOCATION_TYPE, MEM_RANGE_ATTRIBUTE
from ..engine.memory import HOST_RANGES
from .capture import refuse_unsafe
from .context import api, current, device_count, live_contexts
from .entry import write_out
from .errors import EmuError
from .memory import allocate
from .pointer import locate

PAGE = 4096
CU_DEVICE_CPU, CU_DEVICE_INVALID = -1, -2
ATTACH_GLOBAL, ATTACH_HOST, ATTACH_SINGLE = 0x1, 0x2, 0x4
REGISTER_PORTABLE, REGISTER_DEVICEMAP, REGISTER_IOMEMORY, REGISTER_READ_ONLY = 0x1, 0x2, 0x4, 0x8
LOC = {name.removeprefix("CU_MEM_LOCATION_TYPE_"): value for name, value in MEM_LOCATION_TYPE.items()}
ADVICE = {value: name.removeprefix("CU_MEM_ADVISE_") for name, value in MEM_ADVISE.items()}
RANGE = {value: name.removeprefix("CU_MEM_RANGE_ATTRIBUTE_") for name, value in MEM_RANGE_ATTRIBUTE.items()}


class ManagedRange:
    """What was asked of one managed allocation, page by page: read-mostly, the preferred
    location, the last prefetch location (a device ordinal, CU_DEVICE_CPU or
    CU_DEVICE_INVALID for none) and which devices will access it."""

    def __init__(self, start: int, size: int):
        pages = -(-size // PAGE)
        self.start = start
        self.read_mostly = np.zeros(pages, bool)
        self.preferred = np.full(pages, CU_DEVICE_INVALID, np.int32)
        self.prefetched = np.full(pages, CU_DEVICE_INVALID, np.int32)
        self.devices = device_count()
        self.accessed_by = np.zeros((pages, self.devices + 1), bool)     # the last column: the host

    def pages(self, ptr: int, count: int) -> slice:
        return slice((ptr - self.start) // PAGE, -(-(ptr + count - self.start) // PAGE))


@api
def cuMemAllocManaged(dptr_out, nbytes, flags):
    ctx = current()
    refuse_unsafe(ctx, "cuMemAllocManaged")
    if flags not in (ATTACH_GLOBAL, ATTACH_HOST):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"flags {flags:#x}: must be CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST")
    address = allocate(ctx, nbytes, visible=True)
    ctx.managed[address] = ManagedRange(address, nbytes)
    write_out(ctypes.c_uint64, dptr_out, address)


def _managed_range(ptr: int, count: int, call: str) -> ManagedRange:
    hit = locate(ptr)
    if hit is None or hit.kind != "managed":
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: {ptr:#x} is not managed memory")
    if count == 0 or ptr + count > hit.start + hit.size:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{call}: [{ptr:#x}, +{count}) is not inside the managed allocation at {hit.start:#x}")
    return hit.ctx.managed[hit.start]


def _location(location, call: str, allow_none: bool = False) -> int:
    """A CUmemLocation as a device ordinal or CU_DEVICE_CPU (refused as the driver does)."""
    kind, ident = location.type, location.id
    if kind == LOC["DEVICE"]:
        if not 0 <= ident < device_count():
            raise EmuError("CUDA_ERROR_INVALID_DEVICE", f"{call}: device {ident} does not exist")
        return ident           # every emulated device has CONCURRENT_MANAGED_ACCESS
    if kind in (LOC["HOST"], LOC["HOST_NUMA_CURRENT"]):
        return CU_DEVICE_CPU
    if kind == LOC["HOST_NUMA"]:
        if ident != 0:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: host NUMA node {ident} does not exist (only 0)")
        return CU_DEVICE_CPU
    if kind == LOC["DEVICE_LOCALITY_DOMAIN"]:
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", f"{call}: locality-domain locations are not supported")
    if allow_none:
        return CU_DEVICE_INVALID
    raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: location type {kind} is not a device or the host")


@api
def cuMemPrefetchAsync(ptr, count, location, flags, stream_handle):
    ctx = current()
    stream = ctx.stream(stream_handle)
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemPrefetchAsync: flags must be 0, got {flags:#x}")
    where = _location(location, "cuMemPrefetchAsync")
    managed = _managed_range(ptr, count, "cuMemPrefetchAsync")
    managed.prefetched[managed.pages(ptr, count)] = where     # what was requested, at once
    ctx.submit(stream, lambda: None, "prefetch")               # ordered in the stream; moves nothing


@api
def cuMemAdvise(ptr, count, advice, location):
    current()
    name = ADVICE.get(advice)
    if name is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemAdvise: unknown advice {advice}")
    managed = _managed_range(ptr, count, "cuMemAdvise")
    pages = managed.pages(ptr, count)
    if name in ("SET_READ_MOSTLY", "UNSET_READ_MOSTLY"):           # the location is ignored
        managed.read_mostly[pages] = name == "SET_READ_MOSTLY"
    elif name == "UNSET_PREFERRED_LOCATION":
        managed.preferred[pages] = CU_DEVICE_INVALID
    elif name == "SET_PREFERRED_LOCATION":
        managed.preferred[pages] = _location(location, "cuMemAdvise")
    else:
        if location.type not in (LOC["DEVICE"], LOC["HOST"]):
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemAdvise: {name} takes a device or the host")
        where = _location(location, "cuMemAdvise")
        column = managed.devices if where == CU_DEVICE_CPU else where
        managed.accessed_by[pages, column] = name == "SET_ACCESSED_BY"


def _same(values: np.ndarray) -> int:
    return int(values[0]) if values.size and (values == values[0]).all() else CU_DEVICE_INVALID


def _location_type(where: int) -> int:
    if where == CU_DEVICE_INVALID:
        return LOC["INVALID"]
    return LOC["HOST"] if where == CU_DEVICE_CPU else LOC["DEVICE"]


@api
def cuMemRangeGetAttribute(data, size, attribute, ptr, count):
    current()
    name = RANGE.get(attribute)
    if name is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown range attribute {attribute}")
    if not data or size < 4 or (size != 4 and name != "ACCESSED_BY") or size % 4:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"dataSize {size} does not suit {name}")
    managed = _managed_range(ptr, count, "cuMemRangeGetAttribute")
    pages = managed.pages(ptr, count)
    if name == "ACCESSED_BY":
        every = managed.accessed_by[pages].all(axis=0)[:managed.devices]
        devices = [int(d) for d in np.flatnonzero(every)][: size // 4]
        values = devices + [CU_DEVICE_INVALID] * (size // 4 - len(devices))
        ctypes.memmove(data, (ctypes.c_int * len(values))(*values), size)
        return
    preferred, prefetched = _same(managed.preferred[pages]), _same(managed.prefetched[pages])
    value = {
        "READ_MOSTLY": int(managed.read_mostly[pages].all()),
        "PREFERRED_LOCATION": preferred, "LAST_PREFETCH_LOCATION": prefetched,
        "PREFERRED_LOCATION_TYPE": _location_type(preferred), "PREFERRED_LOCATION_ID": max(preferred, 0),
        "LAST_PREFETCH_LOCATION_TYPE": _location_type(prefetched), "LAST_PREFETCH_LOCATION_ID": max(prefetched, 0),
    }[name]
    write_out(ctypes.c_int, data, value)


# ---- registered host memory -------------------------------------------------------------------
def _overlaps(start: int, size: int) -> bool:
    for ctx in live_contexts():
        ranges = [*ctx.registered.items(), *((a, n) for a, (n, _) in list(ctx.pinned.items()))]
        if any(a < start + size and start < a + n for a, n in ranges):
            return True
    return False


@api
def cuMemHostRegister(p, nbytes, flags):
    ctx = current()
    refuse_unsafe(ctx, "cuMemHostRegister")
    if not p or nbytes == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemHostRegister: NULL pointer or 0 bytes")
    if flags & ~(REGISTER_PORTABLE | REGISTER_DEVICEMAP | REGISTER_IOMEMORY | REGISTER_READ_ONLY):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemHostRegister: unknown flags {flags:#x}")
    if flags & (REGISTER_IOMEMORY | REGISTER_READ_ONLY):
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED",
                       "cuMemHostRegister: IOMEMORY and READ_ONLY registrations are not emulated "
                       "(READ_ONLY_HOST_REGISTER_SUPPORTED is 0)")
    if _overlaps(p, nbytes):
        raise EmuError("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
                       f"cuMemHostRegister: [{p:#x}, +{nbytes}) overlaps page-locked memory")
    hit = locate(p) or locate(p + nbytes - 1)
    if hit is not None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemHostRegister: [{p:#x}, +{nbytes}) is {hit.kind} memory")
    ctx.registered[p] = nbytes
    HOST_RANGES.add(p, nbytes)


@api
def cuMemHostGetDevicePointer(dptr_out, p, flags):
    current()
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemHostGetDevicePointer: flags must be 0, got {flags:#x}")
    hit = locate(p)
    if hit is None or hit.kind not in ("pinned", "registered"):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemHostGetDevicePointer: {p:#x} is not page-locked host memory")
    write_out(ctypes.c_uint64, dptr_out, p)        # unified addressing: the host address itself


@api
def cuMemHostUnregister(p):
    ctx = current()
    refuse_unsafe(ctx, "cuMemHostUnregister")
    owner = next((c for c in live_contexts() if p in c.registered), None)
    if owner is None:
        raise EmuError("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
                       f"cuMemHostUnregister: {p:#x} is not the start of a registered range")
    owner.synchronize()            # copies still using it finish first
    del owner.registered[p]
    HOST_RANGES.remove(p)

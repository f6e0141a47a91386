"""Memory pools (cuMemPool*, cuMemAllocFromPoolAsync), as cuda.core's memory resources use them.

Each device has its default pool (cuDeviceGetDefaultMemPool), which is also its current one
until cuDeviceSetMemPool names another; cuMemPoolCreate makes more. A pool allocation is a
cuMemAllocAsync of the current context (stream-ordered as that is) that the pool counts, so
its attributes answer what a client asks: the release threshold and the reuse policies as
set, and the used and reserved bytes of its live allocations (the emulated device keeps no
cache of freed blocks, so reserved is used). Trimming has nothing to give back.
"""
import ctypes
import itertools

from .context import api, current, device_ordinal, require_init
from .entry import write_out
from .errors import EmuError
from .memory import cuMemAllocAsync

_POOL_BASE = 0x7D00_0000_0000
# CUmemPool_attribute: the reuse flags are ints, the rest cuuint64_t
REUSE_ATTRIBUTES = (1, 2, 3)
RELEASE_THRESHOLD, RESERVED_CURRENT, RESERVED_HIGH, USED_CURRENT, USED_HIGH = 4, 5, 6, 7, 8
LOCATION_DEVICE, ALLOCATION_PINNED = 1, 1
ACCESS_READWRITE = 3


class Pool:
    def __init__(self, handle: int, device: int):
        self.handle, self.device = handle, device
        self.settings = {1: 1, 2: 1, 3: 1, RELEASE_THRESHOLD: 0}
        self.allocations: dict[int, int] = {}       # address -> bytes, while live
        self.high = 0

    def used(self) -> int:
        ctx = current(check_sticky=False)
        for address in [a for a in self.allocations if not ctx.memory.is_allocation(a)]:
            del self.allocations[address]              # freed since (cuMemFree/cuMemFreeAsync)
        return sum(self.allocations.values())


_handles = itertools.count(1)
_pools: dict[int, Pool] = {}
_defaults: dict[int, Pool] = {}
_current: dict[int, Pool] = {}


def _default(dev: int) -> Pool:
    pool = _defaults.get(dev)
    if pool is None:
        pool = _defaults[dev] = _pools.setdefault(_POOL_BASE + 0x1000 * dev, Pool(_POOL_BASE + 0x1000 * dev, dev))
    return pool


def _pool(handle: int, call: str) -> Pool:
    pool = _pools.get(handle)
    if pool is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: {handle:#x} is not a memory pool")
    return pool


@api
def cuDeviceGetDefaultMemPool(pool_out, dev):
    require_init()
    write_out(ctypes.c_void_p, pool_out, _default(device_ordinal(dev)).handle)


@api
def cuDeviceGetMemPool(pool_out, dev):
    require_init()
    dev = device_ordinal(dev)
    write_out(ctypes.c_void_p, pool_out, _current.get(dev, _default(dev)).handle)


@api
def cuDeviceSetMemPool(dev, handle):
    require_init()
    dev = device_ordinal(dev)
    pool = _pool(handle, "cuDeviceSetMemPool")
    if pool.device != dev:
        raise EmuError("CUDA_ERROR_INVALID_DEVICE", f"cuDeviceSetMemPool: the pool belongs to device {pool.device}")
    _current[dev] = pool


@api
def cuMemPoolCreate(pool_out, props):
    require_init()
    if not props or not pool_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemPoolCreate: NULL argument")
    # CUmemPoolProps: allocType, handleTypes, CUmemLocation {type, id}, ...
    alloc_type, _handle_types, location_type, location_id = (ctypes.c_int * 4).from_address(props)
    if alloc_type != ALLOCATION_PINNED or location_type != LOCATION_DEVICE:
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", "cuMemPoolCreate: only pinned pools on a device are emulated")
    handle = _POOL_BASE + 0x100_0000 + next(_handles)
    _pools[handle] = Pool(handle, device_ordinal(location_id))
    write_out(ctypes.c_void_p, pool_out, handle)


@api
def cuMemPoolDestroy(handle):
    pool = _pool(handle, "cuMemPoolDestroy")
    if pool in _defaults.values():
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemPoolDestroy: a device's default pool cannot be destroyed")
    for dev, chosen in list(_current.items()):
        if chosen is pool:
            del _current[dev]
    del _pools[handle]


@api
def cuMemAllocFromPoolAsync(dptr_out, nbytes, handle, stream):
    pool = _pool(handle, "cuMemAllocFromPoolAsync")
    if current().ordinal != pool.device:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemAllocFromPoolAsync: the pool is another device's")
    cuMemAllocAsync.__wrapped__(dptr_out, nbytes, stream)
    pool.allocations[ctypes.c_uint64.from_address(dptr_out).value] = nbytes
    pool.high = max(pool.high, pool.used())


@api
def cuMemPoolGetAttribute(handle, attribute, value_out):
    pool = _pool(handle, "cuMemPoolGetAttribute")
    if attribute in REUSE_ATTRIBUTES:
        write_out(ctypes.c_int, value_out, pool.settings[attribute])
    elif attribute == RELEASE_THRESHOLD:
        write_out(ctypes.c_uint64, value_out, pool.settings[attribute])
    elif attribute in (RESERVED_CURRENT, USED_CURRENT):
        write_out(ctypes.c_uint64, value_out, pool.used())
    elif attribute in (RESERVED_HIGH, USED_HIGH):
        write_out(ctypes.c_uint64, value_out, pool.high)
    else:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemPoolGetAttribute: unknown attribute {attribute}")


@api
def cuMemPoolSetAttribute(handle, attribute, value):
    pool = _pool(handle, "cuMemPoolSetAttribute")
    if not value:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemPoolSetAttribute: NULL value")
    if attribute in REUSE_ATTRIBUTES:
        pool.settings[attribute] = ctypes.c_int.from_address(value).value
    elif attribute == RELEASE_THRESHOLD:
        pool.settings[attribute] = ctypes.c_uint64.from_address(value).value
    elif attribute in (RESERVED_HIGH, USED_HIGH):
        if ctypes.c_uint64.from_address(value).value != 0:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemPoolSetAttribute: a high watermark can only be reset to 0")
        pool.high = pool.used()
    else:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuMemPoolSetAttribute: attribute {attribute} cannot be set")


@api
def cuMemPoolTrimTo(handle, min_bytes):
    _pool(handle, "cuMemPoolTrimTo")         # freed blocks go back at once: nothing is kept to trim


@api
def cuMemPoolGetAccess(flags_out, handle, location):
    pool = _pool(handle, "cuMemPoolGetAccess")
    if not location:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuMemPoolGetAccess: NULL location")
    kind, ident = (ctypes.c_int * 2).from_address(location)
    owner = kind == LOCATION_DEVICE and ident == pool.device
    write_out(ctypes.c_int, flags_out, ACCESS_READWRITE if owner else 0)

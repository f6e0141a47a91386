"""Device memory of the emulated GPU: one arena, an allocation table, bounds checks.

Device addresses start at BASE (2^36, above 2^32) so that a pointer truncated to 32 bits
can never land inside an allocation: it faults, as it would on a GPU. The arena is one
anonymous mmap, so untouched pages cost nothing and the bytes have a stable host address
that host<->device copies reach with a plain memmove.

Every access the engine makes goes through `offsets()`, which checks each thread's
address against the allocation table: an access is legal only if all of its bytes lie
inside one live allocation, and it is aligned to its own size.
"""
import bisect
import ctypes
import functools
import mmap
import sys
import threading

import numpy as np

from .faults import KernelFault

BASE = 1 << 36           # first device address
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
ALIGNMENT = 512          # cuMemAlloc returns 512-byte aligned pointers on current GPUs


class OutOfMemory(Exception):
    pass


class AccessFault(Exception):
    """A bad address found by a bounds or alignment check.

    `index` is the position of the first offending element in the address array the check
    was given, so the engine can name the thread; `code_name` is the CUresult it becomes.
    """

    def __init__(self, code_name: str, index: int, address: int, nbytes: int):
        kind = "misaligned" if code_name == "CUDA_ERROR_MISALIGNED_ADDRESS" else "out-of-bounds"
        super().__init__(f"{kind} {nbytes}-byte access at address {address:#x}")
        self.code_name = code_name
        self.index = index
        self.address = address
        self.nbytes = nbytes


class DeviceMemory:
    """The arena and its allocation table (first fit over a sorted free list)."""

    def __init__(self, size: int, first_offset: int = 0, arena: mmap.mmap | None = None):
        # `first_offset`: where this device's addresses begin above BASE, so that several
        # devices never hand out the same address (unified addressing); the pages below it
        # are mapped but never touched, which costs nothing (and, not reserved, counts
        # against no overcommit limit). `arena`: the mapping all devices share
        # (unified_arena), so that an arena offset reaches a peer device's bytes too.
        self.size = size
        if arena is None:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (MAP_NORESERVE if first_offset else 0)
            arena = mmap.mmap(-1, first_offset + size, flags=flags)
        elif len(arena) < first_offset + size:
            raise ValueError(f"the shared arena ({len(arena)} bytes) ends before this device's memory")
        self._map = arena
        # The memories of the devices this one's kernels may also reach (those its context
        # enabled peer access to, cuCtxEnablePeerAccess): asked only when an access misses
        # this device's own allocations. The driver sets it; a callable, as a peer that is
        # reset since is a fresh context whose access was never enabled.
        self.peer_memories = tuple
        self.u8 = np.frombuffer(self._map, dtype=np.uint8)
        self.host_base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        self._lock = threading.Lock()
        self._free = [(first_offset, size)]  # (offset, length), sorted by offset
        self._starts: list[int] = []        # device addresses of live allocations, sorted
        self._sizes: dict[int, int] = {}    # start address -> requested size
        # (starts, ends, np starts, np ends) of the live allocations, published as one
        # tuple so that readers on other threads never see halves of two different tables
        self._index = ((), (), np.zeros(0, np.uint64), np.zeros(0, np.uint64))
        self._views: dict[np.dtype, np.ndarray] = {}

    # -- allocation -------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        """Reserve `nbytes` (rounded up to ALIGNMENT) and return the device address."""
        need = max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)
        with self._lock:
            for i, (off, length) in enumerate(self._free):
                if length >= need:
                    if length == need:
                        del self._free[i]
                    else:
                        self._free[i] = (off + need, length - need)
                    addr = BASE + off
                    bisect.insort(self._starts, addr)
                    self._sizes[addr] = nbytes
                    self._reindex()
                    return addr
        raise OutOfMemory(nbytes)

    def free(self, addr: int) -> None:
        """Release the allocation that starts at `addr`; KeyError if there is none."""
        with self._lock:
            nbytes = self._sizes.pop(addr)
            self._starts.remove(addr)
            self._reindex()
            off = addr - BASE
            need = max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)
            bisect.insort(self._free, (off, need))
            self._coalesce()

    def _coalesce(self) -> None:
        merged = []
        for off, length in self._free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + length)
            else:
                merged.append((off, length))
        self._free = merged

    def _reindex(self) -> None:
        # The tables for the checks, rebuilt on each alloc/free (rare next to loads), under
        # the lock, and published in one assignment.
        starts = tuple(self._starts)
        ends = tuple(a + self._sizes[a] for a in starts)
        self._index = (starts, ends, np.array(starts, dtype=np.uint64), np.array(ends, dtype=np.uint64))

    def used(self) -> int:
        with self._lock:
            sizes = list(self._sizes.values())
        return sum(max(ALIGNMENT, -(-n // ALIGNMENT) * ALIGNMENT) for n in sizes)

    def is_allocation(self, addr: int) -> bool:
        return addr in self._sizes

    def find(self, addr: int) -> tuple[int, int] | None:
        """The (start, size) of the live allocation containing `addr`, or None."""
        starts, ends, _, _ = self._index
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < ends[i]:
            return starts[i], ends[i] - starts[i]
        return None

    # -- access -----------------------------------------------------------------------
    def check_range(self, addr: int, nbytes: int) -> int:
        """Offset into the arena of [addr, addr+nbytes), which must lie in one allocation.

        Used by copies and memsets; raises AccessFault (index 0) otherwise.
        """
        hit = self.find(addr)
        if hit is None or addr + nbytes > hit[0] + hit[1]:
            raise AccessFault("CUDA_ERROR_INVALID_VALUE", 0, addr, nbytes)
        return addr - BASE

    def host_address(self, addr: int) -> int:
        """The host address of device address `addr` (for memmove in copies)."""
        return self.host_base + (addr - BASE)

    def view(self, dtype) -> np.ndarray:
        """The whole arena as an array of `dtype` (index = offset // itemsize)."""
        dtype = np.dtype(dtype)
        v = self._views.get(dtype)
        if v is None:
            v = self._views[dtype] = self.u8.view(dtype)
        return v

    def offsets(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """Arena offsets (int64) of `addrs` (uint64) for an access of `nbytes` bytes each.

        Raises AccessFault naming the first offending element when any address is
        misaligned (addr % nbytes != 0) or any access leaves its allocation.
        """
        addrs = np.asarray(addrs, dtype=np.uint64)
        if addrs.size == 0:
            return addrs.astype(np.int64)
        if nbytes > 1:
            bad = (addrs & np.uint64(nbytes - 1)) != 0
            if bad.any():
                i = int(np.argmax(bad))
                raise AccessFault("CUDA_ERROR_MISALIGNED_ADDRESS", i, int(addrs.flat[i]), nbytes)
        lo, hi = int(addrs.min()), int(addrs.max())
        s_list, e_list, starts, ends = self._index      # one consistent snapshot
        i = bisect.bisect_right(s_list, lo) - 1
        # Fast path: the whole span lies inside one allocation.
        if i < 0 or hi + nbytes > e_list[i]:
            j = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
            inside = j >= 0
            jj = np.where(inside, j, 0)
            if len(ends):
                inside &= addrs + np.uint64(nbytes) <= ends[jj]
            else:
                inside[:] = False
            if not inside.all():
                inside |= self._in_peers(addrs, nbytes)
            if not inside.all():
                i = int(np.argmin(inside))
                raise AccessFault("CUDA_ERROR_ILLEGAL_ADDRESS", i, int(addrs.flat[i]), nbytes)
        return (addrs - np.uint64(BASE)).astype(np.int64)

    def within(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """Bool mask over `addrs` (uint64): the `nbytes` bytes at each lie inside one live
        allocation of this memory."""
        _, _, starts, ends = self._index
        if not len(ends):
            return np.zeros(addrs.shape, bool)
        j = np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1
        return (j >= 0) & (addrs + np.uint64(nbytes) <= ends[np.maximum(j, 0)])

    def _in_peers(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        # Peer access (cuCtxEnablePeerAccess) maps the peer's allocations into this
        # device's address space; in one shared arena their offsets index the same bytes.
        inside = np.zeros(addrs.shape, bool)
        for peer in self.peer_memories():
            if peer.host_base == self.host_base:         # one mapping: offsets agree
                inside |= peer.within(addrs, nbytes)
        return inside


def unified_arena(devices: int, size: int) -> mmap.mmap | None:
    """The one mapping the memories of `devices` devices of `size` bytes each share (None
    for one device, which maps its own): device k's bytes are at offsets [k*size, (k+1)*size),
    as its addresses are [BASE + k*size, ...). Made once per process (and per shape)."""
    if devices <= 1:
        return None
    return _arena(devices * size)


@functools.cache
def _arena(nbytes: int) -> mmap.mmap:
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)


__all__ = ["BASE", "ALIGNMENT", "DeviceMemory", "unified_arena", "AccessFault", "OutOfMemory", "KernelFault"]

"""Device memory of the emulated GPU: one arena, an allocation table, bounds checks.

Device addresses start at BASE (2^36, above 2^32) so that a pointer truncated to 32 bits
can never land inside an allocation: it faults, as it would on a GPU. The arena is one
mmap, so untouched pages cost nothing and the bytes have a stable host address that
host<->device copies reach with a plain memmove. The driver's arena (hostwindow.Arena) is
also mapped at BASE for the host, where only managed and page-locked pages are readable
(unified addressing); a standalone DeviceMemory maps no such window.

Every access the engine makes goes through `offsets()`, which checks each thread's
address against the allocation table: an access is legal only if all of its bytes lie
inside one live allocation (or in host memory every device may reach, HOST_RANGES), and
it is aligned to its own size. The indices it returns are into one view of the whole host
address space (`u8`, `view()`), so device memory and registered host memory are reached
alike.
"""
import bisect
import ctypes
import functools
import mmap
import sys
import threading

import numpy as np

from .faults import KernelFault
from .hostwindow import ADDRESS_SPACE, HOST_RANGES, ORIGIN, PAGE, Arena

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

    def __init__(self, size: int, first_offset: int = 0, arena: Arena | mmap.mmap | None = None):
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
        self.first_offset = first_offset
        self._window = arena if isinstance(arena, Arena) else None
        self._map = arena.map if isinstance(arena, Arena) else arena
        # The memories of the devices this one's kernels may also reach (those its context
        # enabled peer access to, cuCtxEnablePeerAccess): asked only when an access misses
        # this device's own allocations. The driver sets it; a callable, as a peer that is
        # reset since is a fresh context whose access was never enabled.
        self.peer_memories = tuple
        self.u8 = ADDRESS_SPACE
        self.host_base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        # device address + shift = its index in u8 (through the emulator's view)
        self.shift = self.host_base - BASE - ORIGIN
        self._shift_u64 = np.uint64(self.shift % 2**64)
        self._lock = threading.Lock()
        self._free = [(first_offset, size)]  # (offset, length), sorted by offset
        self._starts: list[int] = []        # device addresses of live allocations, sorted
        self._sizes: dict[int, int] = {}    # start address -> requested size
        self._held: dict[int, tuple[int, int]] = {}    # start -> (arena offset, length) reserved
        self._visible: set[int] = set()     # starts whose window pages the host may touch
        self._uncounted: set[int] = set()   # page-locked host memory: not device memory used
        # (starts, ends, np starts, np ends) of the live allocations, published as one
        # tuple so that readers on other threads never see halves of two different tables
        self._index = ((), (), np.zeros(0, np.uint64), np.zeros(0, np.uint64))
        self._views: dict[np.dtype, np.ndarray] = {}

    # -- allocation -------------------------------------------------------------------
    def alloc(self, nbytes: int, visible: bool = False, counted: bool = True) -> int:
        """Reserve `nbytes` (rounded up to ALIGNMENT) and return the device address.

        `visible`: the host reaches it at that address too (managed, page-locked memory):
        whole pages, so that no device allocation shares a page the host may read.
        `counted`: it is device memory in used() (page-locked host memory is not).
        """
        align = PAGE if visible else ALIGNMENT
        need = max(align, -(-nbytes // align) * align)
        with self._lock:
            for i, (off, length) in enumerate(self._free):
                start = -(-off // align) * align
                if start + need <= off + length:
                    pieces = [(off, start - off), (start + need, off + length - start - need)]
                    self._free[i:i + 1] = [p for p in pieces if p[1]]
                    addr = BASE + start
                    bisect.insort(self._starts, addr)
                    self._sizes[addr] = nbytes
                    self._held[addr] = (start, need)
                    if not counted:
                        self._uncounted.add(addr)
                    if visible:
                        self._visible.add(addr)
                        self._expose(start, need, True)
                    self._reindex()
                    return addr
        raise OutOfMemory(nbytes)

    def _expose(self, off: int, length: int, visible: bool) -> None:
        if self._window is not None:
            self._window.expose(off, length, visible)

    def free(self, addr: int) -> None:
        """Release the allocation that starts at `addr`; KeyError if there is none."""
        with self._lock:
            del self._sizes[addr]
            self._starts.remove(addr)
            self._reindex()
            off, need = self._held.pop(addr)
            self._uncounted.discard(addr)
            if addr in self._visible:
                self._visible.discard(addr)
                self._expose(off, need, False)
            bisect.insort(self._free, (off, need))
            self._coalesce()

    def release(self) -> None:
        """Forget every allocation, close their host pages and give the bytes back (the
        context that owned this memory is gone: a fresh one finds zeros and faults on the
        old pointers)."""
        with self._lock:
            for addr in self._visible:
                self._expose(*self._held[addr], False)
            self._visible.clear()
            self._starts.clear()
            self._sizes.clear()
            self._held.clear()
            self._uncounted.clear()
            self._free = [(self.first_offset, self.size)]
            self._reindex()
            if self._window is not None:
                self._window.discard(self.first_offset, self.size)

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
            return sum(n for a, (_, n) in self._held.items() if a not in self._uncounted)

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
        return addr + self.shift

    def host_address(self, addr: int) -> int:
        """The host address of device address `addr` (for memmove in copies)."""
        return self.host_base + (addr - BASE)

    def view(self, dtype) -> np.ndarray:
        """The address space as an array of `dtype` (index = offset // itemsize)."""
        dtype = np.dtype(dtype)
        v = self._views.get(dtype)
        if v is None:
            v = self._views[dtype] = _views(dtype)
        return v

    def offsets(self, addrs: np.ndarray, nbytes: int) -> np.ndarray:
        """Indices into `u8` (int64) of `addrs` (uint64) for an access of `nbytes` bytes each.

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
                host, shifts = HOST_RANGES.shifts(addrs, nbytes)
                host &= ~inside
                if not (inside | host).all():
                    i = int(np.argmin(inside | host))
                    raise AccessFault("CUDA_ERROR_ILLEGAL_ADDRESS", i, int(addrs.flat[i]), nbytes)
                return np.where(host, addrs.astype(np.int64) + shifts, (addrs + self._shift_u64).astype(np.int64))
        return (addrs + self._shift_u64).astype(np.int64)

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


@functools.cache
def _views(dtype: np.dtype) -> np.ndarray:
    return ADDRESS_SPACE.view(dtype)


_arenas: dict[int, Arena] = {}
_arenas_lock = threading.Lock()


def unified_arena(devices: int, size: int) -> Arena:
    """The one arena the memories of `devices` devices of `size` bytes each share: device
    k's bytes are at offsets [k*size, (k+1)*size), as its addresses are [BASE + k*size, ...).
    Made once per process and shape; the newest holds the host window at BASE (one window
    fits there: a new shape, rare, takes it from the old one)."""
    nbytes = devices * size
    with _arenas_lock:
        arena = _arenas.get(nbytes)
        if arena is None or arena.base is None:
            for old in _arenas.values():
                old.close()
            arena = _arenas[nbytes] = Arena(nbytes, BASE) if arena is None else _reopen(arena)
        return arena


def _reopen(arena: Arena) -> Arena:
    # an arena whose window went to another shape: a fresh one (its old bytes belong to
    # contexts of that time, which the window no longer shows; their views stay mapped)
    return Arena(arena.nbytes, BASE)


__all__ = ["BASE", "ALIGNMENT", "DeviceMemory", "unified_arena", "AccessFault", "OutOfMemory", "KernelFault"]

"""Unified addressing on the emulated GPU: the arena as host memory at its device addresses.

The driver's arena is a memfd mapped twice: the emulator's own read-write view (anywhere:
what the engine indexes), and a window at BASE, the device addresses, PROT_NONE to begin
with. Managed and page-locked allocations open their pages of the window read-write, so
the host reaches them at the very address kernels use; every other page stays PROT_NONE,
so a host read of cuMemAlloc memory faults as it does on a GPU. Python's mmap cannot map at
a fixed address, hence libc through ctypes.

HOST_RANGES lists host memory kernels may reach outside their own device's allocations
(page-locked and registered ranges, which unified addressing makes reachable from every
device at the host address), each with what to add to an address to index the engine's
address-space view.
"""
import bisect
import ctypes
import ctypes.util
import errno
import mmap
import os
import threading

import numpy as np

PAGE = mmap.PAGESIZE
_PROT_NONE, _PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
_MAP_SHARED, _MAP_FIXED_NOREPLACE, _MAP_NORESERVE = 0x01, 0x100000, 0x4000
_FALLOC_PUNCH_HOLE = 0x01 | 0x02                # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long)


def _failed(call: str, detail: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call} {detail}: {os.strerror(err)} ({errno.errorcode.get(err, err)})")


def page_span(start: int, length: int) -> tuple[int, int]:
    """[start, +length) widened to whole pages."""
    lo = start - start % PAGE
    hi = -(-(start + length) // PAGE) * PAGE
    return lo, hi - lo


class Arena:
    """The memfd behind the driver's device memories, its emulator view and (for the one
    arena that holds it) the host window at `base`."""

    def __init__(self, nbytes: int, base: int | None):
        fd = os.memfd_create("lowlevel-emu-arena", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            self.map = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=_PROT_RW)
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.nbytes, self.base = fd, nbytes, None
        if base is not None:
            got = _libc.mmap(base, nbytes, _PROT_NONE, _MAP_SHARED | _MAP_FIXED_NOREPLACE | _MAP_NORESERVE, fd, 0)
            if got in (None, _MAP_FAILED) or got != base:
                if got not in (None, _MAP_FAILED):      # an old kernel took the address as a hint
                    _libc.munmap(got, nbytes)
                raise _failed("mmap", f"of the host window at {base:#x} (+{nbytes:#x})")
            self.base = base

    def __len__(self) -> int:
        return self.nbytes

    def expose(self, offset: int, length: int, visible: bool) -> None:
        """Open (or close) the window's pages over [offset, +length) to the host."""
        if self.base is None:
            return
        lo, n = page_span(offset, length)
        if _libc.mprotect(self.base + lo, n, _PROT_RW if visible else _PROT_NONE) != 0:
            raise _failed("mprotect", f"of the host window at {self.base + lo:#x} (+{n:#x})")

    def discard(self, offset: int, length: int) -> None:
        """Give [offset, +length) back to the system: it reads as zeros again."""
        lo, n = page_span(offset, length)
        if _libc.fallocate(self.fd, _FALLOC_PUNCH_HOLE, lo, n) != 0:
            raise _failed("fallocate", f"(punch hole) of arena bytes {lo:#x} (+{n:#x})")

    def close(self) -> None:
        if self.base is not None:
            _libc.munmap(self.base, self.nbytes)
            self.base = None


ORIGIN = 1 << 16           # the host address of ADDRESS_SPACE[0] (numpy takes data 0 for none)


class _AddressSpace:
    # The whole user address space as one byte array: the engine indexes it with host
    # addresses less ORIGIN, so the arena (through its emulator view) and registered host
    # ranges are reached by one fancy index. Only bounds-checked addresses ever index it.
    __array_interface__ = {"data": (ORIGIN, False), "shape": (2**47 - ORIGIN,), "typestr": "|u1", "version": 3}


ADDRESS_SPACE = np.asarray(_AddressSpace())


class HostRanges:
    """Host memory every device's kernels may reach: (start, end, shift) where addr+shift
    indexes ADDRESS_SPACE (a registered range: -ORIGIN); published as one tuple for lock-free readers."""

    def __init__(self):
        self._lock = threading.Lock()
        self._ranges: dict[int, tuple[int, int]] = {}       # start -> (end, shift)
        self.index = ((), np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64))

    def add(self, start: int, nbytes: int, shift: int = -ORIGIN) -> None:
        with self._lock:
            self._ranges[start] = (start + nbytes, shift)
            self._publish()

    def remove(self, start: int) -> None:
        with self._lock:
            if self._ranges.pop(start, None) is not None:
                self._publish()

    def _publish(self) -> None:
        starts = sorted(self._ranges)
        self.index = (tuple(starts), np.array(starts, np.uint64),
                      np.array([self._ranges[s][0] for s in starts], np.uint64),
                      np.array([self._ranges[s][1] for s in starts], np.int64))

    def find(self, addr: int) -> tuple[int, int] | None:
        """(start, size) of the range holding `addr`, or None."""
        starts, _, ends, _ = self.index
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < int(ends[i]):
            return starts[i], int(ends[i]) - starts[i]
        return None

    def shifts(self, addrs: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """(inside mask, shift per address) for accesses of `nbytes` at `addrs` (uint64)."""
        _, starts, ends, shifts = self.index
        if not len(starts):
            return np.zeros(addrs.shape, bool), np.zeros(addrs.shape, np.int64)
        j = np.maximum(np.searchsorted(starts, addrs, side="right").astype(np.int64) - 1, 0)
        inside = (addrs >= starts[j]) & (addrs + np.uint64(nbytes) <= ends[j])
        return inside, shifts[j]


HOST_RANGES = HostRanges()

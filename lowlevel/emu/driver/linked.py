"""Cubins linked in this process by the interposed nvJitLink (emu/libcuda/nvjitlink.py), and
the PTX each was linked from.

A client of the emulated libcuda.so.1 that links with nvJitLink (numba-cuda, cuda.core's
Linker) gets a real cubin, SASS for one architecture, which the emulated GPU cannot run.
The interposed nvJitLink remembers, for each cubin it hands out, the whole-program PTX of
the same link; a module loaded from that very cubin, on a device of its architecture, runs
that PTX. Any other cubin is refused as before.
"""
import ctypes
import hashlib
import struct
import threading

_lock = threading.Lock()
_linked: dict[str, tuple[int, str]] = {}       # sha256 of the cubin -> (arch, PTX text)


def remember(cubin: bytes, arch: int, ptx: str) -> None:
    with _lock:
        _linked[hashlib.sha256(cubin).hexdigest()] = (arch, ptx)


def ptx_of(cubin: bytes) -> tuple[int, str] | None:
    """(the architecture it was linked for, its PTX) of a cubin linked in this process, or None."""
    with _lock:
        return _linked.get(hashlib.sha256(cubin).hexdigest())


def elf_at(address: int) -> bytes:
    """The whole ELF image (a cubin) at a host address: its size is where its section and
    program header tables end (64-bit ELF)."""
    header = ctypes.string_at(address, 64)
    phoff, shoff = struct.unpack_from("<QQ", header, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 0x36)
    return ctypes.string_at(address, max(64, phoff + phentsize * phnum, shoff + shentsize * shnum))

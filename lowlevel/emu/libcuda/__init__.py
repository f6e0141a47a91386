"""The emulated GPU as a drop-in libcuda.so.1, for CUDA clients that lowlevel did not write.

    source.py   the C source, generated from capi/prototypes.py and capi/proc_addresses.py
    build.py    compiled lazily with the system's C compiler into the compile cache
    attach.py   the table the library jumps through, filled with the emulated driver's functions
    nvjitlink.py  nvJitLink interposed, so a cubin linked in the process runs the PTX it came from

    LD_LIBRARY_PATH=$(lowlevel emu-libcuda) python YOUR_APP.py    # any in-process client, unchanged
    lowlevel.emu.libcuda.install()                           # the same from Python, before the client loads

The library starts the emulator itself on its first call (it finds Python's C API in the
process), so a client that loads libcuda.so.1 by name runs on the emulated GPU: numba-cuda,
cuda.core and cuda.bindings, and lowlevel's own real-driver binding
(LOWLEVEL_DRIVER=cuda LOWLEVEL_LIBCUDA=$(lowlevel emu-libcuda)/libcuda.so.1). Its limits: PTX
only (as the emulated GPU), Python processes only, and one emulator for every client in the
process. Nothing here is built or loaded until it is asked for.
"""
import ctypes
import pathlib

from .attach import attach
from .build import LIBRARY, BuildError, directory

_loaded: list = []


def install() -> pathlib.Path:
    """Build the library if needed and load it process-wide (RTLD_GLOBAL), so that every
    later dlopen("libcuda.so.1") in this process gets it; returns its path. Call it before a
    client loads the real driver (once a libcuda.so.1 is loaded, that one stays)."""
    path = directory() / LIBRARY
    if not _loaded:
        _loaded.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))
    return path


__all__ = ["BuildError", "LIBRARY", "attach", "directory", "install"]

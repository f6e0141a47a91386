"""Filling the library's table with the emulated driver's functions: what the library calls
(through Python's C API) on its first call, and what install() calls after loading it.

Each table entry is the emulated function of that name wrapped as a ctypes callback of its
C prototype (capi/prototypes.py), the same wrapping lowlevel's own binding makes, so a call
through the library reaches exactly what `lowlevel.emu.functions()` holds: one emulator for
every client in the process. With LOWLEVEL_LOG_API=1 each call is logged on stderr with
its arguments, its result and, when it failed, what the emulator knows of why.
"""
import ctypes
import os
import sys
import threading

from ...capi.constants import CURESULT
from ...capi.prototypes import prototype
from .. import driver
from . import nvjitlink
from .source import implemented, layout

_NAMES = {code: name for name, code in CURESULT.items()}
_lock = threading.Lock()
_callbacks: list = []          # kept alive for as long as the process runs: the library calls them


def _logged(name: str, fn):
    def call(*args):
        result = fn(*args)
        status = _NAMES.get(result, str(result))
        shown = ", ".join("NULL" if a is None else hex(a) if isinstance(a, int) and a > 4096 else repr(a)
                          for a in args)
        line = f"[libcuda emu] {name}({shown}) -> {status}"
        if result:
            details = driver.error_details(result)
            if details:
                line += f"  ({details})"
        print(line, file=sys.stderr, flush=True)
        return result
    return call


def attach(fill_address: int, library_layout: str) -> int:
    """Fill the library's table through its lowlevel_emu_fill at `fill_address`; refuses a
    library whose table is laid out for another version of lowlevel."""
    if library_layout != layout():
        raise RuntimeError("this libcuda.so.1 was built by another version of lowlevel: rebuild it with "
                           "`lowlevel emu-libcuda` and point LD_LIBRARY_PATH at the folder it prints")
    fill = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)(fill_address)
    functions = driver.functions()
    log = os.environ.get("LOWLEVEL_LOG_API", "0") not in ("", "0")
    with _lock:
        for index, (name, _symbol, _args) in enumerate(implemented()):
            fn = functions.get(name)
            if fn is None:
                continue                  # the library answers CUDA_ERROR_NOT_SUPPORTED, naming it
            callback = prototype(name)(_logged(name, fn) if log else fn)
            _callbacks.append(callback)
            fill(index, ctypes.cast(callback, ctypes.c_void_p).value)
    interposed = nvjitlink.install()        # before the client links: see nvjitlink.py
    if log:
        print(f"[libcuda emu] nvJitLink {interposed}", file=sys.stderr, flush=True)
    return 0

"""Layer 2, the ctypes boundary: the table of C prototypes (lowlevel/capi/prototypes.py)
bound to an implementation.

The table is bound in one of two ways, and the code above cannot tell which:
  - to the real driver: `ctypes.CDLL("libcuda.so.1")[symbol]` with these argtypes;
  - to the emulated GPU: its Python functions wrapped as `ctypes.CFUNCTYPE(c_int, *argtypes)`
    callbacks, so pointers, byref out-parameters and void** argument arrays cross the same
    C boundary either way.
"""
import ctypes

from ..capi.prototypes import OLDER_SYMBOLS, PROTOTYPES, CUresult, prototype


def bind_library(lib: ctypes.CDLL) -> dict:
    """Public name -> foreign function of a real libcuda, typed from the table.

    A symbol the library lacks (an old driver) is left out; calling it raises a clear error
    from the Driver object rather than an AttributeError at load.
    """
    bound = {}
    for name, (symbol, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, symbol, None)
        if fn is None and name in OLDER_SYMBOLS:
            fn = getattr(lib, OLDER_SYMBOLS[name], None)
        if fn is None:
            continue
        fn.restype = CUresult
        fn.argtypes = list(argtypes)
        bound[name] = fn
    return bound


def bind_python(functions: dict) -> dict:
    """Public name -> C callback wrapping the emulator's Python function of that name.

    The callbacks are C function pointers: the caller's arguments are converted by ctypes
    exactly as for the real library, and the emulator receives plain ints for pointers.
    """
    bound = {}
    for name in PROTOTYPES:
        if name in functions:
            bound[name] = python_caller(prototype(name)(functions[name]), CUresult, PROTOTYPES[name][1])
    return bound


def python_caller(callback, restype, argtypes):
    """The C function pointer `callback` (Python's, made by a CFUNCTYPE), called from Python
    through a foreign function that keeps Python's lock (ctypes.PYFUNCTYPE), with the same
    argument conversion. A call through the callback's own type drops the lock on the way
    into C only for the callback to take it back at once: while the emulator's worker
    threads run kernels, that hands the lock to them and waits to get it back, at every
    call (thread switches that `lowlevel trace` counted as lowlevel's own host time). The
    caller keeps the callback alive, and says it keeps the lock (`keeps_lock`)."""
    caller = ctypes.PYFUNCTYPE(restype, *argtypes)(ctypes.cast(callback, ctypes.c_void_p).value)
    caller.callback, caller.keeps_lock = callback, True
    return caller


def raw_function(cfunc):
    """The C function at `cfunc`'s address, untyped (for a caller that passes C values and
    ints, without ctypes' per-call conversion), of the same kind: keeping Python's lock where
    `cfunc` does (python_caller), else releasing it for the call, as a real library's is."""
    kind = ctypes.PYFUNCTYPE if getattr(cfunc, "keeps_lock", False) else ctypes.CFUNCTYPE
    return kind(ctypes.c_int)(ctypes.cast(cfunc, ctypes.c_void_p).value)

"""The C source of the drop-in libcuda.so.1, generated from lowlevel/capi's tables.

What the library does, all of it in the generated C (read `source()`'s output to see it):
  - it exports each driver function of capi/prototypes.py under the symbol cuda.h maps it to
    (cuMemAlloc_v2, ...); each jumps through `table[i]`, which Python fills with the emulated
    driver's functions (ctypes callbacks) when the library starts;
  - it starts the emulator itself on the first call of any function: it finds Python's C
    API in the process (dlsym), imports lowlevel.emu.libcuda and calls its `attach`, which
    fills the table. A process that is not Python gets CUDA_ERROR_NO_DEVICE and one line
    on stderr, never a crash;
  - around each call into Python it takes Python's lock and saves the caller's pending
    exception, so that a call made while an exception is being handled does not lose it;
  - once the interpreter is finalizing it calls no Python: functions that release something
    (and the context switches around them) return CUDA_SUCCESS, every other one
    CUDA_ERROR_DEINITIALIZED; in a child forked after
    the library started, every call returns CUDA_ERROR_NOT_INITIALIZED, as the real driver's do;
  - every other symbol of cudaTypedefs.h is exported too, as a stub that returns
    CUDA_ERROR_NOT_SUPPORTED and says once on stderr which function was missing;
  - cuGetProcAddress(_v2) answers from capi/proc_addresses.py; cuGetExportTable refuses: silently
    for NVRTC and nvJitLink, which go on without it; for any other caller (libcudart, under
    CuPy or PyTorch) with one line on stderr, once per process, saying why.
"""
import ctypes
import hashlib

from ...capi.proc_addresses import PER_THREAD_NAMES, PROC_ADDRESSES
from ...capi.prototypes import PROTOTYPES

# Functions that let go of something, and the context switches a client makes around them:
# once the interpreter is finalizing they succeed, doing nothing (a GPU's driver is still
# alive then, and a client's finalizers free what they held).
RELEASES = ("Free", "Destroy", "Release", "Unload", "Unregister", "Reset", "PopCurrent", "PushCurrent",
            "SetCurrent")

_C_TYPES = {
    ctypes.c_int: "int", ctypes.c_uint: "unsigned int", ctypes.c_ulong: "unsigned long",
    ctypes.c_ulonglong: "unsigned long long", ctypes.c_void_p: "void *", ctypes.c_char_p: "const char *",
    ctypes.c_ubyte: "unsigned char", ctypes.c_ushort: "unsigned short", ctypes.c_size_t: "size_t",
}


def implemented() -> list[tuple[str, str, tuple]]:
    """(public name, exported symbol, argument types) of each table entry, in table order."""
    return [(name, symbol, argtypes) for name, (symbol, argtypes) in PROTOTYPES.items()]


def _c_type(t, structs: dict) -> str:
    if t in _C_TYPES:
        return _C_TYPES[t]
    if isinstance(t, type) and issubclass(t, ctypes.Structure):     # passed by value: same layout
        if t.__name__ not in structs:
            fields = "; ".join(f"{_c_type(ft, structs)} {fn}" for fn, ft in t._fields_)
            structs[t.__name__] = f"struct {t.__name__} {{ {fields}; }};"
        return f"struct {t.__name__}"
    raise TypeError(f"no C type for {t!r} in capi/prototypes.py")


def _forwarder(index: int, name: str, symbol: str, argtypes: tuple, structs: dict) -> str:
    ctypes_ = [_c_type(t, structs) for t in argtypes]
    params = ", ".join(f"{c} a{i}" for i, c in enumerate(ctypes_)) or "void"
    args = ", ".join(f"a{i}" for i in range(len(ctypes_)))
    pointer = f"CUresult (*)({', '.join(ctypes_) or 'void'})"
    release = int(any(word in name for word in RELEASES))
    # a client's finalizers ask which context is current before they switch and free: none
    at_exit = ("    if (finalizing()) { if (a0) *(void **)a0 = NULL; return 0; }\n"
               if name == "cuCtxGetCurrent" else "")
    return (f"EXPORT CUresult {symbol}({params}) {{\n"
            f"    CUresult r; struct saved s;\n{at_exit}"
            f"    if (!enter({index}, {release}, &r)) return r;\n"
            f"    python_enter(&s);\n"
            f"    r = (({pointer})table[{index}])({args});\n"
            f"    python_leave(&s);\n"
            f"    return r;\n}}\n")


def _stub(symbol: str) -> str:
    return (f'EXPORT CUresult {symbol}(void) {{ static int said; return missing("{symbol}", &said); }}\n')


def source() -> str:
    """The whole C file."""
    structs: dict = {}
    entries = implemented()
    exported = {symbol for _, symbol, _ in entries} | {"cuGetProcAddress", "cuGetProcAddress_v2", "cuGetExportTable"}
    forwarders = [_forwarder(i, name, symbol, argtypes, structs) for i, (name, symbol, argtypes) in enumerate(entries)]
    stubs = sorted({s for versions in PROC_ADDRESSES.values() for _, s in versions} - exported)
    proc_rows = [f'    {{"{name}", {version}, (void *){symbol}, {int(name in PER_THREAD_NAMES)}}},'
                 for name, versions in PROC_ADDRESSES.items() for version, symbol in versions]
    names = [f'    "{symbol}",' for _, symbol, _ in entries]
    return "\n".join([
        _PRELUDE.replace("@COUNT@", str(len(entries))).replace("@LAYOUT@", layout()).replace("@PYTHON_LOCK@",
                                                                                             PYTHON_LOCK),
        *structs.values(),
        "static const char *table_symbols[] = {", *names, "};",
        *forwarders,
        *[_stub(s) for s in stubs],
        "static const struct proc proc_table[] = {", *proc_rows, '    {0, 0, 0, 0}', "};",
        _PROC_ADDRESS,
    ]) + "\n"


def layout() -> str:
    """What a built library's table holds, in order: attach refuses a library whose layout is
    not this one (a libcuda.so.1 built by another version of lowlevel)."""
    return source_hash("\n".join(f"{name} {symbol} {len(args)}" for name, symbol, args in implemented()))


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Python's lock, and the caller's pending exception kept aside for the call (both libraries';
# the four functions are found with dlsym when the library starts).
PYTHON_LOCK = r'''static int (*py_gil_ensure)(void);
static void (*py_gil_release)(int);
static void (*py_err_fetch)(void **, void **, void **);
static void (*py_err_restore)(void *, void *, void *);
struct saved { int gil; void *type, *value, *traceback; };
static void python_enter(struct saved *s) {
    s->gil = py_gil_ensure();
    py_err_fetch(&s->type, &s->value, &s->traceback);
}
static void python_leave(struct saved *s) {
    py_err_restore(s->type, s->value, s->traceback);
    py_gil_release(s->gil);
}'''

_PRELUDE = r'''/* lowlevel's emulated libcuda.so.1, generated by lowlevel/emu/libcuda/source.py. Do not edit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
typedef int CUresult;
enum { TABLE_SIZE = @COUNT@ };

struct proc { const char *name; int version; void *function; int per_thread; };
static const char *table_symbols_at(int index);
EXPORT CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
EXPORT CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);
EXPORT CUresult cuGetExportTable(const void **, const void *);

/* Filled by lowlevel.emu.libcuda.attach through lowlevel_emu_fill. */
static void *table[TABLE_SIZE];
static pthread_once_t started = PTHREAD_ONCE_INIT;
static CUresult start_failure = 0;      /* why the emulator could not start, 0 if it did */
static volatile int forked = 0;
static volatile int running = 0;        /* the emulator was started in this process */

/* Python's C API (find_python) */
static int (*py_is_initialized)(void);
static int (*py_is_finalizing)(void);
@PYTHON_LOCK@
static void *(*py_import)(const char *);
static void *(*py_call_method)(void *, const char *, const char *, ...);
static void (*py_decref)(void *);
static void (*py_err_print)(void);

static int log_api(void) { const char *v = getenv("LOWLEVEL_LOG_API"); return v && *v && strcmp(v, "0"); }

EXPORT void lowlevel_emu_fill(int index, void *function) {
    if (index >= 0 && index < TABLE_SIZE) table[index] = function;
}
EXPORT int lowlevel_emu_table_size(void) { return TABLE_SIZE; }
EXPORT const char *lowlevel_emu_symbol(int index) {
    return index >= 0 && index < TABLE_SIZE ? table_symbols_at(index) : NULL;
}

static void child_after_fork(void) { if (running) forked = 1; }

/* Python's C API, found in the process (no Python.h is needed to build this): 1 if this is
   a running Python interpreter. */
static int find_python(void) {
    py_is_initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    py_is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (!py_is_finalizing) py_is_finalizing = (int (*)(void))dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    py_gil_ensure = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    py_gil_release = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    py_err_fetch = (void (*)(void **, void **, void **))dlsym(RTLD_DEFAULT, "PyErr_Fetch");
    py_err_restore = (void (*)(void *, void *, void *))dlsym(RTLD_DEFAULT, "PyErr_Restore");
    py_import = (void *(*)(const char *))dlsym(RTLD_DEFAULT, "PyImport_ImportModule");
    py_call_method = (void *(*)(void *, const char *, const char *, ...))dlsym(RTLD_DEFAULT, "PyObject_CallMethod");
    py_decref = (void (*)(void *))dlsym(RTLD_DEFAULT, "Py_DecRef");
    py_err_print = (void (*)(void))dlsym(RTLD_DEFAULT, "PyErr_Print");
    return py_is_initialized && py_is_finalizing && py_gil_ensure && py_gil_release && py_err_fetch &&
           py_err_restore && py_import && py_call_method && py_decref && py_err_print && py_is_initialized();
}

/* module.method(): attach(the table's fill function, its layout) when `fill`, else no
   arguments; holding Python's lock, the caller's pending exception kept aside. 1 if it
   returned; a failure is printed after `failure` when that is not NULL, and dropped either way. */
static int call_python(const char *module_name, const char *method, int fill, const char *failure) {
    struct saved s;
    void *module, *result = NULL;
    python_enter(&s);
    module = py_import(module_name);
    if (module)
        result = fill ? py_call_method(module, method, "Ks", (unsigned long long)(uintptr_t)&lowlevel_emu_fill,
                                       "@LAYOUT@")
                      : py_call_method(module, method, NULL);
    if (!result && failure) {
        fputs(failure, stderr);
        py_err_print();
    }
    if (result) py_decref(result);
    if (module) py_decref(module);
    python_leave(&s);
    return result != NULL;
}

static void start(void) {
    if (!find_python()) {
        fprintf(stderr, "lowlevel's emulated libcuda.so.1: this process is not a running Python interpreter; "
                        "the emulated GPU runs only inside Python (an embedded interpreter is not supported)\n");
        start_failure = 100;          /* CUDA_ERROR_NO_DEVICE */
        return;
    }
    pthread_atfork(NULL, NULL, child_after_fork);
    if (call_python("lowlevel.emu.libcuda", "attach", 1,
                    "lowlevel's emulated libcuda.so.1: starting the emulated GPU failed:\n"))
        running = 1;
    else
        start_failure = 100;
}

/* At load, in a Python process: interpose nvJitLink before the client loads the real one
   (emu/libcuda/nvjitlink.py), which clients do before their first driver call. A failure
   leaves nvJitLink as it was. */
__attribute__((constructor)) static void at_load(void) {
    if (find_python())
        call_python("lowlevel.emu.libcuda.nvjitlink", "install", 0, NULL);
}

static CUresult missing(const char *symbol, int *said) {
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "lowlevel's emulated libcuda.so.1: %s is not implemented by the emulated GPU "
                        "(CUDA_ERROR_NOT_SUPPORTED)\n", symbol);
    return 801;
}
static int said_missing[TABLE_SIZE];

static int finalizing(void) {
    return running && (py_is_finalizing() || !py_is_initialized());
}

/* 1 if the call may go on into Python; else 0 with *r the status to return. */
static int enter(int index, int releases, CUresult *r) {
    if (forked) { *r = 3; return 0; }                       /* CUDA_ERROR_NOT_INITIALIZED */
    pthread_once(&started, start);
    if (start_failure) { *r = start_failure; return 0; }
    if (finalizing()) { *r = releases ? 0 : 4; return 0; }      /* CUDA_ERROR_DEINITIALIZED */
    if (!table[index]) { *r = missing(table_symbols_at(index), &said_missing[index]); return 0; }
    return 1;
}
'''

_PROC_ADDRESS = r'''
static const char *table_symbols_at(int index) { return table_symbols[index]; }

/* CUdriverProcAddressQueryResult: 0 found, 1 symbol not found, 2 version not sufficient */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                                    int *status) {
    const struct proc *p, *best = NULL;
    int known = 0;
    if (!symbol || !pfn) return 1;                          /* CUDA_ERROR_INVALID_VALUE */
    *pfn = NULL;
    if (forked) return 3;
    for (p = proc_table; p->name; p++) {
        if (strcmp(p->name, symbol)) continue;
        known = 1;
        if (p->version <= version && (!best || p->version > best->version)) best = p;
    }
    if (!best) {
        if (status) *status = known ? 2 : 1;
        return 500;                                         /* CUDA_ERROR_NOT_FOUND */
    }
    if ((flags & 2) && best->per_thread) {                  /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
        fprintf(stderr, "lowlevel's emulated libcuda.so.1: %s for the per-thread default stream "
                        "is not implemented (CUDA_ERROR_NOT_SUPPORTED)\n", symbol);
        if (status) *status = 1;
        return 801;
    }
    if (log_api()) fprintf(stderr, "[libcuda emu] cuGetProcAddress(%s, %d) -> version %d\n", symbol, version,
                           best->version);
    *pfn = best->function;
    if (status) *status = 0;
    return 0;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* The private interfaces of the CUDA runtime and of the compilers: not emulated. Refused,
   never a crash. NVRTC and nvJitLink ask for them in normal use and go on without them, so
   they are refused silently; any other caller (libcudart, under CuPy or PyTorch) cannot run
   without them, so it is told why, once per process, naming the library that asked. */
static int compiler_library(const char *path) {
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    return !strncmp(name, "libnvrtc", 8) || !strncmp(name, "libnvJitLink", 12) ||
           !strncmp(name, "libnvptxcompiler", 16);
}
static int said_export_table;

EXPORT CUresult cuGetExportTable(const void **table_out, const void *id) {
    Dl_info caller;
    const char *who = "an unknown library";
    (void)id;
    if (table_out) *table_out = NULL;
    if (dladdr(__builtin_return_address(0), &caller) && caller.dli_fname) who = caller.dli_fname;
    if (log_api()) fprintf(stderr, "[libcuda emu] cuGetExportTable from %s refused (CUDA_ERROR_NOT_SUPPORTED)\n", who);
    if (!compiler_library(who) && !__atomic_exchange_n(&said_export_table, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "lowlevel's emulated libcuda.so.1: cuGetExportTable refused for %s: the CUDA runtime's "
                        "private export tables are not emulated, so runtime-API clients (libcudart: CuPy, "
                        "PyTorch) cannot run on the emulated GPU (CUDA_ERROR_NOT_SUPPORTED); driver-API "
                        "clients (cuda.core, numba-cuda, lowlevel) can\n", who);
    return 801;
}
'''

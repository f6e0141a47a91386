"""cuBLAS through ctypes: one table of C prototypes, bound to the real libcublas or to the
emulated GPU's implementation of the same functions, as the driver is.

The raw calls mirror the C API and its column-major convention:

    sgemm(handle, "N", "T", m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)

with A, B, C device allocations or raw device pointers. Every status is checked: anything
but CUBLAS_STATUS_SUCCESS raises CublasError with its name and description. The real
library is found with cuda.pathfinder (the nvidia-cublas wheel, or a CUDA install).
"""
import ctypes
import threading
import time
from ctypes import c_double, c_float, c_int, c_int64, c_size_t, c_void_p

import numpy as np

from .. import trace
from . import profiling
from .bindings import python_caller, raw_function
from .checked import IntegerArguments
from ..capi.cublas_constants import COMPUTE_TYPE, DATA_TYPE, MATH_MODE, OPERATION, STATUS
from .context import ContextBound, ContextResource, ensure_context, on_reset
from .driver import Driver, show_argument
from .memory import device_pointer as _ptr
from .stream import stream_handle

Status = c_int
Handle_t = c_void_p
ptr = c_void_p

# name: (return type, argument types). Every function returns a cublasStatus_t except the
# two that return a const char* (declared void* so both bindings agree on it).
PROTOTYPES: dict[str, tuple] = {
    "cublasCreate_v2": (Status, (ptr,)),
    "cublasDestroy_v2": (Status, (Handle_t,)),
    "cublasGetVersion_v2": (Status, (Handle_t, ptr)),
    "cublasSetStream_v2": (Status, (Handle_t, c_void_p)),
    "cublasGetStream_v2": (Status, (Handle_t, ptr)),
    "cublasSetMathMode": (Status, (Handle_t, c_int)),
    "cublasGetMathMode": (Status, (Handle_t, ptr)),
    "cublasSetWorkspace_v2": (Status, (Handle_t, ptr, c_size_t)),
    "cublasGetStatusName": (c_void_p, (Status,)),
    "cublasGetStatusString": (c_void_p, (Status,)),
    "cublasSgemm_v2": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int, ptr, c_int,
                                ptr, ptr, c_int)),
    "cublasDgemm_v2": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int, ptr, c_int,
                                ptr, ptr, c_int)),
    "cublasHgemm": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int, ptr, c_int,
                             ptr, ptr, c_int)),
    "cublasGemmEx": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int, c_int, ptr,
                              c_int, c_int, ptr, ptr, c_int, c_int, c_int, c_int)),
    "cublasSgemmStridedBatched": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int,
                                           c_int64, ptr, c_int, c_int64, ptr, ptr, c_int, c_int64, c_int)),
    "cublasGemmStridedBatchedEx": (Status, (Handle_t, c_int, c_int, c_int, c_int, c_int, ptr, ptr, c_int,
                                            c_int, c_int64, ptr, c_int, c_int, c_int64, ptr, ptr, c_int,
                                            c_int, c_int64, c_int, c_int, c_int)),
    "cublasSaxpy_v2": (Status, (Handle_t, c_int, ptr, ptr, c_int, ptr, c_int)),
    "cublasSdot_v2": (Status, (Handle_t, c_int, ptr, c_int, ptr, c_int, ptr)),
    "cublasSgemv_v2": (Status, (Handle_t, c_int, c_int, c_int, ptr, ptr, c_int, ptr, c_int, ptr, ptr, c_int)),
}

STATUS_NAME = {v: k for k, v in STATUS.items()}


class CublasError(RuntimeError):
    """A cuBLAS call failed: .status, .name (CUBLAS_STATUS_INVALID_VALUE), .description, .function."""

    def __init__(self, status: int, function: str, description: str = ""):
        self.status = status
        self.name = STATUS_NAME.get(status, f"cublasStatus {status}")
        self.description = description
        self.function = function
        super().__init__(f"{function} failed: {self.name} ({status})" + (f": {description}" if description else ""))


class Cublas:
    """The cuBLAS function table bound to one implementation (kind "cuda" or "emu", for
    reports); a failed call first raises the interrupt that `driver` kept, if any."""

    def __init__(self, kind: str, functions: dict, description: str, driver: Driver | None = None):
        self.kind = kind
        self.description = description
        self.driver = driver
        self._functions = functions
        self.replacements = 0       # counts replace_function calls (a prepared call rebinds after one)
        # m, n, k, lda... are C ints: one past 2**31 must not reach cuBLAS as its low bits
        self._integers = {name: IntegerArguments(name, PROTOTYPES[name][1]) for name in functions}

    def __getattr__(self, name):
        # Reached once per name: the checked function is kept as an attribute, so a call
        # after the first is one attribute read.
        try:
            fn = self._functions[name]
        except KeyError:
            raise AttributeError(f"{name} is not bound ({self.description})") from None
        integers = self._integers[name]

        def checked(*args):
            integers.check(args)
            if trace.active is None:
                status = fn(*args)
            else:
                status = self._traced(fn, name, args)
            if status != 0:
                if self.driver is not None:
                    self.driver.reraise_interrupt()
                raise CublasError(status, name, self.status_string(status))
        setattr(self, name, checked)
        return checked

    def _traced(self, fn, name: str, args) -> int:
        """A call while a trace or profile runs: reported, and timed on the device in a profile."""
        timeline = trace.active_timeline
        pending = None
        if timeline is not None:
            pending = profiling.begin_cublas(timeline, self.driver, self._functions, name, args)
        start = time.perf_counter_ns()
        status = fn(*args)
        end = time.perf_counter_ns()
        shown, result = ", ".join(show_argument(a) for a in args), STATUS_NAME.get(status, str(status))
        if timeline is not None:
            profiling.end_call(timeline, self.driver, name, name, args, pending, start, end, shown, result, "cublas")
        trace.note_call("cublas", name, shown, result, (end - start) / 1e9)
        return status

    def replace_function(self, name: str, cfunc) -> None:
        """Call `cfunc` (a C function of the same prototype) for `name` from now on; its
        arguments are still checked. For tools that stand a no-op in for a library call."""
        if name not in self._functions:
            raise AttributeError(f"{name} is not bound ({self.description})")
        self._functions[name] = cfunc
        self.replacements += 1
        self.__dict__.pop(name, None)

    def c_function(self, name: str):
        """The C function called for `name` now (replace_function may change it)."""
        return self._functions[name]

    def check_integers(self, name: str, args) -> None:
        """The range check every call of `name` makes on its integer arguments (the same
        errors); for a caller that makes the C values once (PreparedSgemm)."""
        self._integers[name].check(args)

    def bound(self) -> list[str]:
        """The names of the C functions this implementation exports, of those in PROTOTYPES."""
        return sorted(self._functions)

    def status_name(self, status: int) -> str:
        return ctypes.string_at(self._functions["cublasGetStatusName"](status)).decode()

    def status_string(self, status: int) -> str:
        return ctypes.string_at(self._functions["cublasGetStatusString"](status)).decode()


def _bind(lookup) -> dict:
    bound = {}
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = lookup(name, restype, argtypes)
        if fn is not None:
            bound[name] = fn
    return bound


def load_real(driver: Driver | None = None) -> Cublas:
    """libcublas, found by cuda.pathfinder; ImportError-like RuntimeError when absent."""
    # Imported here, not at the top: only a real GPU with the gpu extra needs cuda-python's
    # library finder for cuBLAS.
    from cuda.pathfinder import load_nvidia_dynamic_lib  # noqa: PLC0415
    try:
        path = load_nvidia_dynamic_lib("cublas").abs_path
        lib = ctypes.CDLL(path)
    except Exception as e:
        raise RuntimeError(f"libcublas is not installed (pip install 'lowlevel[gpu]'): {e}") from e

    def lookup(name, restype, argtypes):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = restype, list(argtypes)
        return fn
    return Cublas("cuda", _bind(lookup), f"libcublas ({path})", driver)


def load_emulated(driver: Driver) -> Cublas:
    """The cuBLAS that `driver` brings (the emulated GPU's), bound as ctypes callbacks."""
    implementations = driver.cublas_functions()

    def lookup(name, restype, argtypes):
        impl = implementations.get(name)
        return None if impl is None else python_caller(ctypes.CFUNCTYPE(restype, *argtypes)(impl), restype, argtypes)
    return Cublas(driver.kind, _bind(lookup), f"cuBLAS of the {driver.description}", driver)


_libraries: dict[int, Cublas] = {}       # id(driver) -> its cuBLAS
_lock = threading.Lock()


def library() -> Cublas:
    """cuBLAS for the driver in use: the one it brings (the emulated GPU's), else libcublas."""
    drv, _ = ensure_context()
    with _lock:
        lib = _libraries.get(id(drv))
        if lib is None:
            lib = load_real(drv) if drv.cublas_functions is None else load_emulated(drv)
            _libraries[id(drv)] = lib
    return lib


class Handle(ContextResource):
    """A cuBLAS handle, bound to the current device; its work runs on `stream`."""

    handle = ContextBound("_handle")       # refused once the context is reset

    def __init__(self, stream=None):
        self._adopt()
        self.lib = library()
        h = c_void_p()
        self.lib.cublasCreate_v2(ctypes.byref(h))
        self.handle = h.value
        self.c_handle = c_void_p(h.value)      # the same, as a C value, for prepared calls
        self.stream = None
        self.set_stream(stream)

    def set_stream(self, stream) -> None:
        """Run later calls on `stream` (None: the legacy default stream)."""
        self.lib.cublasSetStream_v2(self.handle, stream_handle(stream, "cublas Handle.set_stream: stream"))
        self.stream = stream

    @property
    def math_mode(self) -> int:
        mode = c_int()
        self.lib.cublasGetMathMode(self.handle, ctypes.byref(mode))
        return mode.value

    @math_mode.setter
    def math_mode(self, mode) -> None:
        """A cublasMath_t by number or name ("CUBLAS_TF32_TENSOR_OP_MATH", "TF32_TENSOR_OP_MATH")."""
        if isinstance(mode, str):
            mode = MATH_MODE[mode if mode.startswith("CUBLAS_") else "CUBLAS_" + mode]
        self.lib.cublasSetMathMode(self.handle, mode)

    @property
    def version(self) -> int:
        v = c_int()
        self.lib.cublasGetVersion_v2(self.handle, ctypes.byref(v))
        return v.value

    def destroy(self) -> None:
        self.release()

    def _release(self) -> None:
        self.lib.cublasDestroy_v2(self.handle)


_per_thread = threading.local()


def drop_thread_handles() -> None:
    """Destroy this thread's cached handles (before the context they live in is reset)."""
    for handle in getattr(_per_thread, "handles", {}).values():
        try:
            handle.destroy()
        except Exception:
            pass            # a broken context: the reset reclaims it
    _per_thread.handles = {}


on_reset(drop_thread_handles)              # cuBLAS state lives in the context going away


def get_handle(stream=None) -> Handle:
    """The calling thread's handle for the current device, following `stream`.

    Handles are per device and per thread, as cuBLAS advises; this one is made once and
    re-pointed at whatever stream the caller is using now."""
    drv, ctx = ensure_context()
    return handle_in(drv, ctx, stream)


def handle_in(drv, ctx, stream=None) -> Handle:
    """get_handle for a caller that has just looked up the current context (ensure_context's
    `drv, ctx`): the same handle, without a second lookup."""
    handles = getattr(_per_thread, "handles", None)
    if handles is None:
        handles = _per_thread.handles = {}
    key = (id(drv), ctx.ordinal, ctx.generation)         # ctx is the current device's context
    h = handles.get(key)
    if h is None:
        h = handles[key] = Handle(stream)
    elif h.stream is not stream:
        h.set_stream(stream)
    return h


# ---- the raw calls: the C API, column-major -------------------------------------------------
def _op(trans: str) -> int:
    try:
        return OPERATION["CUBLAS_OP_" + trans.upper()]
    except (KeyError, AttributeError):
        raise ValueError(f"transpose flag must be 'N', 'T' or 'C', got {trans!r}") from None


def _scalar_ref(value, ctype):
    return ctypes.byref(ctype(value))


def _half_ref(value):
    return ctypes.byref(ctypes.c_uint16(int(np.float16(value).view(np.uint16))))


def sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) -> None:
    """C = alpha * op(A) @ op(B) + beta * C in float32, column-major."""
    handle.lib.cublasSgemm_v2(handle.handle, _op(transa), _op(transb), m, n, k, _scalar_ref(alpha, c_float),
                              _ptr(A), lda, _ptr(B), ldb, _scalar_ref(beta, c_float), _ptr(C), ldc)


_MAX_POINTERS = 64


class PreparedSgemm:
    """sgemm with everything but the handle and the three matrices fixed, as a prepared
    launch fixes a kernel's configuration: the transpose flags, sizes, leading dimensions
    and scalars are checked once, here, with the binding's own check (the same errors), and
    become C values once; a call passes them with the handle and the three pointers to the
    C function directly. While a trace runs, or after the function was replaced, the call
    goes through the checked binding instead, so it is reported (and bound again)."""

    NAME = "cublasSgemm_v2"

    def __init__(self, lib: Cublas, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc):
        ops = (_op(transa), _op(transb))
        lib.check_integers(self.NAME, (None, *ops, m, n, k, None, None, lda, None, ldb, None, None, ldc))
        self.lib = lib
        self._alpha, self._beta = c_float(alpha), c_float(beta)
        self._ints = (*ops, m, n, k)
        # The C ints as Python ints: ctypes passes a Python int to the untyped C function
        # as a C int, which check_integers proved each one is (and converts it faster than
        # a c_int object); the pointers stay C pointers (a Python int would be cut to 32 bits).
        self._head = (*self._ints, ctypes.byref(self._alpha))
        self._lda, self._ldb, self._ldc = int(lda), int(ldb), int(ldc)
        self._beta_ref = ctypes.byref(self._beta)
        self._raw = None
        self._seen = -1             # lib.replacements when the C function was bound
        self._pointers: dict = {}   # device address -> its C pointer value, made once (a few kept)

    def __call__(self, handle: Handle, A: int, B: int, C: int) -> None:
        """C = alpha * op(A) @ op(B) + beta * C on the handle's stream; A, B, C device
        addresses."""
        if handle.context_generation != handle.context.generation:
            handle.check_context()              # Handle.handle's check, before its C value is used
        lib = self.lib
        if self._seen != lib.replacements or trace.active is not None:
            self._checked(handle, A, B, C)
            return
        # the matrices' C pointers: an op loop passes the same few addresses call after call
        pointers = self._pointers
        status = self._raw(handle.c_handle, *self._head, pointers.get(A) or self._pointer(A), self._lda,
                           pointers.get(B) or self._pointer(B), self._ldb, self._beta_ref,
                           pointers.get(C) or self._pointer(C), self._ldc)
        if status != 0:
            if lib.driver is not None:
                lib.driver.reraise_interrupt()
            raise CublasError(status, self.NAME, lib.status_string(status))

    def _pointer(self, address: int) -> c_void_p:
        """c_void_p(address), kept for the next call (0 is made every time: a NULL c_void_p
        is false); the oldest go when more than _MAX_POINTERS are kept."""
        if len(self._pointers) >= _MAX_POINTERS:
            self._pointers = {}
        value = self._pointers[address] = c_void_p(address)
        return value

    def _checked(self, handle: Handle, A: int, B: int, C: int) -> None:
        lib = self.lib
        seen, fn = lib.replacements, lib.c_function(self.NAME)
        getattr(lib, self.NAME)(handle.handle, *self._ints, ctypes.byref(self._alpha), A, self._lda,
                                B, self._ldb, ctypes.byref(self._beta), C, self._ldc)
        if trace.active is None:
            # the C function at the same address, without ctypes' per-call conversion (the
            # arguments are C values already); `fn` is kept, so it stays alive
            self._raw = raw_function(fn)
            self._bound, self._seen = fn, seen


def dgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) -> None:
    handle.lib.cublasDgemm_v2(handle.handle, _op(transa), _op(transb), m, n, k, _scalar_ref(alpha, c_double),
                              _ptr(A), lda, _ptr(B), ldb, _scalar_ref(beta, c_double), _ptr(C), ldc)


def hgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) -> None:
    """float16 in, float16 out, float16 compute."""
    handle.lib.cublasHgemm(handle.handle, _op(transa), _op(transb), m, n, k, _half_ref(alpha),
                           _ptr(A), lda, _ptr(B), ldb, _half_ref(beta), _ptr(C), ldc)


def sgemm_strided_batched(handle, transa, transb, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b,
                          beta, C, ldc, stride_c, batch) -> None:
    handle.lib.cublasSgemmStridedBatched(
        handle.handle, _op(transa), _op(transb), m, n, k, _scalar_ref(alpha, c_float), _ptr(A), lda, stride_a,
        _ptr(B), ldb, stride_b, _scalar_ref(beta, c_float), _ptr(C), ldc, stride_c, batch)


def data_type(name: str) -> int:
    """A cudaDataType by name: "CUDA_R_16F" or "R_16F"."""
    return DATA_TYPE[name if name.startswith("CUDA_") else "CUDA_" + name]


def compute_type(name: str) -> int:
    """A cublasComputeType_t by name: "CUBLAS_COMPUTE_32F" or "32F"."""
    return COMPUTE_TYPE[name if name.startswith("CUBLAS_") else "CUBLAS_COMPUTE_" + name]


def _compute_scalar(compute: int, value):
    name = next(n for n, v in COMPUTE_TYPE.items() if v == compute)
    if name.startswith("CUBLAS_COMPUTE_16F"):
        return _half_ref(value)
    return _scalar_ref(value, c_double if name.startswith("CUBLAS_COMPUTE_64F") else c_float)


def gemm_ex(handle, transa, transb, m, n, k, alpha, A, a_type, lda, B, b_type, ldb, beta, C, c_type, ldc,
            compute, algo=-1) -> None:
    """cublasGemmEx: types by name ("R_16F", "R_16BF", "R_32F"), compute by name ("32F")."""
    ct = compute_type(compute)
    handle.lib.cublasGemmEx(handle.handle, _op(transa), _op(transb), m, n, k, _compute_scalar(ct, alpha),
                            _ptr(A), data_type(a_type), lda, _ptr(B), data_type(b_type), ldb,
                            _compute_scalar(ct, beta), _ptr(C), data_type(c_type), ldc, ct, algo)


def gemm_strided_batched_ex(handle, transa, transb, m, n, k, alpha, A, a_type, lda, stride_a, B, b_type, ldb,
                            stride_b, beta, C, c_type, ldc, stride_c, batch, compute, algo=-1) -> None:
    ct = compute_type(compute)
    handle.lib.cublasGemmStridedBatchedEx(
        handle.handle, _op(transa), _op(transb), m, n, k, _compute_scalar(ct, alpha), _ptr(A), data_type(a_type),
        lda, stride_a, _ptr(B), data_type(b_type), ldb, stride_b, _compute_scalar(ct, beta), _ptr(C),
        data_type(c_type), ldc, stride_c, batch, ct, algo)


def saxpy(handle, n, alpha, x, incx, y, incy) -> None:
    """y = alpha * x + y."""
    handle.lib.cublasSaxpy_v2(handle.handle, n, _scalar_ref(alpha, c_float), _ptr(x), incx, _ptr(y), incy)


def sdot(handle, n, x, incx, y, incy) -> float:
    """x . y, returned to the host (the call waits for it)."""
    result = c_float()
    handle.lib.cublasSdot_v2(handle.handle, n, _ptr(x), incx, _ptr(y), incy, ctypes.byref(result))
    return result.value


def sgemv(handle, trans, m, n, alpha, A, lda, x, incx, beta, y, incy) -> None:
    """y = alpha * op(A) @ x + beta * y, A column-major m x n."""
    handle.lib.cublasSgemv_v2(handle.handle, _op(trans), m, n, _scalar_ref(alpha, c_float), _ptr(A), lda,
                              _ptr(x), incx, _scalar_ref(beta, c_float), _ptr(y), incy)

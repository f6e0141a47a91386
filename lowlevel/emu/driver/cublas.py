"""The emulated GPU's cuBLAS: the same C functions as libcublas, with exact BLAS semantics.

Storage is column-major: element (i, j) of a matrix with leading dimension ld sits at
index i + j * ld. op(X) is X or its transpose. C = alpha * op(A) @ op(B) + beta * C over
the m x n block of C only: the padding rows between m and ldc are never touched, and when
beta is 0, C is not read at all (NaN in C must not leak into the result).

Arguments are checked when the call is made, as the library does (CUBLAS_STATUS_INVALID_VALUE
for lda < max(1, rows of A as stored), and so on); alpha and beta are read then (host
pointer mode). The arithmetic runs later, on the handle's stream, in order with kernels and
copies on that stream. A matrix that reaches outside its allocation faults like a kernel
(CUDA_ERROR_ILLEGAL_ADDRESS, sticky).
"""
import ctypes
import sys
import threading
import traceback

import numpy as np

from ...capi.cublas_constants import COMPUTE_TYPE, DATA_TYPE, MATH_MODE, OPERATION, STATUS
from .context import current, live_contexts, record_interrupt
from .entry import CFunctions, NullOutput, write_out
from .errors import EmuError, static_c_string
from ..engine.faults import KernelFault
from ..engine.memory import AccessFault
from ..tools.timemodel import gemm_segment, streaming_segment
from .memory import modelled
from .queues import host_math

VERSION = 131000            # what cublasGetVersion reports: the cuBLAS 13.1 API

_handles: dict[int, "HandleState"] = {}
_next_handle = [0xC0B1A5000]
_handles_lock = threading.Lock()


class BlasError(Exception):
    def __init__(self, status: str, why: str = ""):
        super().__init__(f"{status}: {why}")
        self.status = STATUS[status]


def _failure(name: str, exc: BaseException) -> int:
    """The cublasStatus_t a cuBLAS function returns for what it raised."""
    if isinstance(exc, BlasError):
        return exc.status
    if isinstance(exc, NullOutput):
        return STATUS["CUBLAS_STATUS_INVALID_VALUE"]
    if isinstance(exc, EmuError):          # no context, or a broken one
        return STATUS["CUBLAS_STATUS_NOT_INITIALIZED" if exc.name == "CUDA_ERROR_INVALID_CONTEXT"
                      else "CUBLAS_STATUS_EXECUTION_FAILED"]
    if isinstance(exc, Exception):
        print(f"internal error in emulated {name}:\n{traceback.format_exc()}", file=sys.stderr)
        return STATUS["CUBLAS_STATUS_INTERNAL_ERROR"]
    record_interrupt(exc, name)             # Ctrl-C in a wait: kept for the caller to re-raise
    return STATUS["CUBLAS_STATUS_INTERNAL_ERROR"]


# cuBLAS's C functions by name; `@api` registers one (it may return a status of its own).
FUNCTIONS = CFunctions(STATUS["CUBLAS_STATUS_SUCCESS"], _failure)
api = FUNCTIONS


def functions() -> dict:
    return dict(FUNCTIONS)


class HandleState:
    def __init__(self, context):
        self.context = context
        self.stream = 0
        self.math_mode = MATH_MODE["CUBLAS_DEFAULT_MATH"]
        self.workspace = (0, 0)


def _handle(h: int) -> HandleState:
    state = _handles.get(h)
    if state is None:
        raise BlasError("CUBLAS_STATUS_NOT_INITIALIZED", f"unknown handle {h:#x}")
    if not any(c is state.context for c in live_contexts()):
        # its context was destroyed or reset: the handle died with it
        _handles.pop(h, None)
        raise BlasError("CUBLAS_STATUS_NOT_INITIALIZED",
                        f"handle {h:#x} belongs to a context that was destroyed or reset")
    return state


# ---- handles -------------------------------------------------------------------------
@api
def cublasCreate_v2(handle_out):
    ctx = current()
    with _handles_lock:
        # forget handles whose context is gone (they hold its memory arena alive)
        live = live_contexts()
        for old in [k for k, st in _handles.items() if not any(c is st.context for c in live)]:
            del _handles[old]
        _next_handle[0] += 0x100
        handle = _next_handle[0]
        _handles[handle] = HandleState(ctx)
    write_out(ctypes.c_void_p, handle_out, handle)


@api
def cublasDestroy_v2(h):
    _handle(h)
    _handles.pop(h, None)


@api
def cublasGetVersion_v2(h, version_out):
    write_out(ctypes.c_int, version_out, VERSION)


@api
def cublasSetStream_v2(h, stream):
    state = _handle(h)
    state.context.stream(stream)               # an unknown stream is refused now
    state.stream = stream


@api
def cublasGetStream_v2(h, stream_out):
    write_out(ctypes.c_void_p, stream_out, _handle(h).stream or None)


@api
def cublasSetMathMode(h, mode):
    if mode & ~0x1F or (mode & 0xF) not in (0, 1, 2, 3, 4, 8):
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", f"unknown math mode {mode}")
    _handle(h).math_mode = mode


@api
def cublasGetMathMode(h, mode_out):
    write_out(ctypes.c_int, mode_out, _handle(h).math_mode)


@api
def cublasSetWorkspace_v2(h, workspace, size):
    _handle(h).workspace = (workspace, size)


_STATUS_DESCRIPTION = {
    "CUBLAS_STATUS_SUCCESS": "the operation completed successfully",
    "CUBLAS_STATUS_NOT_INITIALIZED": "the handle was not created, or there is no current context",
    "CUBLAS_STATUS_ALLOC_FAILED": "resource allocation failed",
    "CUBLAS_STATUS_INVALID_VALUE": "an unsupported value or parameter was passed",
    "CUBLAS_STATUS_ARCH_MISMATCH": "the device does not support the requested feature",
    "CUBLAS_STATUS_MAPPING_ERROR": "accessing GPU memory failed",
    "CUBLAS_STATUS_EXECUTION_FAILED": "the GPU program failed to execute (the context may be broken)",
    "CUBLAS_STATUS_INTERNAL_ERROR": "an internal cuBLAS operation failed",
    "CUBLAS_STATUS_NOT_SUPPORTED": "the functionality requested is not supported",
    "CUBLAS_STATUS_LICENSE_ERROR": "license error",
}


def _status_name(status: int) -> str | None:
    return next((n for n, v in STATUS.items() if v == status), None)


def cublasGetStatusName(status):
    return static_c_string(_status_name(status) or "CUBLAS_STATUS_UNKNOWN")


def cublasGetStatusString(status):
    name = _status_name(status)
    return static_c_string(_STATUS_DESCRIPTION.get(name, "unknown status"))


FUNCTIONS["cublasGetStatusName"] = cublasGetStatusName
FUNCTIONS["cublasGetStatusString"] = cublasGetStatusString


# ---- matrices in device memory --------------------------------------------------------
_OPS = {OPERATION["CUBLAS_OP_N"]: False, OPERATION["CUBLAS_OP_T"]: True, OPERATION["CUBLAS_OP_C"]: True}


def _transposed(op: int, what: str) -> bool:
    if op not in _OPS:
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", f"{what}: unknown operation {op}")
    return _OPS[op]


class Matrix:
    """A column-major rows x cols matrix at a device address (or a batch of them)."""

    def __init__(self, address: int, rows: int, cols: int, ld: int, dtype, stride: int = 0, batch: int = 1):
        self.address, self.rows, self.cols, self.ld = address, rows, cols, ld
        self.dtype = np.dtype(dtype)
        self.stride, self.batch = stride, batch

    def view(self, memory) -> np.ndarray:
        """(batch, rows, cols) view into the arena; faults if any element is out of bounds."""
        size = self.dtype.itemsize
        if self.rows == 0 or self.cols == 0 or self.batch == 0:
            return np.zeros((self.batch, self.rows, self.cols), self.dtype)
        # The lowest and highest element (in elements from the address) the view touches;
        # a negative ld or stride (BLAS's negative increments) walks backwards.
        spans = [(self.cols - 1) * self.ld, (self.batch - 1) * self.stride]
        lo = sum(min(0, s) for s in spans)
        hi = self.rows - 1 + sum(max(0, s) for s in spans)
        try:
            memory.offsets(np.array([self.address + lo * size], np.uint64), size)
            start = memory.check_range(self.address + lo * size, (hi - lo + 1) * size)
        except AccessFault as e:
            code = "CUDA_ERROR_MISALIGNED_ADDRESS" if e.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS" \
                else "CUDA_ERROR_ILLEGAL_ADDRESS"
            raise KernelFault(code,
                              f"cuBLAS: a {self.rows}x{self.cols} matrix (ld {self.ld}) at {self.address:#x} "
                              f"reaches outside its allocation ({e})") from None
        base = memory.view(self.dtype)[start // size - lo:]
        return np.lib.stride_tricks.as_strided(
            base, shape=(self.batch, self.rows, self.cols),
            strides=(self.stride * size, size, self.ld * size), writeable=True)


def _check_gemm(ta, tb, m, n, k, lda, ldb, ldc, batch=1):
    if min(m, n, k) < 0 or batch < 0:
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", f"negative size m={m} n={n} k={k} batch={batch}")
    a_rows = k if ta else m
    b_rows = n if tb else k
    for ld, rows, name in ((lda, a_rows, "lda"), (ldb, b_rows, "ldb"), (ldc, m, "ldc")):
        if ld < max(1, rows):
            raise BlasError("CUBLAS_STATUS_INVALID_VALUE", f"{name}={ld} < max(1, {rows})")


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest TF32 value (10 mantissa bits), ties to even, as a float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    keep = np.uint32(0xFFFFE000)
    rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & keep
    finite = np.isfinite(x)
    return np.where(finite, rounded, bits).view(np.float32)


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(x)
    return np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


# storage dtype, to-compute, from-compute for each cudaDataType the emulator handles
_TYPES = {
    DATA_TYPE["CUDA_R_32F"]: (np.float32, lambda v: v.astype(np.float64), lambda v: v.astype(np.float32)),
    DATA_TYPE["CUDA_R_64F"]: (np.float64, lambda v: v.astype(np.float64), lambda v: v.astype(np.float64)),
    DATA_TYPE["CUDA_R_16F"]: (np.float16, lambda v: v.astype(np.float64), lambda v: v.astype(np.float16)),
    DATA_TYPE["CUDA_R_16BF"]: (np.uint16, lambda v: _bf16_to_f32(v).astype(np.float64),
                               lambda v: _f32_to_bf16(v.astype(np.float32))),
}


PANEL_MACS = 1 << 31     # multiply-adds per piece of a GEMM: well under a second of BLAS


def gemm_panels(batch: int, m: int, n: int, k: int):
    """(batch slice, row slice) pieces of C, each of about PANEL_MACS multiply-adds at most
    (one row of one matrix at least): between pieces the worker can stop at exit, and each
    is large enough that BLAS runs near its full speed. Whole matrices of a batch give C bit
    for bit as one call would; only a matrix beyond PANEL_MACS is cut into row panels,
    where BLAS may order a dot product's terms otherwise (within rounding, as cuBLAS)."""
    per_row = n * max(k, 1)
    rows = min(m, max(1, PANEL_MACS // per_row))
    step = min(batch, max(1, PANEL_MACS // (per_row * m))) if rows == m else 1
    for b0 in range(0, batch, step):
        for i0 in range(0, m, rows):
            yield slice(b0, min(batch, b0 + step)), slice(i0, min(m, i0 + rows))


def _operand(to_compute, view, tf32: bool) -> np.ndarray:
    """A piece of op(A) or op(B) in the compute type (float64), TF32-rounded if asked."""
    x = to_compute(view)
    return _round_tf32(x.astype(np.float32)).astype(np.float64) if tf32 else x


def _gemm(h, ta_op, tb_op, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
          batch, a_type, b_type, c_type, tf32=False, label="gemm"):
    """Validate now, compute in stream order: C = alpha * op(A) @ op(B) + beta * C."""
    state = _handle(h)
    ta, tb = _transposed(ta_op, "transa"), _transposed(tb_op, "transb")
    _check_gemm(ta, tb, m, n, k, lda, ldb, ldc, batch)
    ctx = current()
    stream = ctx.stream(state.stream)
    if m == 0 or n == 0 or batch == 0:
        return
    a_dtype, a_in, _ = _TYPES[a_type]
    b_dtype, b_in, _ = _TYPES[b_type]
    c_dtype, c_in, c_out = _TYPES[c_type]
    A = Matrix(a, k if ta else m, m if ta else k, lda, a_dtype, stride_a, batch)
    B = Matrix(b, n if tb else k, k if tb else n, ldb, b_dtype, stride_b, batch)
    C = Matrix(c, m, n, ldc, c_dtype, stride_c, batch)
    memory = ctx.memory

    def run():
        c_view = C.view(memory)
        a_view, b_view = A.view(memory), B.view(memory)
        a_view = a_view.transpose(0, 2, 1) if ta else a_view        # op(A), op(B)
        b_view = b_view.transpose(0, 2, 1) if tb else b_view
        b_batches, bv = None, None
        for bs, rs in gemm_panels(batch, m, n, k):
            with host_math():       # none starts once the process exits (queues.py)
                if k == 0 or alpha == 0:
                    product = np.zeros(c_view[bs, rs].shape)
                else:
                    if bs != b_batches:
                        b_batches, bv = bs, _operand(b_in, b_view[bs], tf32)
                    product = alpha * np.matmul(_operand(a_in, a_view[bs, rs], tf32), bv)
                # beta == 0: C is written, never read.
                part = c_view[bs, rs]
                part[...] = c_out(product if beta == 0 else product + beta * c_in(part))
    if ctx.timeline is not None:
        math = _gemm_math(c_dtype, a_dtype, tf32)
        segment = gemm_segment(m, n, k, batch, math, np.dtype(a_dtype).itemsize, np.dtype(c_dtype).itemsize, beta != 0)
        run = modelled(ctx, run, segment)
    ctx.submit(stream, run, f"cuBLAS {label}")


def _gemm_math(c_dtype, a_dtype, tf32: bool) -> str:
    """Which of the device's rates a GEMM runs at (timemodel.peak_flops)."""
    if np.dtype(a_dtype).itemsize == 2:
        return "fp16"                   # FP16 and BF16 inputs: the tensor cores
    if np.dtype(c_dtype) == np.float64:
        return "fp64"
    return "tf32" if tf32 else "fp32"


def _scalar(address: int, dtype) -> float:
    if not address:
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", "NULL alpha or beta")
    dtype = np.dtype(dtype)
    value = np.frombuffer(ctypes.string_at(address, dtype.itemsize), dtype)[0]
    return float(_bf16_to_f32(np.array([value]))[0]) if dtype == np.uint16 else float(value)


def _uses_tf32(state: HandleState) -> bool:
    return (state.math_mode & 0xF) == MATH_MODE["CUBLAS_TF32_TENSOR_OP_MATH"]


F32, F64, F16 = DATA_TYPE["CUDA_R_32F"], DATA_TYPE["CUDA_R_64F"], DATA_TYPE["CUDA_R_16F"]


@api
def cublasSgemm_v2(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, np.float32), a, lda, 0, b, ldb, 0, _scalar(beta, np.float32),
          c, ldc, 0, 1, F32, F32, F32, tf32=_uses_tf32(_handle(h)), label="Sgemm")


@api
def cublasDgemm_v2(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, np.float64), a, lda, 0, b, ldb, 0, _scalar(beta, np.float64),
          c, ldc, 0, 1, F64, F64, F64, label="Dgemm")


@api
def cublasHgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, np.float16), a, lda, 0, b, ldb, 0, _scalar(beta, np.float16),
          c, ldc, 0, 1, F16, F16, F16, label="Hgemm")


@api
def cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch):
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, np.float32), a, lda, sa, b, ldb, sb, _scalar(beta, np.float32),
          c, ldc, sc, batch, F32, F32, F32, tf32=_uses_tf32(_handle(h)), label="SgemmStridedBatched")


# (A, B, C types) -> compute types the library accepts for them
_EX_COMBOS = {
    (F32, F32, F32): {"CUBLAS_COMPUTE_32F", "CUBLAS_COMPUTE_32F_PEDANTIC", "CUBLAS_COMPUTE_32F_FAST_TF32",
                      "CUBLAS_COMPUTE_32F_FAST_16F", "CUBLAS_COMPUTE_32F_FAST_16BF"},
    (F64, F64, F64): {"CUBLAS_COMPUTE_64F", "CUBLAS_COMPUTE_64F_PEDANTIC"},
    (F16, F16, F16): {"CUBLAS_COMPUTE_16F", "CUBLAS_COMPUTE_16F_PEDANTIC", "CUBLAS_COMPUTE_32F",
                      "CUBLAS_COMPUTE_32F_PEDANTIC"},
    (F16, F16, F32): {"CUBLAS_COMPUTE_32F", "CUBLAS_COMPUTE_32F_PEDANTIC"},
    (DATA_TYPE["CUDA_R_16BF"],) * 3: {"CUBLAS_COMPUTE_32F", "CUBLAS_COMPUTE_32F_PEDANTIC"},
    (DATA_TYPE["CUDA_R_16BF"], DATA_TYPE["CUDA_R_16BF"], F32): {"CUBLAS_COMPUTE_32F", "CUBLAS_COMPUTE_32F_PEDANTIC"},
}


def _ex_scalar_dtype(compute: str):
    """alpha and beta are of the compute type: half for 16F, double for 64F, else float."""
    return np.float16 if compute.startswith("CUBLAS_COMPUTE_16F") else \
        np.float64 if compute.startswith("CUBLAS_COMPUTE_64F") else np.float32


def _check_ex(a_type, b_type, c_type, compute_type) -> str:
    compute = next((n for n, v in COMPUTE_TYPE.items() if v == compute_type), None)
    allowed = _EX_COMBOS.get((a_type, b_type, c_type))
    if compute is None or allowed is None or compute not in allowed:
        raise BlasError("CUBLAS_STATUS_NOT_SUPPORTED",
                        f"types A={a_type} B={b_type} C={c_type} with compute {compute_type}")
    return compute


@api
def cublasGemmEx(h, ta, tb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc,
                 compute_type, algo):
    compute = _check_ex(a_type, b_type, c_type, compute_type)
    dtype = _ex_scalar_dtype(compute)
    tf32 = compute == "CUBLAS_COMPUTE_32F_FAST_TF32" or (compute == "CUBLAS_COMPUTE_32F" and a_type == F32
                                                          and _uses_tf32(_handle(h)))
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, dtype), a, lda, 0, b, ldb, 0, _scalar(beta, dtype),
          c, ldc, 0, 1, a_type, b_type, c_type, tf32=tf32, label="GemmEx")


@api
def cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, a_type, lda, sa, b, b_type, ldb, sb, beta,
                               c, c_type, ldc, sc, batch, compute_type, algo):
    compute = _check_ex(a_type, b_type, c_type, compute_type)
    dtype = _ex_scalar_dtype(compute)
    tf32 = compute == "CUBLAS_COMPUTE_32F_FAST_TF32" or (compute == "CUBLAS_COMPUTE_32F" and a_type == F32
                                                          and _uses_tf32(_handle(h)))
    _gemm(h, ta, tb, m, n, k, _scalar(alpha, dtype), a, lda, sa, b, ldb, sb, _scalar(beta, dtype),
          c, ldc, sc, batch, a_type, b_type, c_type, tf32=tf32, label="GemmStridedBatchedEx")


# ---- level 1 and 2 --------------------------------------------------------------------
def _vector(address: int, n: int, inc: int) -> Matrix:
    """A strided vector as a 1 x n 'matrix' whose columns are inc apart (inc may be < 0)."""
    if inc == 0:
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", "increment 0")
    start = address if inc > 0 else address + (n - 1) * (-inc) * 4
    return Matrix(start, 1, n, inc, np.float32)


@api
def cublasSaxpy_v2(h, n, alpha, x, incx, y, incy):
    state = _handle(h)
    a = _scalar(alpha, np.float32)
    if n <= 0:
        return
    X, Y = _vector(x, n, incx), _vector(y, n, incy)
    ctx = current()
    memory = ctx.memory

    def run():
        yv = Y.view(memory)
        yv[...] = (np.float64(a) * X.view(memory) + yv).astype(np.float32)
    ctx.submit(ctx.stream(state.stream), modelled(ctx, run, streaming_segment(12 * n, "saxpy")), "cuBLAS Saxpy")


@api
def cublasSdot_v2(h, n, x, incx, y, incy, result):
    state = _handle(h)
    if not result:
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", "NULL result")
    ctx = current()
    if n <= 0:
        ctypes.c_float.from_address(result).value = 0.0
        return
    X, Y = _vector(x, n, incx), _vector(y, n, incy)
    memory = ctx.memory
    box = {}

    def run():
        with host_math():
            box["dot"] = np.float32(np.dot(X.view(memory).ravel().astype(np.float64),
                                           Y.view(memory).ravel().astype(np.float64)))
    # Host pointer mode: the call returns only once the result is in host memory.
    run = modelled(ctx, run, streaming_segment(8 * n, "sdot"))
    ctx.submit(ctx.stream(state.stream), run, "cuBLAS Sdot").done.wait()
    current()
    ctypes.c_float.from_address(result).value = float(box.get("dot", np.nan))   # NaN: abandoned at exit


@api
def cublasSgemv_v2(h, trans, m, n, alpha, a, lda, x, incx, beta, y, incy):
    state = _handle(h)
    t = _transposed(trans, "trans")
    if m < 0 or n < 0 or lda < max(1, m):
        raise BlasError("CUBLAS_STATUS_INVALID_VALUE", f"m={m} n={n} lda={lda}")
    al, be = _scalar(alpha, np.float32), _scalar(beta, np.float32)
    if m == 0 or n == 0:
        return
    A = Matrix(a, m, n, lda, np.float32)
    X = _vector(x, m if t else n, incx)
    Y = _vector(y, n if t else m, incy)
    ctx = current()
    memory = ctx.memory

    def run():
        av = A.view(memory)[0].astype(np.float64)
        xv = X.view(memory).ravel().astype(np.float64)
        yv = Y.view(memory)
        product = al * ((av.T if t else av) @ xv)
        yv[...] = (product if be == 0 else product + be * yv.ravel()).astype(np.float32)
    run = modelled(ctx, run, streaming_segment(4 * (m * n + 2 * (m + n)), "sgemv"))
    ctx.submit(ctx.stream(state.stream), run, "cuBLAS Sgemv")

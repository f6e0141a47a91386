"""cuBLAS through ctypes on every driver present: column-major GEMMs with transposes and
padded leading dimensions, beta = 0 over NaN, batches, half precisions, stream order, and
the library's argument checks."""
import os
import pathlib
import re
import threading

import numpy as np
import pytest
from helpers.memory import download, upload

from lowlevel import cuda, kernels
from lowlevel.cuda import cublas
from lowlevel.cuda.gemm import gemm_rowmajor

PAD = np.float32(-7.25)          # what the padding rows of C hold; they must stay so


def col_major(host: np.ndarray, ld: int, pad=PAD) -> np.ndarray:
    """The ld x cols column-major storage of `host` (rows x cols), padding rows filled."""
    rows, cols = host.shape
    store = np.full((cols, ld), pad, dtype=host.dtype)
    store[:, :rows] = host.T
    return store


def gemm_bound(a, b, c, alpha, beta, k, eps):
    """Elementwise error bound of a float gemm: about k roundings of each product term."""
    return (k + 2) * eps * (abs(alpha) * (np.abs(a) @ np.abs(b)) + abs(beta) * np.abs(c)) + 1e-30


@pytest.fixture
def handle(driver):
    return cublas.Handle()


def shapes(rng):
    yield 1, 1, 1
    for _ in range(2):
        yield tuple(int(v) for v in rng.integers(2, 70, size=3))


@pytest.mark.parametrize("transa", ["N", "T"])
@pytest.mark.parametrize("transb", ["N", "T"])
def test_sgemm_transposes_and_padding(handle, rng, transa, transb):
    for m, n, k in shapes(rng):
        a_rows, a_cols = (k, m) if transa == "T" else (m, k)
        b_rows, b_cols = (n, k) if transb == "T" else (k, n)
        lda, ldb, ldc = a_rows + int(rng.integers(0, 5)), b_rows + int(rng.integers(0, 5)), m + int(rng.integers(1, 5))
        A = rng.standard_normal((a_rows, a_cols)).astype(np.float32)
        B = rng.standard_normal((b_rows, b_cols)).astype(np.float32)
        C = rng.standard_normal((m, n)).astype(np.float32)
        alpha, beta = float(rng.standard_normal()), float(rng.standard_normal())
        dA, dB, dC = upload(col_major(A, lda)), upload(col_major(B, ldb)), upload(col_major(C, ldc))
        cublas.sgemm(handle, transa, transb, m, n, k, alpha, dA, lda, dB, ldb, beta, dC, ldc)
        got = download(dC, (n, ldc), np.float32)
        opA = (A.T if transa == "T" else A).astype(np.float64)
        opB = (B.T if transb == "T" else B).astype(np.float64)
        ref = np.float32(alpha) * (opA @ opB) + np.float32(beta) * C.astype(np.float64)
        err = np.abs(got[:, :m].T - ref)
        assert (err <= gemm_bound(opA, opB, C, alpha, beta, k, np.finfo(np.float32).eps)).all(), (m, n, k)
        assert (got[:, m:] == PAD).all(), "padding rows of C were written"


def test_beta_zero_does_not_read_c(handle, rng):
    m, n, k = 37, 19, 23
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    dA, dB = upload(col_major(A, m)), upload(col_major(B, k))
    nan_c = np.full((n, m + 3), np.nan, np.float32)
    dC = upload(nan_c)
    cublas.sgemm(handle, "N", "N", m, n, k, 1.0, dA, m, dB, k, 0.0, dC, m + 3)
    got = download(dC, nan_c.shape, nan_c.dtype)
    assert np.isfinite(got[:, :m]).all()
    np.testing.assert_allclose(got[:, :m].T, A.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)
    assert np.isnan(got[:, m:]).all()


def test_dgemm(handle, rng):
    m, n, k = (int(v) for v in rng.integers(5, 60, size=3))
    A, B, C = rng.standard_normal((k, m)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    dA, dB, dC = upload(col_major(A, k, 0.0)), upload(col_major(B, k, 0.0)), upload(col_major(C, m, 0.0))
    cublas.dgemm(handle, "T", "N", m, n, k, 0.5, dA, k, dB, k, 2.0, dC, m)
    got = download(dC, (n, m), np.float64).T
    np.testing.assert_allclose(got, 0.5 * A.T @ B + 2.0 * C, rtol=1e-12, atol=1e-12)


def test_strided_batched(handle, rng):
    m, n, k, batch = 13, 17, 11, 5
    A = rng.standard_normal((batch, m, k)).astype(np.float32)
    B = rng.standard_normal((batch, k, n)).astype(np.float32)
    sa, sb, sc = m * k + 3, k * n + 1, m * n + 7          # strides with gaps between matrices
    store_a = np.zeros(batch * sa, np.float32)
    store_b = np.zeros(batch * sb, np.float32)
    store_c = np.full(batch * sc, PAD, np.float32)
    for i in range(batch):
        store_a[i * sa:i * sa + m * k] = A[i].T.ravel()
        store_b[i * sb:i * sb + k * n] = B[i].T.ravel()
    dA, dB, dC = upload(store_a), upload(store_b), upload(store_c)
    cublas.sgemm_strided_batched(handle, "N", "N", m, n, k, 1.0, dA, m, sa, dB, k, sb, 0.0, dC, m, sc, batch)
    got = download(dC, store_c.shape, store_c.dtype)
    for i in range(batch):
        np.testing.assert_allclose(got[i * sc:i * sc + m * n].reshape(n, m).T, A[i].astype(np.float64) @ B[i],
                                   rtol=1e-5, atol=1e-5)
        assert (got[i * sc + m * n:(i + 1) * sc] == PAD).all()


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest even."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("precision", ["R_16F", "R_16BF"])
def test_gemm_ex_half_precisions(handle, rng, precision):
    m, n, k = 33, 21, 47
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    if precision == "R_16F":
        a_store, b_store = A.astype(np.float16), B.astype(np.float16)
        a_val, b_val = a_store.astype(np.float64), b_store.astype(np.float64)
        eps = np.finfo(np.float16).eps
    else:
        a_store, b_store = bf16_bits(A), bf16_bits(B)
        a_val, b_val = bf16_value(a_store), bf16_value(b_store)
        eps = 2.0 ** -8
    dA = upload(np.ascontiguousarray(a_store.T))
    dB = upload(np.ascontiguousarray(b_store.T))
    c_store = np.zeros((n, m), a_store.dtype)
    dC = upload(c_store)
    cublas.gemm_ex(handle, "N", "N", m, n, k, 1.0, dA, precision, m, dB, precision, k, 0.0, dC, precision, m, "32F")
    raw = download(dC, c_store.shape, c_store.dtype).T
    got = raw.astype(np.float64) if precision == "R_16F" else bf16_value(raw)
    ref = a_val @ b_val
    # fp32 accumulation, then one rounding to the 16-bit output: half an output ulp
    # plus the accumulation error.
    bound = eps * np.abs(ref) + (k + 2) * np.finfo(np.float32).eps * (np.abs(a_val) @ np.abs(b_val)) + 1e-6
    assert (np.abs(got - ref) <= bound).all()


def test_hgemm(handle, rng):
    m, n, k = 16, 9, 8
    A = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    B = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    dA, dB = upload(np.ascontiguousarray(A.T)), upload(np.ascontiguousarray(B.T))
    dC = upload(np.zeros((n, m), np.float16))
    cublas.hgemm(handle, "N", "N", m, n, k, 1.0, dA, m, dB, k, 0.0, dC, m)
    got = download(dC, (n, m), np.float16).T.astype(np.float64)
    ref = A.astype(np.float64) @ B
    # float16 accumulation (at most k roundings of partial sums below 8 in size)
    assert (np.abs(got - ref) <= (k + 1) * np.finfo(np.float16).eps * (np.abs(A) @ np.abs(B)) + 1e-3).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_rowmajor_helper(handle, rng, dtype, trans_a, trans_b):
    """Row-major C = op(A) @ op(B) with transposed views, as the tensor layer calls it."""
    batch, m, n, k = 3, 7, 10, 5
    A = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k)).astype(np.float32)
    B = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(np.float32)
    if dtype == "bfloat16":
        a_store, b_store = bf16_bits(A), bf16_bits(B)
        a_val, b_val, out_dtype, eps = bf16_value(a_store), bf16_value(b_store), np.uint16, 2.0 ** -8
    else:
        a_store, b_store = A.astype(dtype), B.astype(dtype)
        a_val, b_val, out_dtype, eps = a_store.astype(np.float64), b_store.astype(np.float64), dtype, \
            np.finfo(dtype).eps
    dA, dB = upload(a_store), upload(b_store)
    c_store = np.zeros((batch, m, n), out_dtype)
    dC = upload(c_store)
    gemm_rowmajor(handle, dA, dB, dC, m, n, k, dtype=dtype, lda=A.shape[2], ldb=B.shape[2], ldc=n,
                  trans_a=trans_a, trans_b=trans_b, batch=batch, stride_a=A[0].size, stride_b=B[0].size,
                  stride_c=m * n)
    raw = download(dC, c_store.shape, c_store.dtype)
    got = bf16_value(raw) if dtype == "bfloat16" else raw.astype(np.float64)
    opA = a_val.transpose(0, 2, 1) if trans_a else a_val
    opB = b_val.transpose(0, 2, 1) if trans_b else b_val
    ref = opA @ opB
    bound = eps * np.abs(ref) + (k + 2) * np.finfo(np.float32).eps * (np.abs(opA) @ np.abs(opB)) + 1e-6
    assert (np.abs(got - ref) <= bound).all()


def test_tf32_is_opt_in(handle, rng, driver):
    if os.environ.get("NVIDIA_TF32_OVERRIDE"):
        pytest.skip("NVIDIA_TF32_OVERRIDE changes what the default math mode does")
    # Large enough that cuBLAS picks tensor-core kernels once TF32 is allowed.
    m = n = k = 64 if driver.kind == "emu" else 256
    A = rng.standard_normal((m, k)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    dA, dB, dC = upload(A), upload(B), upload(np.zeros((m, n), np.float32))
    exact = A.astype(np.float64) @ B
    out = np.zeros((m, n), np.float32)
    gemm_rowmajor(handle, dA, dB, dC, m, n, k, dtype=np.float32, lda=k, ldb=n, ldc=n)
    cuda.memcpy_dtoh(out, dC)
    fp32_err = np.abs(out - exact).max()
    gemm_rowmajor(handle, dA, dB, dC, m, n, k, dtype=np.float32, lda=k, ldb=n, ldc=n, tf32=True)
    cuda.memcpy_dtoh(out, dC)
    tf32_err = np.abs(out - exact).max()
    assert handle.math_mode == 0                        # restored after the call
    assert tf32_err > 10 * fp32_err                     # TF32 keeps 10 mantissa bits, not 23
    assert tf32_err < 2.0 ** -9 * (np.abs(A) @ np.abs(B)).max() * 2


def test_level1_and_2(handle, rng):
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = upload(x), upload(y)
    dot = cublas.sdot(handle, n, dx, 1, dy, 1)
    assert abs(dot - np.dot(x.astype(np.float64), y)) <= n * np.finfo(np.float32).eps * np.dot(abs(x), abs(y))
    cublas.saxpy(handle, n // 2, 3.0, dx, 2, dy, 2)       # every other element
    got = download(dy, y.shape, y.dtype)
    expect = y.astype(np.float64).copy()
    expect[::2] += 3.0 * x[::2]
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    m, cols = 31, 17
    A = rng.standard_normal((m, cols)).astype(np.float32)
    v = rng.standard_normal(m).astype(np.float32)
    w = np.full(cols, np.nan, np.float32)
    dA, dv, dw = upload(col_major(A, m)), upload(v), upload(w)
    cublas.sgemv(handle, "T", m, cols, 1.0, dA, m, dv, 1, 0.0, dw, 1)
    np.testing.assert_allclose(download(dw, w.shape, w.dtype), A.T.astype(np.float64) @ v,
                               rtol=1e-5, atol=1e-5)


def test_runs_in_order_on_the_handles_stream(driver, rng):
    """A kernel, then a gemm, then a copy, all on one stream held shut: nothing runs early,
    and the gemm sees the kernel's output."""
    stream = cuda.Stream(non_blocking=True)
    handle = cublas.Handle(stream)
    m = n = k = 24
    dA, dB, dC = cuda.mem_alloc(4 * m * k), cuda.mem_alloc(4 * k * n), cuda.mem_alloc(4 * m * n)
    fill = kernels.module("fill").get_function("fill_f32")
    fill.launch(1, 32, (dA, 0.0, 1), stream=stream)               # warm: kernel and gemm once
    cublas.sgemm(handle, "N", "N", m, n, k, 1.0, dA, m, dB, k, 0.0, dC, m)
    stream.synchronize()
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(20))
    fill.launch(4, 128, (dA, 2.0, m * k), stream=stream)
    fill.launch(4, 128, (dB, 0.5, k * n), stream=stream)
    cublas.sgemm(handle, "N", "N", m, n, k, 1.0, dA, m, dB, k, 0.0, dC, m)
    out = cuda.pinned_empty(m * n, np.float32)
    out[:] = np.nan
    cuda.memcpy_dtoh_async(out, dC, stream)
    assert stream.query() is False and np.isnan(out).all()
    gate.set()
    stream.synchronize()
    np.testing.assert_array_equal(out, np.full(m * n, k * 1.0, np.float32))


def test_argument_errors(handle):
    d = cuda.mem_alloc(4 * 64)
    with pytest.raises(cublas.CublasError) as info:
        cublas.sgemm(handle, "N", "N", 8, 4, 4, 1.0, d, 7, d, 4, 0.0, d, 8)      # lda < m
    assert info.value.name == "CUBLAS_STATUS_INVALID_VALUE" and info.value.description
    with pytest.raises(cublas.CublasError) as info:
        cublas.sgemm(handle, "T", "N", 8, 4, 5, 1.0, d, 4, d, 5, 0.0, d, 8)      # lda < k for op T
    assert info.value.name == "CUBLAS_STATUS_INVALID_VALUE"
    with pytest.raises(cublas.CublasError) as info:
        cublas.sgemm(handle, "N", "N", -1, 4, 4, 1.0, d, 4, d, 4, 0.0, d, 4)
    assert info.value.name == "CUBLAS_STATUS_INVALID_VALUE"
    with pytest.raises(ValueError, match="transpose flag"):
        cublas.sgemm(handle, "X", "N", 1, 1, 1, 1.0, d, 1, d, 1, 0.0, d, 1)
    cublas.sgemm(handle, "N", "N", 4, 4, 4, 1.0, d, 4, d, 4, 0.0, d, 4)       # the handle still works
    cuda.synchronize()


def test_handle_basics(handle):
    assert handle.version >= 11000
    handle.math_mode = "TF32_TENSOR_OP_MATH"
    assert handle.math_mode == 3
    handle.math_mode = 0
    assert cublas.get_handle() is cublas.get_handle()          # one per device and thread
    s = cuda.Stream()
    assert cublas.get_handle(s).stream is s                     # it follows the caller's stream


def _real_cublas_or_skip():
    try:
        return cublas.load_real()
    except Exception as e:
        pytest.skip(f"the gpu extra (nvidia-cublas) is not installed: {e}")


def test_every_bound_symbol_exists_in_the_real_library():
    lib = _real_cublas_or_skip()
    missing = sorted(set(cublas.PROTOTYPES) - set(lib.bound()))
    assert not missing, f"not exported by {lib.description}: {missing}"
    assert lib.status_name(7) == "CUBLAS_STATUS_INVALID_VALUE"


def test_prototypes_match_cublas_api_h():
    _real_cublas_or_skip()
    from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (only with the gpu extra)
    header = pathlib.Path(find_nvidia_header_directory("cublas")) / "cublas_api.h"
    text = header.read_text()
    for name, (_, argtypes) in cublas.PROTOTYPES.items():
        m = re.search(rf"\bCUBLASWINAPI\s+{name}\s*\(([^;]*?)\)\s*;", text, re.S)
        assert m, f"{name} not declared in cublas_api.h"
        count = len([a for a in m.group(1).split(",") if a.strip() not in ("", "void")])
        assert count == len(argtypes), f"{name}: header has {count} arguments, table {len(argtypes)}"


def test_matrix_outside_its_allocation_faults_like_a_kernel(driver):
    if driver.kind != "emu":
        pytest.skip("on a real GPU this corrupts memory or faults at the hardware's discretion")
    handle = cublas.Handle()
    small = cuda.mem_alloc(4 * 16)
    cublas.sgemm(handle, "N", "N", 8, 8, 8, 1.0, small, 8, small, 8, 0.0, small, 8)   # needs 256 bytes each
    with pytest.raises(cuda.CudaError) as info:
        cuda.synchronize()
    assert info.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS" and "cuBLAS" in info.value.details

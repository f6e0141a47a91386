"""Prepared launches (Function.prepare): the same results and the same errors as
Function.launch, with the configuration checked once and the argument buffer reused."""
import numpy as np
import pytest
from helpers.memory import download, upload

from lowlevel import cuda, kernels, trace


def _saxpy():
    return kernels.module("saxpy").get_function("saxpy")       # (f32 a, u64 x, u64 y, u64 n)


def _launch_error(fn):
    """(type, message) of the error fn() raises."""
    with pytest.raises((TypeError, ValueError, OverflowError)) as info:
        fn()
    return type(info.value), str(info.value)


def test_a_prepared_launch_computes_what_launch_does_call_after_call(driver, rng):
    run = _saxpy().prepare(grid=4, block=128)
    for n in (1000, 17, 0, 513):                         # new values in the same buffer each time
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        dx, dy = upload(x), upload(y)
        alpha = float(rng.standard_normal())
        run(alpha, dx.ptr, dy.ptr, n)
        expected = (np.float64(np.float32(alpha)) * x + y).astype(np.float32)
        np.testing.assert_array_equal(download(dy, n), expected)


def test_values_that_are_not_plain_numbers_pack_as_launch_packs_them(driver, rng):
    """A DeviceAllocation, numpy scalars: the general packing, in the prepared buffer."""
    n = 300
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = upload(x), upload(y)
    _saxpy().prepare(2, 256)(np.float32(3.0), dx, dy, np.uint64(n))
    np.testing.assert_array_equal(download(dy, n), (3.0 * x.astype(np.float64) + y).astype(np.float32))


def test_a_prepared_launch_runs_on_the_stream_it_is_given(driver, rng):
    stream = cuda.Stream(non_blocking=True)
    n = 64
    out = cuda.mem_alloc(4 * n)
    fill = kernels.module("fill").get_function("fill_f32").prepare(1, 64)
    value = float(np.float32(rng.standard_normal()))
    fill(out.ptr, value, n, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(download(out, n), np.full(n, value, np.float32))


BAD_ARGUMENTS = [
    ("too few", (1.0, 0, 0)),
    ("a float for a pointer", (1.0, 1.5, 0, 4)),
    ("a pointer past 64 bits", (1.0, 1 << 64, 0, 4)),
    ("a count past 64 bits", (1.0, 0, 0, 1 << 64)),
    ("a float32 overflow", (1e39, 0, 0, 4)),
    ("an int that overflows float32", (1 << 200, 0, 0, 4)),
    ("a float64 for a .f32", (np.float64(1.0), 0, 0, 4)),
    ("a string", (1.0, "x", 0, 4)),
    ("None", (None, 0, 0, 4)),
]


@pytest.mark.parametrize("args", [a for _, a in BAD_ARGUMENTS], ids=[i for i, _ in BAD_ARGUMENTS])
def test_bad_arguments_raise_exactly_what_launch_raises(driver, args):
    f = _saxpy()
    expected = _launch_error(lambda: f.launch(1, 32, args))
    assert _launch_error(lambda: f.prepare(1, 32)(*args)) == expected
    assert "saxpy" in expected[1]


def test_values_launch_accepts_are_accepted(driver):
    """A negative int for a .u64 (nvcc declares C's long long so), NaN and inf for a .f32:
    packed as launch packs them (the kernel runs on n = 0 elements, so nothing is touched)."""
    f = _saxpy().prepare(1, 32)
    for args in ((float("nan"), 0, 0, 0), (float("inf"), 0, 0, 0), (1.0, -8, 0, 0), (1, 0, 0, 0)):
        f(*args)
    cuda.synchronize()


@pytest.mark.parametrize("grid, block", [(0, 32), (1, 0), ((1, 2, 3, 4), 32), (1.5, 32), (1 << 32, 32)])
def test_bad_configurations_are_refused_at_prepare_as_launch_refuses_them(driver, grid, block):
    f = _saxpy()
    expected = _launch_error(lambda: f.launch(grid, block, (1.0, 0, 0, 0)))
    assert _launch_error(lambda: f.prepare(grid, block)) == expected


def test_a_bad_stream_is_refused(driver):
    run = _saxpy().prepare(1, 32)
    with pytest.raises(TypeError, match="saxpy: stream must be a Stream or None"):
        run(1.0, 0, 0, 0, stream=7)


def test_a_driver_error_is_a_cuda_error(driver):
    """A block the device refuses (over 1024 threads) fails at the launch, as launch does."""
    run = _saxpy().prepare(1, 2048)
    with pytest.raises(cuda.CudaError) as info:
        run(1.0, 0, 0, 0)
    assert info.value.function == "cuLaunchKernel" and info.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_a_prepared_launch_is_refused_after_a_context_reset(driver):
    run = _saxpy().prepare(1, 32)
    cuda.reset_device()
    with pytest.raises(cuda.ContextResetError):
        run(1.0, 0, 0, 0)


def test_a_traced_prepared_launch_is_reported_as_a_driver_call(driver):
    run = _saxpy().prepare(1, 32)
    with trace.Recorder() as rec:
        run(1.0, 0, 0, 0)
    assert [c["symbol"] for c in rec.calls] == ["cuLaunchKernel"]


# ---- cuBLAS: a prepared sgemm (cublas.PreparedSgemm) ---------------------------------------------
def _col_major(a: np.ndarray) -> np.ndarray:
    return np.asfortranarray(a).T.copy()            # the bytes of a, column-major


def test_a_prepared_sgemm_computes_what_sgemm_does_call_after_call(driver, rng):
    handle = cuda.cublas.Handle()
    m, n, k = 5, 3, 4
    gemm = cuda.cublas.PreparedSgemm(cuda.cublas.library(), "T", "N", m, n, k, 1.5, k, k, 0.0, m)
    for _ in range(3):                                    # new matrices at the same sizes
        a, b = rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        da, db = upload(_col_major(a)), upload(_col_major(b))
        dc = upload(np.full(m * n, np.nan, np.float32))  # beta = 0: NaN in C must not survive
        gemm(handle, da.ptr, db.ptr, dc.ptr)
        got = download(dc, m * n).reshape(n, m).T
        np.testing.assert_allclose(got, 1.5 * (a.T @ b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sizes", [(1 << 31, 2, 2, 1 << 31, 2, 2 << 31), (2, -1, 2, 2, 2, 2), (2, 2, 2, 2.5, 2, 2)])
def test_a_prepared_sgemm_refuses_what_sgemm_refuses(driver, sizes):
    """Sizes and leading dimensions are checked once, by the binding's own check: the same
    error the unprepared call raises (negative sizes are cuBLAS's to refuse, at the call)."""
    handle = cuda.cublas.Handle()
    m, n, k, lda, ldb, ldc = sizes

    def call():
        cuda.cublas.sgemm(handle, "N", "N", m, n, k, 1.0, 0, lda, 0, ldb, 0.0, 0, ldc)

    def prepared():
        cuda.cublas.PreparedSgemm(cuda.cublas.library(), "N", "N", m, n, k, 1.0, lda, ldb, 0.0, ldc)(handle, 0, 0, 0)
    assert _error_of(prepared) == _error_of(call)


def _error_of(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_a_prepared_sgemm_is_traced_and_follows_a_replaced_function(driver):
    """While a trace runs the call goes through the checked binding (reported); after it,
    and after the C function was replaced, the call binds the function in use."""
    handle = cuda.cublas.Handle()
    gemm = cuda.cublas.PreparedSgemm(cuda.cublas.library(), "N", "N", 2, 2, 2, 1.0, 2, 2, 0.0, 2)
    dc = upload(np.zeros(4, np.float32))
    da = upload(np.ones(4, np.float32))
    with trace.Recorder() as rec:
        gemm(handle, da.ptr, da.ptr, dc.ptr)
    assert [c["symbol"] for c in rec.calls] == ["cublasSgemm_v2"]
    gemm(handle, da.ptr, da.ptr, dc.ptr)                 # bound now
    np.testing.assert_array_equal(download(dc, 4), np.full(4, 2.0, np.float32))


def test_a_prepared_sgemm_refuses_a_handle_from_before_a_reset(driver):
    handle = cuda.cublas.Handle()
    gemm = cuda.cublas.PreparedSgemm(cuda.cublas.library(), "N", "N", 2, 2, 2, 1.0, 2, 2, 0.0, 2)
    d = upload(np.ones(4, np.float32))
    gemm(handle, d.ptr, d.ptr, d.ptr)
    cuda.reset_device()
    with pytest.raises(cuda.ContextResetError, match="Handle belongs to a context that was reset"):
        gemm(handle, 0, 0, 0)

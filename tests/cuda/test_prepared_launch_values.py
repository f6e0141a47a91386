"""What a prepared launch hands the C function: every configuration value exactly (those a
C int cannot hold too: they pass as C unsigned ints, the others as Python ints), the
kernel's and the stream's 64-bit handles, the parameter array; and the same errors as
Function.launch for a configuration the device refuses, from one thread or several."""
import ctypes
import threading

import numpy as np
import pytest
from helpers.memory import download, upload

from lowlevel import cuda, kernels
from lowlevel.backends import ptx
from lowlevel.capi.prototypes import PROTOTYPES, CUresult


def _saxpy():
    return kernels.module("saxpy").get_function("saxpy")       # (f32 a, u64 x, u64 y, u64 n)


class _Recorder:
    """cuLaunchKernel replaced, while in use, by a C callback typed as cuLaunchKernel is,
    that records what it receives (the four saxpy values read through kernelParams)."""

    def __init__(self, drv):
        self.drv, self.calls = drv, []
        kind = ctypes.CFUNCTYPE(CUresult, *PROTOTYPES["cuLaunchKernel"][1])
        self.cfunc = kind(self._record)

    def _record(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        p = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        alpha = ctypes.cast(p[0], ctypes.POINTER(ctypes.c_float))[0]
        x, y, n = (ctypes.cast(p[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in (1, 2, 3))
        self.calls.append((f, (gx, gy, gz), (bx, by, bz), shared, stream or 0, (alpha, x, y, n), extra))
        return 0

    def __enter__(self):
        self.saved = self.drv.cuLaunchKernel.cfunc
        self.drv.cuLaunchKernel.cfunc = self.cfunc
        return self

    def __exit__(self, *exc):
        self.drv.cuLaunchKernel.cfunc = self.saved
        return False


@pytest.mark.parametrize("grid, block, shared", [
    ((1 << 31, 2, 3), (4, 2, 1), 0),                     # grid.x: past a C int
    (((1 << 32) - 1, 1, (1 << 32) - 1), 32, (1 << 31) + 8),   # the largest C unsigned ints
    ((7, 65535, 1), (1024, 1, 1), 48 << 10),              # all below 2**31: Python ints
])
def test_the_c_function_receives_every_value_exactly(driver, grid, block, shared):
    f = _saxpy()
    run = f.prepare(grid, block, shared_mem=shared)
    stream = cuda.Stream()
    x, y = (1 << 40) + 256, (1 << 47) + 512              # 64-bit values, not truncated to 32
    with _Recorder(driver) as rec:
        run(2.5, x, y, (1 << 33) + 1, stream=stream)      # the first call binds the C function
        run(0.5, y, x, 3)                                  # the bound one, legacy stream
    dims = lambda v: (*((v,) if isinstance(v, int) else v), 1, 1)[:3]       # noqa: E731
    expected = [(f.handle, dims(grid), dims(block), shared, stream.handle, (2.5, x, y, (1 << 33) + 1), None),
                (f.handle, dims(grid), dims(block), shared, 0, (0.5, y, x, 3), None)]
    assert rec.calls == expected


@pytest.mark.parametrize("grid, block, shared", [(1 << 31, 32, 0), ((1, 65536), 32, 0), ((1 << 32) - 1, 32, 0),
                                                 (1, 32, 1 << 31), (1, (1, 1, 65), 0)])
def test_a_configuration_the_device_refuses_fails_as_launch_fails(driver, grid, block, shared):
    """The driver's error and its detail (which value, as the driver received it)."""
    f = _saxpy()
    errors = []
    for call in (lambda: f.launch(grid, block, (1.0, 0, 0, 0), shared_mem=shared),
                 lambda: f.prepare(grid, block, shared_mem=shared)(1.0, 0, 0, 0)):
        with pytest.raises(cuda.CudaError) as info:
            call()
        errors.append((info.value.name, info.value.function, str(info.value)))
    assert errors[0] == errors[1] and errors[0][:2] == ("CUDA_ERROR_INVALID_VALUE", "cuLaunchKernel")


@pytest.mark.parametrize("args, message", [
    ((1.0, 0, 0, 1 << 64), "saxpy: parameter 3 (n"),
    ((1.0, -1 << 64, 0, 4), "saxpy: parameter 1 (x"),
    ((1e39, 0, 0, 4), "saxpy: parameter 0 (a"),
])
def test_an_argument_out_of_range_names_the_kernel_and_the_parameter(driver, args, message):
    run = _saxpy().prepare(1, 32)
    run(1.0, 0, 0, 0)                                 # bound: the out-of-range value takes the fast path first
    with pytest.raises((OverflowError, ValueError)) as info:
        run(*args)
    assert str(info.value).startswith(message)


def test_concurrent_launches_from_two_threads_each_compute_their_own(driver, rng):
    """One prepared launch, two threads each on a stream of its own, many calls (through
    __call__ and run_own): every result is its own thread's (a call that finds the buffer
    in use packs its own)."""
    run = _saxpy().prepare(1, 64)
    n, rounds = 64, 40
    inputs = [[(np.float32(rng.standard_normal()), rng.standard_normal(n).astype(np.float32),
                rng.standard_normal(n).astype(np.float32)) for _ in range(rounds)] for _ in range(2)]
    results, errors = [[None] * rounds for _ in range(2)], []

    def work(t: int) -> None:
        try:
            stream = cuda.Stream()
            for i, (alpha, x, y) in enumerate(inputs[t]):
                dx, dy = upload(x), upload(y)
                if i % 2:
                    run(float(alpha), dx.ptr, dy.ptr, n, stream=stream)
                else:                           # the backend's way in: run_own
                    run.run_own(stream.handle, (float(alpha), dx.ptr, dy.ptr, n))
                stream.synchronize()
                results[t][i] = download(dy, n)
        except Exception as e:                  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for t in range(2):
        for (alpha, x, y), got in zip(inputs[t], results[t]):
            np.testing.assert_array_equal(got, (np.float64(alpha) * x + y).astype(np.float32))


# ---- run_own: the backend's own values (not screened by type, still range-checked) ------------
def _saxpy_case(rng, n: int):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    return x, y, upload(x), upload(y)


def _add_f32():
    return ptx.module("elementwise_f32").get_function("add_f32")     # (u64 out, u64 a, u64 b, u64 n)


def test_run_own_repacks_after_anything_else_wrote_the_buffer(driver, rng):
    """Integer values equal to the last run_own's are not packed again; anything else that
    wrote the buffer (a call through run_on, a refused value half written) makes the next
    run_own with those same values pack them again."""
    run, n = _add_f32().prepare(1, 64), 64
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    da, db = upload(a), upload(b)
    outs = [upload(np.full(n, np.nan, np.float32)) for _ in range(4)]
    mine = (outs[0].ptr, da.ptr, db.ptr, n)
    nan = np.full(n, np.nan, np.float32)

    def a_plus_b_into_outs0():
        cuda.memcpy_htod(outs[0], nan)
        run.run_own(0, mine)
        cuda.synchronize()
        np.testing.assert_array_equal(download(outs[0], n), a + b)

    a_plus_b_into_outs0()
    run(outs[1].ptr, db.ptr, db.ptr, np.uint64(n))                # run_on (through pack_value): b + b
    a_plus_b_into_outs0()
    run(outs[1].ptr, db.ptr, db.ptr, n)                           # run_on (struct): b + b
    a_plus_b_into_outs0()
    with pytest.raises(ValueError, match=r"add_f32: parameter 3 \(n"):
        run.run_own(0, (outs[2].ptr, db.ptr, db.ptr, 1 << 64))    # out, a, b written; n refused
    a_plus_b_into_outs0()
    run.run_own(0, (outs[3].ptr, da.ptr, db.ptr, n))
    cuda.synchronize()
    np.testing.assert_array_equal(download(outs[1], n), b + b)
    assert np.isnan(download(outs[2], n)).all()                   # the refused launch never ran
    np.testing.assert_array_equal(download(outs[3], n), a + b)


def test_run_own_packs_the_sign_of_a_zero_that_compares_equal(driver):
    """0.0 == -0.0: a float value is packed at every call (its bytes, not its equality)."""
    run, n = _saxpy().prepare(1, 32), 32
    ones, zeros = upload(np.ones(n, np.float32)), np.full(n, -0.0, np.float32)
    y = upload(zeros)
    signs = []
    for a in (0.0, -0.0, 0.0):
        cuda.memcpy_htod(y, zeros)
        run.run_own(0, (a, ones.ptr, y.ptr, n))                    # a * 1 + -0.0: the sign of a
        cuda.synchronize()
        signs.append(bool(np.signbit(download(y, n)).all()))
    assert signs == [False, True, False]


@pytest.mark.parametrize("values", [v for _, v in [
    ("a float32 overflow", (1e39, 0, 0, 4)), ("a pointer past 64 bits", (1.0, 1 << 64, 0, 4)),
    ("a negative count past 64 bits", (1.0, 0, 0, -1 << 64)), ("too few", (1.0, 0, 0))]])
def test_run_own_refuses_what_launch_refuses_with_the_same_error(driver, values):
    f = _saxpy()
    expected = _error(lambda: f.launch(1, 32, values))
    run = f.prepare(1, 32)
    run.run_own(0, (1.0, 0, 0, 0))
    assert _error(lambda: run.run_own(0, values)) == expected and "saxpy" in expected[1]


def _error(fn):
    with pytest.raises((TypeError, ValueError, OverflowError)) as info:
        fn()
    return type(info.value), str(info.value)


def test_a_prepared_sgemm_hands_cublas_every_value_exactly(driver):
    """The C ints (flags, sizes, leading dimensions up to 2**31 - 1) and the 64-bit handle
    and matrix addresses, as a C function typed as cublasSgemm_v2 receives them."""
    lib = cuda.cublas.library()
    restype, argtypes = cuda.cublas.PROTOTYPES["cublasSgemm_v2"]
    calls = []

    def record(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        scalars = [ctypes.cast(p, ctypes.POINTER(ctypes.c_float))[0] for p in (alpha, beta)]
        calls.append((h, ta, tb, m, n, k, scalars, a, lda, b, ldb, c, ldc))
        return 0
    fn = ctypes.CFUNCTYPE(restype, *argtypes)(record)
    handle = cuda.cublas.Handle()
    big = (1 << 31) - 1
    gemm = cuda.cublas.PreparedSgemm(lib, "T", "N", 3, 2, 5, 1.5, big, big - 1, -2.0, big - 2)
    saved = lib.c_function("cublasSgemm_v2")
    lib.replace_function("cublasSgemm_v2", fn)
    # more addresses than the prepared call keeps C pointers for, repeats, and NULL
    addresses = [((1 << 40) + 16 * i, (1 << 44) + 32 * i, (1 << 47) + 64 * i) for i in range(40)]
    addresses += addresses[:3] + [(16, 32, 64), (0, 0, 0), (0, 0, 0), addresses[0]]
    try:
        for A, B, C in addresses:
            gemm(handle, A, B, C)           # the first call binds the replaced function
    finally:
        lib.replace_function("cublasSgemm_v2", saved)
    ops = cuda.cublas.OPERATION
    assert calls == [(handle.handle, ops["CUBLAS_OP_T"], ops["CUBLAS_OP_N"], 3, 2, 5, [1.5, -2.0], A or None, big,
                      B or None, big - 1, C or None, big - 2) for A, B, C in addresses]

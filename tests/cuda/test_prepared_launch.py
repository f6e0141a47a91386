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

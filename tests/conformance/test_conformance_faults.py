"""Conformance: compiled kernels that fail the way kernels fail on a GPU. A bad address, a
__trap() or a failed device assert() aborts the launch; the error surfaces at the next
synchronising call, stays (sticky) until the device is reset, and after the reset work runs
again. Same builds and drivers as the other conformance files."""
import numpy as np
import pytest

from lowlevel import cuda
from conformance_support import download, upload

FAULTS = r"""
extern "C" __global__ void store_through(unsigned long long address, int n, int* ok) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ok[i] = i;
    if (i == n / 2) *(volatile int*)address = 42;      // one thread stores to a bad address
}

extern "C" __global__ void trap_if(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] < 0) __trap();
}

extern "C" __global__ void double_it(const int* x, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
"""

# Device assert(): nvcc takes it from <assert.h>; NVRTC has no <assert.h> but declares what
# assert() expands to, __assertfail(message, file, line, function, char size).
ASSERT = r"""
#ifdef __CUDACC_RTC__
#define DEVICE_ASSERT(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#else
#include <assert.h>
#define DEVICE_ASSERT(e) assert(e)
#endif

extern "C" __global__ void assert_positive(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) DEVICE_ASSERT(x[i] > 0);
}
"""

# An address no allocation can have: the first page is never mapped (NULL + 16).
BAD_ADDRESS = 16


def check_sticky_then_recover(build, expected_names):
    """The next synchronising call fails with one of `expected_names`, the error sticks,
    and after reset_device a fresh module runs correctly."""
    with pytest.raises(cuda.CudaError) as first:
        cuda.synchronize()
    assert first.value.name in expected_names, first.value
    with pytest.raises(cuda.CudaError) as again:             # sticky: later calls fail too
        cuda.mem_alloc(64)
    assert again.value.name == first.value.name
    cuda.reset_device()
    mod = build.load(FAULTS, "faults")                        # everything made before is gone
    n = 300
    x = np.arange(n, dtype=np.int32)
    y = cuda.mem_alloc(4 * n)
    mod.get_function("double_it").launch(-(-n // 128), 128, (upload(x), y, n))
    np.testing.assert_array_equal(download(y, n, np.int32), 2 * x)


def test_bad_address_is_sticky_until_reset(driver, build, rng):
    f = build.load(FAULTS, "faults").get_function("store_through")
    n = int(rng.integers(100, 1000))
    ok = cuda.mem_alloc(4 * n)
    f.launch(-(-n // 64), 64, (BAD_ADDRESS, n, ok))          # returns: the fault is asynchronous
    check_sticky_then_recover(build, {"CUDA_ERROR_ILLEGAL_ADDRESS"})


def test_trap_aborts_the_launch(driver, build, rng):
    f = build.load(FAULTS, "faults").get_function("trap_if")
    n = int(rng.integers(100, 1000))
    x = rng.integers(0, 100, size=n).astype(np.int32)
    x[int(rng.integers(0, n))] = -1
    f.launch(-(-n // 64), 64, (upload(x), n))
    check_sticky_then_recover(build, {"CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION"})


def test_device_assert(driver, build, rng):
    f = build.load(ASSERT, "assert").get_function("assert_positive")
    n = int(rng.integers(100, 1000))
    x = rng.integers(1, 100, size=n).astype(np.int32)
    f.launch(-(-n // 64), 64, (upload(x), n))                # all positive: nothing happens
    cuda.synchronize()
    x[int(rng.integers(0, n))] = 0
    f.launch(-(-n // 64), 64, (upload(x), n))
    check_sticky_then_recover(build, {"CUDA_ERROR_ASSERT"})

"""Driver calls other CUDA clients make (cuda.core, numba-cuda) and lowlevel itself does not:
the context stack, created contexts, the primary context's state, memory pools, and
context-independent loading (cuLibrary*, cuKernel*). On every driver present.

The context-stack cases run on a thread of their own, which starts with no current
context, so lowlevel's own per-thread context is never disturbed.
"""
import ctypes
import threading

import numpy as np
import pytest

from lowlevel import cuda, kernels
from lowlevel.capi.constants import CURESULT, FUNCTION_ATTRIBUTE
from lowlevel.cuda.context import ensure_context

INVALID_CONTEXT, INVALID_VALUE = CURESULT["CUDA_ERROR_INVALID_CONTEXT"], CURESULT["CUDA_ERROR_INVALID_VALUE"]
USED_MEM_CURRENT, RELEASE_THRESHOLD, RESERVED_MEM_CURRENT = 7, 4, 5      # CUmemPool_attribute


def on_a_new_thread(work):
    """Run `work()` on a fresh thread (no current context there); re-raise what it raised."""
    failure = []

    def run():
        try:
            work()
        except BaseException as e:          # noqa: BLE001  (handed back to the test's thread)
            failure.append(e)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "the thread did not finish"
    if failure:
        raise failure[0]


def current_context(driver) -> int | None:
    handle = ctypes.c_void_p()
    driver.cuCtxGetCurrent(ctypes.byref(handle))
    return handle.value


def test_the_context_stack_pushes_pops_and_set_current_replaces_the_top(driver):
    def work():
        assert current_context(driver) is None
        popped = ctypes.c_void_p()
        assert driver.cuCtxPopCurrent.unchecked(ctypes.byref(popped)) == INVALID_CONTEXT   # an empty stack
        primary = ctypes.c_void_p()
        driver.cuDevicePrimaryCtxRetain(ctypes.byref(primary), 0)
        try:
            driver.cuCtxPushCurrent(primary)
            driver.cuCtxPushCurrent(primary)
            assert current_context(driver) == primary.value
            driver.cuCtxPopCurrent(ctypes.byref(popped))
            assert popped.value == primary.value and current_context(driver) == primary.value
            driver.cuCtxSetCurrent(None)                       # NULL pops the top
            assert current_context(driver) is None
            driver.cuCtxSetCurrent(primary)                    # on an empty stack: pushes
            assert current_context(driver) == primary.value
            driver.cuCtxPopCurrent(None)
            assert current_context(driver) is None
        finally:
            driver.cuDevicePrimaryCtxRelease(0)
    on_a_new_thread(work)


def test_a_created_context_is_current_computes_and_is_destroyed(driver, rng):
    def work():
        ctx = ctypes.c_void_p()
        driver.cuCtxCreate(ctypes.byref(ctx), None, 0, 0)
        try:
            assert current_context(driver) == ctx.value
            device, version = ctypes.c_int(-1), ctypes.c_uint()
            driver.cuCtxGetDevice(ctypes.byref(device))
            driver.cuCtxGetApiVersion(ctx, ctypes.byref(version))
            assert device.value == 0 and version.value >= 3020
            values = rng.integers(0, 2**32, 64, dtype=np.uint32)
            ptr, back = ctypes.c_uint64(), np.zeros(64, np.uint32)
            driver.cuMemAlloc(ctypes.byref(ptr), values.nbytes)
            driver.cuMemcpyHtoD(ptr, values.ctypes.data, values.nbytes)
            driver.cuMemcpyDtoH(back.ctypes.data, ptr, values.nbytes)
            driver.cuMemFree(ptr)
            np.testing.assert_array_equal(back, values)
        finally:
            driver.cuCtxDestroy(ctx)
        assert current_context(driver) is None                  # destroying the current one pops it
        bad = ctypes.c_void_p()
        assert driver.cuCtxCreate_v2.unchecked(ctypes.byref(bad), 0x1000, 0) == INVALID_VALUE   # not a CUctx_flags
    on_a_new_thread(work)


def test_the_primary_context_reports_its_state_and_keeps_its_flags(driver):
    cuda.mem_alloc(16)                     # lowlevel holds device 0's primary context
    flags, active = ctypes.c_uint(99), ctypes.c_int(-1)
    driver.cuDevicePrimaryCtxGetState(0, ctypes.byref(flags), ctypes.byref(active))
    assert active.value == 1
    before = flags.value
    try:
        driver.cuDevicePrimaryCtxSetFlags(0, 4)                # CU_CTX_SCHED_BLOCKING_SYNC
        driver.cuDevicePrimaryCtxGetState(0, ctypes.byref(flags), ctypes.byref(active))
        assert flags.value & 0x7 == 4
        assert driver.cuDevicePrimaryCtxSetFlags.unchecked(0, 3) == INVALID_VALUE         # no such schedule
    finally:
        driver.cuDevicePrimaryCtxSetFlags(0, before)


def test_a_pool_allocation_is_stream_ordered_memory_the_pool_counts(driver, rng):
    stream = cuda.Stream(non_blocking=True)
    pool, current = ctypes.c_void_p(), ctypes.c_void_p()
    driver.cuDeviceGetDefaultMemPool(ctypes.byref(pool), 0)
    driver.cuDeviceGetMemPool(ctypes.byref(current), 0)
    assert pool.value and current.value == pool.value
    threshold = ctypes.c_uint64(1 << 20)
    driver.cuMemPoolSetAttribute(pool, RELEASE_THRESHOLD, ctypes.byref(threshold))
    got = ctypes.c_uint64()
    driver.cuMemPoolGetAttribute(pool, RELEASE_THRESHOLD, ctypes.byref(got))
    assert got.value == 1 << 20
    n = int(rng.integers(1, 1 << 14))
    values = rng.standard_normal(n).astype(np.float32)
    ptr, back = ctypes.c_uint64(), np.full(n, np.nan, np.float32)
    driver.cuMemAllocFromPoolAsync(ctypes.byref(ptr), values.nbytes, pool, stream.handle)
    used, reserved = ctypes.c_uint64(), ctypes.c_uint64()
    driver.cuMemPoolGetAttribute(pool, USED_MEM_CURRENT, ctypes.byref(used))
    driver.cuMemPoolGetAttribute(pool, RESERVED_MEM_CURRENT, ctypes.byref(reserved))
    assert used.value >= values.nbytes and reserved.value >= used.value
    host = cuda.pinned_empty(n, np.float32)
    host[:] = values
    cuda.memcpy_htod_async(ptr.value, host, stream)
    cuda.memcpy_dtoh_async(back, ptr.value, stream)
    driver.cuMemFreeAsync(ptr, stream.handle)
    stream.synchronize()
    np.testing.assert_array_equal(back, values)
    assert driver.cuMemPoolGetAttribute.unchecked(pool, 999, ctypes.byref(got)) == INVALID_VALUE


def test_a_library_kernel_launches_as_a_function(driver, rng):
    ptx = kernels.ptx_source("vector_add").encode() + b"\0"
    library, kernel, function = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    cuda.mem_alloc(16)                     # a current context for the launch
    driver.cuLibraryLoadData(ctypes.byref(library), ptx, None, None, 0, None, None, 0)
    try:
        driver.cuLibraryGetKernel(ctypes.byref(kernel), library, b"vector_add")
        driver.cuKernelGetFunction(ctypes.byref(function), kernel)
        threads, direct = ctypes.c_int(), ctypes.c_int()
        attribute = FUNCTION_ATTRIBUTE["CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"]
        driver.cuKernelGetAttribute(ctypes.byref(threads), attribute, kernel, 0)
        driver.cuFuncGetAttribute(ctypes.byref(direct), attribute, function)
        assert threads.value == direct.value > 0
        driver.cuKernelSetCacheConfig(kernel, 1, 0)            # CU_FUNC_CACHE_PREFER_SHARED
        assert driver.cuKernelSetCacheConfig.unchecked(kernel, 7, 0) == INVALID_VALUE
        n = int(rng.integers(1, 5000))
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        da, db, dc = (cuda.mem_alloc(4 * n) for _ in range(3))
        cuda.memcpy_htod(da, a)
        cuda.memcpy_htod(db, b)
        cuda.memcpy_htod(dc, np.full(n, np.nan, np.float32))
        args = (ctypes.c_uint64(int(da)), ctypes.c_uint64(int(db)), ctypes.c_uint64(int(dc)), ctypes.c_int(n))
        pointers = (ctypes.c_void_p * 4)(*[ctypes.addressof(v) for v in args])
        driver.cuLaunchKernel(function, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None, pointers, None)
        c = np.empty(n, np.float32)
        cuda.memcpy_dtoh(c, dc)
        np.testing.assert_array_equal(c, a + b)
        missing = ctypes.c_void_p()
        code = driver.cuLibraryGetKernel.unchecked(ctypes.byref(missing), library, b"no_such_kernel")
        assert code == CURESULT["CUDA_ERROR_NOT_FOUND"]
    finally:
        driver.cuLibraryUnload(library)


@pytest.mark.parametrize("config", [0, 1, 2, 3])
def test_every_cache_config_is_taken(driver, config):
    f = kernels.module("vector_add").get_function("vector_add")
    driver.cuFuncSetCacheConfig(f.handle, config)


def test_profiler_start_and_stop_need_a_current_context(driver):
    ensure_context()
    driver.cuProfilerStart()               # numba-cuda's cuda.profile_start(): this thread's context
    driver.cuProfilerStop()

    def work():                            # a fresh thread has no current context
        for call in (driver.cuProfilerStart, driver.cuProfilerStop):
            with pytest.raises(cuda.CudaError) as caught:
                call()
            assert caught.value.code == INVALID_CONTEXT
    on_a_new_thread(work)

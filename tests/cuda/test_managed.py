"""Managed memory (host and device reach it), prefetch and advice (validated, recorded), and
page-locking numpy arrays in place, on every driver present."""
import ctypes

import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import cuda, kernels
from lowlevel.capi.constants import CURESULT
from lowlevel.capi.memory_constants import MEM_LOCATION_TYPE
from lowlevel.capi.structs import CUmemLocation


def test_host_and_kernel_share_managed_memory(driver, rng):
    n = int(rng.integers(1, 3000))
    a, b, c = (cuda.mem_alloc_managed(4 * n) for _ in range(3))
    ha, hb, hc = a.array(n, np.float32), b.array(n, np.float32), c.array(n, np.float32)
    ha[:] = rng.standard_normal(n)
    hb[:] = rng.standard_normal(n)
    hc[:] = np.nan
    add = kernels.module("vector_add").get_function("vector_add")
    add.launch(grid=(n + 255) // 256, block=256, args=(a, b, c, n))
    cuda.synchronize()                     # then the host may read what the kernel wrote
    np.testing.assert_array_equal(hc, ha + hb)
    info = cuda.pointer_attributes(c)
    assert info.is_managed and info.memory_type == "device" and info.device_pointer == c.ptr
    assert info.host_pointer is not None and info.range_size == 4 * n
    assert not cuda.pointer_attributes(cuda.mem_alloc(64)).is_managed
    # the host pointer is the device pointer (unified addressing)
    seen = cuda.pointer_attributes(hc.ctypes.data + 8)
    assert seen.is_managed and seen.device_pointer == c.ptr + 8 and seen.host_pointer == hc.ctypes.data + 8


def test_managed_memory_in_copies(driver, rng):
    host = rng.standard_normal(500).astype(np.float32)
    m = cuda.mem_alloc_managed(host.nbytes)
    cuda.memcpy_htod(m, host)
    np.testing.assert_array_equal(m.array(500, np.float32), host)
    back = poisoned(500)
    cuda.memcpy_dtoh(back, m)
    np.testing.assert_array_equal(back, host)


def test_alloc_managed_flags(driver):
    m = cuda.mem_alloc_managed(256, attach="host")
    assert cuda.pointer_attributes(m).is_managed
    out = ctypes.c_uint64()
    assert driver.cuMemAllocManaged.unchecked(ctypes.byref(out), 256, 0x4) == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    assert driver.cuMemAllocManaged.unchecked(ctypes.byref(out), 0, 0x1) == CURESULT["CUDA_ERROR_INVALID_VALUE"]


def test_prefetch_and_advice_are_recorded(driver):
    m = cuda.mem_alloc_managed(1 << 16)
    assert cuda.range_attribute(m, "LAST_PREFETCH_LOCATION") == -2        # never prefetched
    s = cuda.Stream()
    cuda.prefetch(m, 0, stream=s)
    assert cuda.range_attribute(m, "LAST_PREFETCH_LOCATION") == 0
    cuda.prefetch(m, "host", nbytes=1 << 15, stream=s)
    assert cuda.range_attribute(m, "LAST_PREFETCH_LOCATION", nbytes=1 << 15) == -1
    assert cuda.range_attribute(m, "LAST_PREFETCH_LOCATION") == -2        # mixed
    s.synchronize()
    cuda.advise(m, "SET_READ_MOSTLY")
    assert cuda.range_attribute(m, "READ_MOSTLY") == 1
    cuda.advise(m, "UNSET_READ_MOSTLY", nbytes=4096)
    assert cuda.range_attribute(m, "READ_MOSTLY") == 0
    cuda.advise(m, "SET_PREFERRED_LOCATION", "host")
    assert cuda.range_attribute(m, "PREFERRED_LOCATION") == -1
    cuda.advise(m, "SET_PREFERRED_LOCATION", 0)
    assert cuda.range_attribute(m, "PREFERRED_LOCATION") == 0
    cuda.advise(m, "SET_ACCESSED_BY", 0)
    assert cuda.range_attribute(m, "ACCESSED_BY") == [0]
    cuda.advise(m, "UNSET_ACCESSED_BY", 0)
    assert cuda.range_attribute(m, "ACCESSED_BY") == []


def _code(call, *args) -> str:
    return {v: k for k, v in CURESULT.items()}[call.unchecked(*args)]


def test_bad_prefetch_and_advice_are_refused(driver):
    m = cuda.mem_alloc_managed(8192)
    plain = cuda.mem_alloc(8192)
    device = CUmemLocation(MEM_LOCATION_TYPE["CU_MEM_LOCATION_TYPE_DEVICE"], 0)
    no_device = CUmemLocation(MEM_LOCATION_TYPE["CU_MEM_LOCATION_TYPE_DEVICE"], 99)
    bogus = CUmemLocation(77, 0)
    assert _code(driver.cuMemPrefetchAsync, m.ptr, 8192, no_device, 0, None) == "CUDA_ERROR_INVALID_DEVICE"
    assert _code(driver.cuMemPrefetchAsync, m.ptr, 8192, bogus, 0, None) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(driver.cuMemPrefetchAsync, m.ptr, 8192, device, 1, None) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(driver.cuMemPrefetchAsync, plain.ptr, 8192, device, 0, None) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(driver.cuMemAdvise, m.ptr, 8192, 99, device) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(driver.cuMemAdvise, m.ptr, 8192, 3, no_device) == "CUDA_ERROR_INVALID_DEVICE"
    assert _code(driver.cuMemAdvise, plain.ptr, 8192, 1, device) == "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(ValueError, match="unknown memory advice"):
        cuda.advise(m, "PLEASE_BE_FAST")
    cuda.synchronize()


def test_register_host_makes_copies_asynchronous(driver, rng):
    host = rng.standard_normal(1 << 14).astype(np.float32)
    dev = cuda.mem_alloc(host.nbytes)
    back = poisoned(host.shape)
    with cuda.register_host(back) as reg:
        info = cuda.pointer_attributes(back.ctypes.data)
        assert info.memory_type == "host" and info.host_pointer == back.ctypes.data
        assert info.range_start == reg.address and info.range_size == back.nbytes
        s = cuda.Stream()
        cuda.memcpy_htod_async(dev, host, s)
        cuda.memcpy_dtoh_async(back, dev, s)
        s.synchronize()
        np.testing.assert_array_equal(back, host)
        # registering it again, or a part of it, is refused
        code = driver.cuMemHostRegister.unchecked(back.ctypes.data + 64, 128, 0)
        assert code == CURESULT["CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"]
    assert cuda.pointer_attributes(back.ctypes.data).memory_type is None       # unregistered
    assert _code(driver.cuMemHostUnregister, back.ctypes.data) == "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"
    with pytest.raises(ValueError, match="contiguous"):
        cuda.register_host(np.zeros((4, 4))[:, ::2])


def test_device_pointer_of_pinned_memory(driver):
    """cuMemHostGetDevicePointer: where the device maps host memory, the address kernels use
    (with unified addressing, the host address itself)."""
    host = cuda.pinned_empty(256, np.float32)
    out = ctypes.c_uint64()
    code = driver.cuMemHostGetDevicePointer.unchecked(ctypes.byref(out), host.ctypes.data, 0)
    if cuda.GPU(0).attribute("CAN_MAP_HOST_MEMORY"):
        assert code == 0 and out.value == host.ctypes.data
    else:
        assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    plain = np.zeros(16)
    assert driver.cuMemHostGetDevicePointer.unchecked(ctypes.byref(out), plain.ctypes.data, 0) == \
        CURESULT["CUDA_ERROR_INVALID_VALUE"]

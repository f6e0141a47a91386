"""cuPointerGetAttribute(s): the kind, owner and range of an address, on every driver present."""
import ctypes

import numpy as np
import pytest

from lowlevel import cuda
from lowlevel.capi.constants import CURESULT
from lowlevel.capi.memory_constants import POINTER_ATTRIBUTE


def test_device_allocation(driver, rng):
    size = int(rng.integers(1, 1 << 16))
    dev = cuda.mem_alloc(size)
    offset = int(rng.integers(0, size))
    info = cuda.pointer_attributes(dev.ptr + offset)
    assert info.memory_type == "device"
    assert info.device_pointer == dev.ptr + offset
    assert info.host_pointer is None              # device memory has no host address
    assert (info.range_start, info.range_size) == (dev.ptr, size)
    assert info.device_ordinal == 0 and not info.is_managed and info.mapped
    ctx = ctypes.c_void_p()
    driver.cuCtxGetCurrent(ctypes.byref(ctx))
    assert info.context == ctx.value
    assert cuda.pointer_attribute(dev.ptr + offset, "RANGE_SIZE") == size
    assert cuda.pointer_attribute(dev, "CU_POINTER_ATTRIBUTE_MEMORY_TYPE") == 2    # CU_MEMORYTYPE_DEVICE


def test_buffer_ids_are_unique_and_never_reused(driver):
    a = cuda.mem_alloc(4096)
    first = cuda.pointer_attributes(a).buffer_id
    address = a.ptr
    a.free()
    b = cuda.mem_alloc(4096)            # often at the same address
    second = cuda.pointer_attributes(b).buffer_id
    assert first != 0 and second != 0 and first != second, (address, b.ptr)
    assert cuda.pointer_attribute(b.ptr + 100, "BUFFER_ID") == second


def test_pinned_host_memory(driver):
    host = cuda.pinned_empty(1000, np.float32)
    address = host.ctypes.data
    info = cuda.pointer_attributes(address + 40)
    assert info.memory_type == "host"
    assert info.host_pointer == address + 40
    assert info.range_start == address and info.range_size >= host.nbytes
    can_map = cuda.GPU(0).attribute("CAN_MAP_HOST_MEMORY")
    if can_map:                   # unified addressing: the same address on the device
        assert info.device_pointer == address + 40
    else:                         # the emulated device: kernels cannot reach host memory
        assert info.device_pointer is None
        with pytest.raises(cuda.CudaError) as e:
            cuda.pointer_attribute(address, "DEVICE_POINTER")
        assert e.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_unknown_pointer(driver):
    """cuPointerGetAttribute refuses memory it does not know; cuPointerGetAttributes answers
    with defaults instead."""
    plain = np.zeros(64, np.uint8)             # pageable memory the driver never saw
    for address in (plain.ctypes.data, 0x1234):
        with pytest.raises(cuda.CudaError) as e:
            cuda.pointer_attribute(address, "MEMORY_TYPE")
        assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
        info = cuda.pointer_attributes(address)
        assert info.memory_type is None and info.context is None and not info.is_managed


def test_host_pointer_of_device_memory_is_refused(driver):
    dev = cuda.mem_alloc(256)
    with pytest.raises(cuda.CudaError) as e:
        cuda.pointer_attribute(dev, "HOST_POINTER")
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"


def test_unknown_attribute(driver):
    dev = cuda.mem_alloc(256)
    out = ctypes.c_uint64()
    code = driver.cuPointerGetAttribute.unchecked(ctypes.byref(out), 999, dev.ptr)
    assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    numbers = (ctypes.c_int * 1)(999)
    data = (ctypes.c_void_p * 1)(ctypes.addressof(out))
    assert driver.cuPointerGetAttributes.unchecked(1, numbers, data, dev.ptr) == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    with pytest.raises(ValueError, match="unknown pointer attribute"):
        cuda.pointer_attribute(dev, "NO_SUCH_ATTRIBUTE")


def test_raw_attributes_array(driver, rng):
    """The C calling convention itself: an array of attributes, an array of out-pointers."""
    size = int(rng.integers(1, 10000))
    dev = cuda.mem_alloc(size)
    names = ["RANGE_SIZE", "RANGE_START_ADDR", "DEVICE_ORDINAL"]
    numbers = (ctypes.c_int * 3)(*(POINTER_ATTRIBUTE["CU_POINTER_ATTRIBUTE_" + n] for n in names))
    outs = [ctypes.c_size_t(7), ctypes.c_void_p(7), ctypes.c_int(7)]
    data = (ctypes.c_void_p * 3)(*(ctypes.addressof(o) for o in outs))
    driver.cuPointerGetAttributes(3, numbers, data, dev.ptr + size - 1)
    assert [o.value for o in outs] == [size, dev.ptr, 0]

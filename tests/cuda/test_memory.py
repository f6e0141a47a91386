"""Device memory, pinned memory, copies and memsets, on every driver present."""
import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import cuda


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64])
def test_round_trip(driver, rng, dtype):
    n = int(rng.integers(1, 5000))
    host = (rng.standard_normal(n) * 100).astype(dtype)
    dev = cuda.mem_alloc(host.nbytes)
    cuda.memcpy_htod(dev, host)
    back = poisoned(n, dtype)
    cuda.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, host)


def test_allocation_object(driver):
    dev = cuda.mem_alloc(1000)
    assert dev.size == 1000 and int(dev) == dev.ptr and dev.ptr != 0
    if driver.kind == "emu":
        assert dev.ptr >= 2**32, "emulated device addresses sit above 2^32 so truncation faults"
    dev.free()
    dev.free()          # a second free is a no-op, not a double free
    with pytest.raises(ValueError, match="freed"):
        cuda.memcpy_htod(dev, np.zeros(4, np.float32))


def test_device_to_device_and_offsets(driver, rng):
    host = rng.random(4096).astype(np.float32)
    a, b = cuda.mem_alloc(host.nbytes), cuda.mem_alloc(host.nbytes)
    cuda.memcpy_htod(a, host)
    cuda.memset_d8(b, 0, host.nbytes)
    cuda.memcpy_dtod(b.ptr + 1024, a.ptr, 2048)         # raw pointers with offsets work too
    back = poisoned(4096)
    cuda.memcpy_dtoh(back, b)
    expect = np.zeros(4096, np.float32)
    expect[256:768] = host[:512]
    np.testing.assert_array_equal(back, expect)


def test_memsets(driver, rng):
    dev = cuda.mem_alloc(4 * 1000)
    value = np.float32(rng.standard_normal())
    cuda.memset_d32(dev, value.view(np.uint32), 1000)
    back = poisoned(1000)
    cuda.memcpy_dtoh(back, dev)
    assert (back == value).all()
    cuda.memset_d8(dev, 0xAB, 4000)
    raw = np.zeros(4000, np.uint8)
    cuda.memcpy_dtoh(raw, dev)
    assert (raw == 0xAB).all()
    with pytest.raises(ValueError, match="byte"):
        cuda.memset_d8(dev, 256, 10)


def test_pinned_async_round_trip(driver, rng):
    n = 1 << 16
    stream = cuda.Stream(non_blocking=True)
    src = cuda.pinned_empty(n, np.float32)
    src[:] = rng.random(n, dtype=np.float32)
    dst = cuda.pinned_empty(n, np.float32)
    dst[:] = np.nan
    dev = cuda.mem_alloc(src.nbytes)
    cuda.memcpy_htod_async(dev, src, stream)
    cuda.memcpy_dtoh_async(dst, dev, stream)
    stream.synchronize()
    np.testing.assert_array_equal(dst, src)


def test_pageable_async_copy_stages_the_source(driver, rng):
    """From pageable memory, an async copy may return before it is done, so the driver
    stages the bytes: changing the source right after the call must not change the copy."""
    stream = cuda.Stream(non_blocking=True)
    gate = __import__("threading").Event()
    stream.add_callback(lambda: gate.wait(20))      # hold the stream so the copy is pending
    # (A real driver may instead wait for the stream to stage pageable bytes; the gate's
    # timeout then lets it through, and the copy must still hold the bytes of the call.)
    host = rng.random(1000).astype(np.float32)
    expect = host.copy()
    dev = cuda.mem_alloc(host.nbytes)
    cuda.memcpy_htod_async(dev, host, stream)
    host[:] = -1
    gate.set()
    stream.synchronize()
    back = poisoned(1000)
    cuda.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, expect)


def test_stream_ordered_allocation(driver, rng):
    stream = cuda.Stream(non_blocking=True)
    host = rng.random(256).astype(np.float32)
    dev = cuda.mem_alloc_async(host.nbytes, stream)
    cuda.memcpy_htod_async(dev, host, stream)
    back = cuda.pinned_empty(256, np.float32)
    cuda.memcpy_dtoh_async(back, dev, stream)
    dev.free()                                       # cuMemFreeAsync on the same stream
    stream.synchronize()
    np.testing.assert_array_equal(back, host)


def test_mem_get_info_tracks_allocations(driver):
    free0, total = cuda.mem_get_info()
    assert 0 < free0 <= total
    block = cuda.mem_alloc(64 << 20)
    free1, _ = cuda.mem_get_info()
    assert free1 <= free0 - (64 << 20) + (2 << 20)   # the driver may round up or keep a pool
    block.free()


def test_size_checks_before_the_driver(driver):
    dev = cuda.mem_alloc(16)
    with pytest.raises(ValueError, match="do not fit"):
        cuda.memcpy_htod(dev, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        cuda.memcpy_dtoh(np.zeros(5, np.float32), dev)
    with pytest.raises(ValueError, match="contiguous"):
        cuda.memcpy_htod(dev, np.zeros((4, 2), np.float32)[:, 0])
    with pytest.raises(ValueError, match="positive"):
        cuda.mem_alloc(0)


def test_out_of_range_raw_pointer_copy_is_invalid_value(driver):
    dev = cuda.mem_alloc(64)
    with pytest.raises(cuda.CudaError) as info:
        cuda.memcpy_htod(dev.ptr + 32, np.zeros(16, np.float32))   # 64 bytes from the middle
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert info.value.function == "cuMemcpyHtoD_v2"
    cuda.memcpy_htod(dev, np.zeros(16, np.float32))                # still usable afterwards

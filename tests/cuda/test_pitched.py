"""Pitched memory: cuMemAllocPitch, cuMemcpy2D/3D (host, device and pitched layouts, bounds
checked), cuMemsetD16 and cuMemsetD2D32, on every driver present."""
import ctypes

import numpy as np
import pytest
from helpers.memory import download, poisoned

from lowlevel import cuda
from lowlevel.capi.constants import CURESULT
from lowlevel.capi.memory_constants import MEMORY_TYPE
from lowlevel.capi.structs import CUDA_MEMCPY2D


def test_alloc_pitch_is_aligned_as_the_device_reports(driver, rng):
    width, height = int(rng.integers(1, 3000)), int(rng.integers(1, 50))
    a = cuda.alloc_pitch(width, height)
    alignment = cuda.GPU(0).attribute("TEXTURE_PITCH_ALIGNMENT")
    assert alignment > 0 and a.pitch % alignment == 0 and a.pitch >= width
    assert a.size == a.pitch * height
    assert cuda.pointer_attributes(a).range_size >= a.pitch * (height - 1) + width
    with pytest.raises(ValueError, match="element_size"):
        cuda.alloc_pitch(16, 4, element_size=3)
    out = (ctypes.c_uint64(), ctypes.c_size_t())
    code = driver.cuMemAllocPitch.unchecked(*map(ctypes.byref, out), 16, 4, 3)
    assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]


def test_2d_round_trip_through_pitched_memory(driver, rng):
    rows, cols = int(rng.integers(1, 40)), int(rng.integers(1, 300))
    host = rng.standard_normal((rows, cols)).astype(np.float32)
    dev = cuda.alloc_pitch(cols * 4, rows)
    cuda.memset_d8(dev, 0xFF, dev.size)
    cuda.copy_2d(dev, host)
    back = poisoned((rows, cols))
    cuda.copy_2d(back, dev)
    np.testing.assert_array_equal(back, host)
    # the padding between rows was not written
    raw = download(dev, dev.size, np.uint8).reshape(rows, dev.pitch)
    assert (raw[:, cols * 4:] == 0xFF).all()
    np.testing.assert_array_equal(raw[:, :cols * 4].copy().view(np.float32), host)


def test_2d_sub_rectangles_and_strided_views(driver, rng):
    """A window of a host array into an offset window of pitched memory, and back into a
    column slice of a wider array (its pitch is its row stride)."""
    host = rng.integers(0, 1 << 30, (20, 30)).astype(np.int32)
    dev = cuda.alloc_pitch(64 * 4, 32)
    cuda.memset_d32(dev, 0, dev.size // 4)
    cuda.copy_2d(dev, host[3:13, 5:25], dst_x=8 * 4, dst_y=2)
    wide = poisoned((12, 40), np.int32)
    cuda.copy_2d(wide[1:11, 7:27], dev, src_x=8 * 4, src_y=2)
    np.testing.assert_array_equal(wide[1:11, 7:27], host[3:13, 5:25])
    assert (wide[0] == poisoned(1, np.int32)[0]).all() and (wide[1:11, :7] == poisoned(1, np.int32)[0]).all()


def test_2d_device_to_device_async(driver, rng):
    host = rng.standard_normal((8, 50)).astype(np.float32)
    a, b = cuda.alloc_pitch(200, 8), cuda.alloc_pitch(400, 8)
    cuda.copy_2d(a, host)
    s = cuda.Stream()
    cuda.copy_2d(b, a, 200, 8, dst_x=100, stream=s)
    out = poisoned((8, 50))
    cuda.copy_2d(out, b, src_x=100, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, host)


def test_out_of_range_copies_are_refused(driver):
    dev = cuda.alloc_pitch(100, 10)
    host = np.zeros((11, 25), np.float32)
    with pytest.raises(ValueError, match="region"):
        cuda.copy_2d(dev, host)                     # 11 rows into 10
    with pytest.raises(ValueError, match="row"):
        cuda.copy_2d(host[:2], dev, src_x=dev.pitch - 4)
    # Past the Python checks, the raw struct: a pitch narrower than the row is refused, as
    # cuda.h documents; rows past the allocation's end the emulated driver refuses too
    # (whether libcuda checks that is not documented).
    c = CUDA_MEMCPY2D(WidthInBytes=100, Height=11, srcMemoryType=MEMORY_TYPE["CU_MEMORYTYPE_HOST"],
                      srcHost=host.ctypes.data, srcPitch=100, dstMemoryType=MEMORY_TYPE["CU_MEMORYTYPE_DEVICE"],
                      dstDevice=dev.ptr, dstPitch=dev.pitch)
    if driver.kind == "emu":
        assert driver.cuMemcpy2D.unchecked(ctypes.byref(c)) == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    c.Height, c.dstPitch = 2, 50                    # a pitch narrower than the row
    assert driver.cuMemcpy2D.unchecked(ctypes.byref(c)) == CURESULT["CUDA_ERROR_INVALID_VALUE"]
    cuda.synchronize()


def test_3d_round_trip(driver, rng):
    depth, rows, cols = 3, int(rng.integers(2, 9)), int(rng.integers(1, 70))
    host = rng.standard_normal((depth, rows, cols)).astype(np.float32)
    slice_rows = rows + 2                            # slices further apart than their rows
    dev = cuda.alloc_pitch(cols * 4, slice_rows * depth)
    cuda.copy_3d(dev, host, dst_height=slice_rows)
    back = poisoned((depth, rows, cols))
    cuda.copy_3d(back, dev, src_height=slice_rows, stream=cuda.Stream())
    cuda.synchronize()
    np.testing.assert_array_equal(back, host)
    raw = download(dev, dev.size, np.uint8).reshape(depth, slice_rows, dev.pitch)
    np.testing.assert_array_equal(raw[:, :rows, :cols * 4].copy().view(np.float32), host)
    with pytest.raises(ValueError, match="region"):
        cuda.copy_3d(dev, np.zeros((depth + 1, rows, cols), np.float32), dst_height=slice_rows)


def test_memset_d16_and_d2d32(driver, rng):
    dev = cuda.mem_alloc(2 * 1000)
    cuda.memset_d8(dev, 0, 2000)
    value = int(rng.integers(0, 1 << 16))
    cuda.memset_d16(dev.ptr + 2, value, 998)
    out = download(dev, 1000, np.uint16)
    assert out[0] == 0 and (out[1:999] == value).all() and out[999] == 0
    with pytest.raises(cuda.CudaError) as e:
        driver.cuMemsetD16(dev.ptr + 1, 1, 4)           # not 2-byte aligned
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
    p = cuda.alloc_pitch(40 * 4, 6)
    cuda.memset_d32(p, 0, p.size // 4)
    pattern = int(rng.integers(1, 1 << 32))
    cuda.memset_d2d32(p, pattern, 30, 5, stream=cuda.Stream())
    cuda.synchronize()
    grid = download(p, p.size // 4, np.uint32).reshape(6, p.pitch // 4)
    expect = np.zeros_like(grid)
    expect[:5, :30] = pattern
    np.testing.assert_array_equal(grid, expect)
    with pytest.raises(ValueError, match="do not fit"):
        cuda.memset_d2d32(p, 1, 30, 7)
    if driver.kind == "emu":        # the raw call too (libcuda's range check is not documented)
        with pytest.raises(cuda.CudaError) as e:
            driver.cuMemsetD2D32(p.ptr, p.pitch, 1, 30, 7)
        assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
        np.testing.assert_array_equal(download(p, p.size // 4, np.uint32).reshape(6, p.pitch // 4), expect)

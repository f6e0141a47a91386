"""Unified addressing as an H200 has it: managed and page-locked memory at one address for
the host and kernels, device memory unreadable by the host, every kernel access still
checked. On every driver present (the SIGSEGV checks: the emulated GPU, in a subprocess)."""
import ctypes
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from lowlevel import cuda, kernels
from lowlevel.capi.constants import CURESULT

PORTABLE, DEVICEMAP, WRITECOMBINED = 0x1, 0x2, 0x4
ROOT = Path(__file__).resolve().parents[3]


def _at(address: int, n: int) -> np.ndarray:
    """n float32 at a raw host address, as numba and ctypes users reach them."""
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(address))


def _add(a, b, c, n: int) -> None:
    add = kernels.module("vector_add").get_function("vector_add")
    add.launch(grid=(n + 255) // 256, block=256, args=(a, b, c, n))


def _host_alloc(driver, nbytes: int, flags: int) -> int:
    out = ctypes.c_void_p()
    driver.cuMemHostAlloc(ctypes.byref(out), nbytes, flags)
    return out.value


def _device_pointer(driver, host: int) -> int:
    out = ctypes.c_uint64()
    driver.cuMemHostGetDevicePointer(ctypes.byref(out), host, 0)
    return out.value


def _code(call, *args) -> str:
    return {v: k for k, v in CURESULT.items()}[call.unchecked(*args)]


def test_attributes_say_unified_and_mappable(driver):
    dev = cuda.GPU(0)
    assert dev.attribute("UNIFIED_ADDRESSING") == 1
    assert dev.attribute("CAN_MAP_HOST_MEMORY") == 1
    assert dev.attribute("CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM") == 1


def test_host_reads_kernel_writes_of_managed_memory_at_its_address(driver, rng):
    n = int(rng.integers(1, 5000))
    a, b, c = (cuda.mem_alloc_managed(4 * n) for _ in range(3))
    ha, hb, hc = _at(a.ptr, n), _at(b.ptr, n), _at(c.ptr, n)
    ha[:] = rng.standard_normal(n)                  # the host writes, the kernel reads
    hb[:] = rng.standard_normal(n)
    hc[:] = np.nan
    _add(a, b, c, n)
    cuda.synchronize()
    want = (ha.astype(np.float64) + hb.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(hc, want)


@pytest.mark.parametrize("how", ["cuMemAllocHost", "cuMemHostAlloc(0)", "cuMemHostAlloc(DEVICEMAP)",
                                 "cuMemHostAlloc(PORTABLE|WRITECOMBINED)", "cuMemHostRegister(DEVICEMAP)"])
def test_kernel_writes_page_locked_memory_at_the_host_address(driver, rng, how):
    n = int(rng.integers(1, 5000))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a, b = cuda.mem_alloc(4 * n), cuda.mem_alloc(4 * n)
    cuda.memcpy_htod(a, x)
    cuda.memcpy_htod(b, y)
    keep = None
    if how == "cuMemAllocHost":
        out = ctypes.c_void_p()
        driver.cuMemAllocHost(ctypes.byref(out), 4 * n)
        host = out.value
    elif how.startswith("cuMemHostAlloc"):
        flags = {"0": 0, "DEVICEMAP": DEVICEMAP, "PORTABLE|WRITECOMBINED": PORTABLE | WRITECOMBINED}[how[15:-1]]
        host = _host_alloc(driver, 4 * n, flags)
    else:
        keep = np.empty(n, np.float32)
        host = keep.ctypes.data
        driver.cuMemHostRegister(host, keep.nbytes, DEVICEMAP)
    try:
        out = _at(host, n)
        out[:] = np.nan
        dptr = _device_pointer(driver, host)
        assert dptr == host
        _add(a, b, dptr, n)
        cuda.synchronize()
        np.testing.assert_array_equal(out, (x.astype(np.float64) + y).astype(np.float32))
    finally:
        if keep is not None:
            driver.cuMemHostUnregister(host)
        else:
            driver.cuMemFreeHost(host)


def test_pointer_attributes_of_each_kind(driver, rng):
    n = int(rng.integers(1, 1 << 14))
    offset = int(rng.integers(0, n))
    dev = cuda.mem_alloc(n)
    info = cuda.pointer_attributes(dev.ptr + offset)
    assert info.memory_type == "device" and info.device_pointer == dev.ptr + offset
    assert info.host_pointer is None and not info.is_managed and info.mapped
    managed = cuda.mem_alloc_managed(n)
    info = cuda.pointer_attributes(managed.ptr + offset)
    assert info.memory_type == "device" and info.is_managed and info.mapped
    assert info.device_pointer == info.host_pointer == managed.ptr + offset
    pinned = _host_alloc(driver, n, DEVICEMAP)
    registered = np.zeros(n, np.uint8)
    driver.cuMemHostRegister(registered.ctypes.data, n, 0)
    try:
        for start in (pinned, registered.ctypes.data):
            info = cuda.pointer_attributes(start + offset)
            assert info.memory_type == "host" and not info.is_managed and info.mapped
            assert info.device_pointer == info.host_pointer == start + offset
            assert info.range_start == start and info.range_size >= n
    finally:
        driver.cuMemHostUnregister(registered.ctypes.data)
        driver.cuMemFreeHost(pinned)


def test_host_get_flags(driver, rng):
    # Unified addressing maps every page-locked allocation into every context: the driver
    # adds DEVICEMAP and PORTABLE to what was asked for.
    flags = int(rng.integers(0, 8))
    n = int(rng.integers(1, 1 << 16))
    p = _host_alloc(driver, n, flags)
    try:
        got = ctypes.c_uint()
        driver.cuMemHostGetFlags(ctypes.byref(got), p + int(rng.integers(0, n)))
        assert got.value == flags | DEVICEMAP | PORTABLE
        plain, dev = np.zeros(16), cuda.mem_alloc(64)
        for other in (plain.ctypes.data, dev.ptr, p + (-(-n // 4096) * 4096)):
            assert _code(driver.cuMemHostGetFlags, ctypes.byref(got), other) == "CUDA_ERROR_INVALID_VALUE"
        out = ctypes.c_void_p()
        assert _code(driver.cuMemHostAlloc, ctypes.byref(out), 64, 0x8) == "CUDA_ERROR_INVALID_VALUE"
        assert _code(driver.cuMemHostAlloc, ctypes.byref(out), 0, 0) == "CUDA_ERROR_INVALID_VALUE"
        assert _code(driver.cuMemFree, p) == "CUDA_ERROR_INVALID_VALUE"      # not device memory
    finally:
        driver.cuMemFreeHost(p)


def test_page_locked_memory_leaves_device_memory_free(driver, rng):
    before, _ = cuda.mem_get_info()
    p = _host_alloc(driver, int(rng.integers(1, 1 << 22)), 0)
    during, _ = cuda.mem_get_info()
    driver.cuMemFreeHost(p)
    assert during == before


@pytest.mark.parametrize("kind", ["managed", "registered"])
def test_wild_pointer_next_to_host_reachable_memory_faults(driver, rng, kind):
    n = int(rng.integers(1, 1000))
    a, b = cuda.mem_alloc(4 * (n + 1)), cuda.mem_alloc(4 * (n + 1))
    if kind == "managed":
        keep = cuda.mem_alloc_managed(4 * n)        # lives as long as the test
        c = keep.ptr
    else:
        keep = np.empty(n, np.float32)
        c = keep.ctypes.data
        driver.cuMemHostRegister(c, keep.nbytes, DEVICEMAP)
    _at(c, n)[:] = np.nan                 # the host may touch the whole range at that address
    # one element past the range: on a page the host may touch, yet outside it (the fault is
    # sticky: the fixture's reset drops the registration with the context)
    _add(a, b, c, n + 1)
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    if driver.kind == "emu":
        assert f"at {c + 4 * n:#x}" in e.value.details
        assert "vector_add" in e.value.details and "thread (" in e.value.details and "PTX line" in e.value.details
    del keep


def test_managed_memory_after_a_primary_context_reset(driver, rng):
    n = int(rng.integers(1, 3000))
    stale = cuda.mem_alloc_managed(4 * n)
    _at(stale.ptr, n)[:] = 5
    old = stale.ptr
    cuda.reset_device()
    assert cuda.pointer_attributes(old).memory_type is None          # the fresh context never saw it
    a, b, c = (cuda.mem_alloc_managed(4 * n) for _ in range(3))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    _at(a.ptr, n)[:], _at(b.ptr, n)[:] = x, y
    _at(c.ptr, n)[:] = np.nan
    _add(a, b, c, n)
    cuda.synchronize()
    np.testing.assert_array_equal(_at(c.ptr, n), (x.astype(np.float64) + y).astype(np.float32))
    if old not in (a.ptr, b.ptr, c.ptr):                    # the stale pointer reaches nothing
        _add(old, old, c, n)
        with pytest.raises(cuda.CudaError) as e:
            cuda.synchronize()
        assert e.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"


_HOST_READS = {
    "cuMemAlloc memory": "p = cuda.mem_alloc(4096).ptr",
    "managed memory after a context reset":
        "m = cuda.mem_alloc_managed(4096)\nctypes.c_int.from_address(m.ptr).value = 3\n"
        "p = m.ptr\ncuda.reset_device()",
}


@pytest.mark.parametrize("what", sorted(_HOST_READS))
def test_host_read_of_device_memory_faults(what):
    """On a GPU the host cannot read device memory: the process dies of SIGSEGV. The managed
    read first shows the window works in that process, so the fault is the device memory's."""
    script = textwrap.dedent("""
        import ctypes, sys
        from lowlevel import cuda
        cuda.use_driver("emu")
        m = cuda.mem_alloc_managed(64)
        ctypes.c_int.from_address(m.ptr).value = 7
        assert ctypes.c_int.from_address(m.ptr).value == 7
        {setup}
        print("reading", hex(p), flush=True)
        ctypes.c_int.from_address(p).value
        print("read it", flush=True)
    """).format(setup=_HOST_READS[what])
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert "reading" in done.stdout, done.stderr
    assert done.returncode == -11, (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("width", [8, 32])
def test_a_synchronous_memset_of_pinned_memory_is_done_when_it_returns(driver, rng, width):
    # The driver documents cuMemsetD8/D16/D32 as asynchronous for device memory "unless
    # dstDevice refers to pinned host memory": then the host reads it at once (numba-cuda's
    # test_host_alloc_driver). Slow work queued first on the legacy stream shows the difference.
    n = 1 << 21
    big = [cuda.mem_alloc(4 * n) for _ in range(3)]
    _add(*big, n)                                   # the legacy stream is busy for a while
    count = int(rng.integers(1, 4096))
    host = _host_alloc(driver, count * 4, DEVICEMAP)
    try:
        words = np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(host))
        words[:] = 0
        if width == 8:
            driver.cuMemsetD8(_device_pointer(driver, host), 0xAB, count * 4)
            assert (words == 0xABABABAB).all()
        else:
            value = int(rng.integers(1, 2**32))
            driver.cuMemsetD32(_device_pointer(driver, host), value, count)
            assert (words == value).all()
    finally:
        cuda.synchronize()
        driver.cuMemFreeHost(host)

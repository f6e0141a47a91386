"""Context limits (the printf FIFO honoured), stream priorities and flags, and what
identifies a device, on every driver present."""
import ctypes
import re
import uuid

import pytest
from helpers.cuda_c import load_compiled, nvrtc_ptx

from lowlevel import cuda
from lowlevel.capi.constants import CURESULT
from lowlevel.capi.memory_constants import LIMIT

PRINTER = r"""
extern "C" __device__ int printf(const char*, ...);
extern "C" __global__ void say(int k) { printf("thread %03d says %d\n", threadIdx.x, k); }
"""


def test_limit_defaults_and_round_trips(driver):
    cuda.reset_device()                  # a fresh context: the defaults, nothing fixed yet
    assert cuda.get_limit("PRINTF_FIFO_SIZE") == 1 << 20
    assert cuda.get_limit("CU_LIMIT_MALLOC_HEAP_SIZE") == 8 << 20
    assert cuda.get_limit("STACK_SIZE") > 0
    cuda.set_limit("STACK_SIZE", 4096)
    assert cuda.get_limit("STACK_SIZE") >= 4096
    cuda.set_limit("MALLOC_HEAP_SIZE", 32 << 20)
    assert cuda.get_limit("MALLOC_HEAP_SIZE") >= 32 << 20          # a driver may round up
    with pytest.raises(ValueError, match="unknown limit"):
        cuda.get_limit("NO_SUCH_LIMIT")
    value = ctypes.c_size_t()
    code = driver.cuCtxGetLimit.unchecked(ctypes.byref(value), max(LIMIT.values()) + 50)
    assert code in (CURESULT["CUDA_ERROR_UNSUPPORTED_LIMIT"], CURESULT["CUDA_ERROR_INVALID_VALUE"])
    if driver.kind == "emu":
        assert code == CURESULT["CUDA_ERROR_UNSUPPORTED_LIMIT"]


def test_printf_fifo_drops_what_does_not_fit(driver, capfd):
    cuda.reset_device()                  # the FIFO size is fixed by a context's first printf launch
    cuda.set_limit("PRINTF_FIFO_SIZE", 4096)
    f = load_compiled(nvrtc_ptx(PRINTER)).get_function("say")
    capfd.readouterr()
    f.launch(8, 512, (5,))               # 4096 records: far beyond the FIFO on any device
    cuda.synchronize()
    lines = capfd.readouterr().out.splitlines()
    assert len(lines) < 4096
    assert all(re.fullmatch(r"thread \d{3} says 5", line) for line in lines), lines[:5]
    if driver.kind == "emu":             # each record charged its text, 18 bytes
        assert len(lines) == 4096 // len("thread 000 says 5\n")
        assert lines == [f"thread {i:03d} says 5" for i in range(len(lines))]
    with pytest.raises(cuda.CudaError) as e:     # too late: a printf kernel ran in this context
        cuda.set_limit("PRINTF_FIFO_SIZE", 1 << 20)
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
    cuda.reset_device()                  # leave the default FIFO to the tests after this one


def test_stream_priorities(driver):
    least, greatest = cuda.stream_priority_range()
    assert greatest <= least
    if driver.kind == "emu":
        assert (least, greatest) == (0, -5)          # what Hopper reports
    assert cuda.Stream(priority=greatest).priority == greatest
    assert cuda.Stream(priority=least).priority == least
    assert cuda.Stream(priority=greatest - 100).priority == greatest      # clamped, as documented
    assert cuda.Stream(priority=least + 100).priority == least
    assert cuda.Stream().priority == 0 and cuda.Stream.legacy().priority == 0
    assert cuda.GPU(0).attribute("STREAM_PRIORITIES_SUPPORTED") == 1
    with pytest.raises(ValueError, match="priority"):
        cuda.Stream(priority=1 << 40)
    handle = ctypes.c_void_p()
    code = driver.cuStreamCreateWithPriority.unchecked(ctypes.byref(handle), 0x80, greatest)
    assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]          # unknown flags


def test_stream_flags(driver):
    assert cuda.Stream().flags == 0
    assert cuda.Stream(non_blocking=True).flags == 1
    assert cuda.Stream(non_blocking=True, priority=-1).flags == 1


def test_device_uuid_and_pci_bus_id(driver):
    dev = cuda.GPU(0)
    assert isinstance(dev.uuid, uuid.UUID) and dev.uuid == cuda.GPU(0).uuid
    bus_id = dev.pci_bus_id
    m = re.fullmatch(r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])", bus_id, re.I)
    assert m, bus_id
    assert int(m.group(2), 16) == dev.attribute("PCI_BUS_ID")
    assert int(m.group(3), 16) == dev.attribute("PCI_DEVICE_ID")
    out = ctypes.create_string_buffer(16)
    assert driver.cuDeviceGetUuid.unchecked(out, 99) == CURESULT["CUDA_ERROR_INVALID_DEVICE"]


DEEP = r"""
// each level needs the deeper result before its own step: a real call per level
__device__ __noinline__ int depth(int n) { return n == 0 ? 0 : (depth(n - 1) * 3 + n) % 1000003; }
extern "C" __global__ void deep(const int* n, int* out) { out[threadIdx.x] = depth(n[threadIdx.x]); }
"""


def test_the_stack_size_limit_bounds_recursion(driver):
    """CU_LIMIT_STACK_SIZE is the per-thread stack a recursion lives in: 1000 levels
    overflow the 1024-byte default (on the emulated GPU: each level saves at least 8 bytes)
    and fit in a 64 KB stack."""
    import numpy as np
    cuda.reset_device()
    f = load_compiled(nvrtc_ptx(DEEP)).get_function("deep")
    levels = np.zeros(32, np.int32)
    levels[3] = 1000
    want = [0]
    for v in range(1, 1001):
        want.append((want[-1] * 3 + v) % 1000003)
    n, out = cuda.mem_alloc(levels.nbytes), cuda.mem_alloc(levels.nbytes)
    cuda.memcpy_htod(n, levels)
    if driver.kind == "emu":                      # a GPU's frames may be smaller: its depth differs
        f.launch(1, 32, (n, out))
        with pytest.raises(cuda.CudaError, match="stack overflow"):
            cuda.synchronize()
        cuda.reset_device()                       # the fault is sticky
        f = load_compiled(nvrtc_ptx(DEEP)).get_function("deep")
        n, out = cuda.mem_alloc(levels.nbytes), cuda.mem_alloc(levels.nbytes)
        cuda.memcpy_htod(n, levels)
    cuda.set_limit("STACK_SIZE", 64 << 10)
    f.launch(1, 32, (n, out))
    got = np.empty(32, np.int32)
    cuda.memcpy_dtoh(got, out)
    assert got[3] == want[1000] and (np.delete(got, 3) == 0).all()
    cuda.reset_device()                           # the default stack again for the next tests

"""Module loading and kernel launch: JIT logs, attributes, the two ways to pass parameters,
and launches that return before the kernel has run."""
import ctypes
import struct
import threading

import numpy as np
from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import device_poisoned, poisoned

from lowlevel import cuda, kernels


def test_info_log_is_readable_after_a_good_load(driver):
    module = cuda.Module.from_ptx(kernels.ptx_source("saxpy"), options={"MAX_REGISTERS": 64})
    assert module.kind == "ptx"
    assert "saxpy" in module.info_log, module.info_log     # e.g. registers used by the kernel


def test_function_attributes(driver):
    f = kernels.module("vector_add").get_function("vector_add")
    assert 0 < f.num_regs <= 255
    assert f.max_threads_per_block >= 256
    assert f.shared_size_bytes == 0 and f.local_size_bytes >= 0
    assert f.attribute("PTX_VERSION") >= 60
    assert [size for _, size in f.params] == [8] * len(f.params)


def test_parameter_layout_from_the_driver(driver):
    f = kernels.module("saxpy").get_function("saxpy")       # (f32 a, u64 x, u64 y, u64 n)
    assert f.params == [(0, 4), (8, 8), (16, 8), (24, 8)]    # 8-byte alignment pads after a


def test_launch_with_a_packed_parameter_buffer(driver, rng):
    """cuLaunchKernel's `extra` path: one buffer laid out at the driver's offsets."""
    f = kernels.module("saxpy").get_function("saxpy")
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(y.nbytes)
    cuda.memcpy_htod(dx, x)
    cuda.memcpy_htod(dy, y)
    alpha = np.float32(rng.standard_normal())
    buf = ctypes.create_string_buffer(struct.pack("<f4xQQQ", alpha, dx.ptr, dy.ptr, n), 32)
    size = ctypes.c_size_t(32)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
    driver.cuLaunchKernel(f.handle, 4, 1, 1, 128, 1, 1, 0, 0, None, extra)
    back = poisoned(n)
    cuda.memcpy_dtoh(back, dy)
    np.testing.assert_array_equal(back, (np.float64(alpha) * x + y).astype(np.float32))


def test_launch_on_a_non_blocking_stream_returns_before_the_kernel_runs(driver, rng):
    stream = cuda.Stream(non_blocking=True)
    n = 1 << 16
    out = device_poisoned(4 * n)
    fill = kernels.module("fill").get_function("fill_f32")
    fill.launch(1, 32, (out, 0.0, 1), stream=stream)          # warm: loaded and launched once
    stream.synchronize()
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(20))
    fill.launch(64, 256, (out, 1.5, n), stream=stream)      # returns: the kernel is only queued
    done = cuda.Event().record(stream)
    assert stream.query() is False and done.query() is False
    gate.set()
    stream.synchronize()
    assert stream.query() is True and done.query() is True
    back = poisoned(n)
    cuda.memcpy_dtoh(back, out)
    assert (back == 1.5).all()


def test_kernel_time_by_events(driver):
    n = 1 << 20
    out = cuda.mem_alloc(4 * n)
    fill = kernels.module("fill").get_function("fill_f32")
    start, end = cuda.Event(), cuda.Event()
    start.record()
    fill.launch(256, 256, (out, 0.0, n))
    end.record()
    end.synchronize()
    assert start.elapsed_ms(end) > 0


def test_negative_ints_reach_nvcc_int_parameters(driver, rng):
    """nvcc declares `int` parameters .u32: a negative Python int must arrive as that int."""
    ptx = nvrtc_ptx('extern "C" __global__ void offset(int* out, int delta, long long big)'
                    '{ out[0] = delta; ((long long*)out)[1] = big; }')
    assert ".param .u32 offset_param_1" in ptx
    out = cuda.mem_alloc(16)
    load_compiled(ptx).get_function("offset").launch(1, 1, (out, -7, -(2**40)))
    back = np.zeros(4, np.int32)
    cuda.memcpy_dtoh(back, out)
    assert back[0] == -7 and back[2:].view(np.int64)[0] == -(2**40)

"""Every misuse gets the error the driver documents, or a Python error before the driver is
called; the process stays usable afterwards (except after a fault, which is sticky until
the device is reset, exactly as on a GPU)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import cuda, kernels
from lowlevel.compiler.toolchain import find_tool
from lowlevel.cuda.kernel_args import pack_value

OOB_PTX = r"""
.version 7.0
.target sm_60
.address_size 64
.visible .entry write_past_end(.param .u64 out, .param .u32 n)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    add.u32 %r3, %r2, %r1;          // index n + tid: always past the end
    mul.wide.u32 %rd2, %r3, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


def assert_cuda_error(info, name):
    assert info.value.name == name, str(info.value)
    assert isinstance(info.value.code, int) and info.value.description


def test_calls_before_cuinit_fail_not_initialized(driver):
    """In a fresh process, a call before cuInit returns CUDA_ERROR_NOT_INITIALIZED."""
    program = textwrap.dedent(f"""
        import ctypes
        from lowlevel.cuda import bindings
        if {driver.kind!r} == "emu":
            from lowlevel.emu import driver
            table = bindings.bind_python(driver.functions())
        else:
            table = bindings.bind_library(ctypes.CDLL({os.environ.get("LOWLEVEL_LIBCUDA", "libcuda.so.1")!r}))
        count = ctypes.c_int()
        print(table["cuDeviceGetCount"](ctypes.byref(count)))
    """)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == 3            # CUDA_ERROR_NOT_INITIALIZED


def test_bad_ptx_names_the_line(driver):
    bad = ".version 7.0\n.target sm_60\n.address_size 64\n.visible .entry k()\n{\n    frobnicate.u32 %r1;\n    ret;\n}\n"
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(bad)
    assert_cuda_error(info, "CUDA_ERROR_INVALID_PTX")
    assert "frobnicate" in info.value.log and "6" in info.value.log, info.value.log
    cuda.mem_alloc(16)                              # still usable


def test_unknown_kernel_name_is_not_found(driver):
    module = kernels.module("vector_add")
    with pytest.raises(cuda.CudaError) as info:
        module.get_function("no_such_kernel")
    assert_cuda_error(info, "CUDA_ERROR_NOT_FOUND")
    assert module.get_function("vector_add").num_regs > 0


@pytest.mark.parametrize("grid, block", [(1, 2048), (1, (1, 1, 65)), ((1, 70000, 1), 32)])
def test_launch_beyond_device_limits_is_invalid_value(driver, grid, block):
    f = kernels.module("vector_add").get_function("vector_add")
    a = cuda.mem_alloc(4)
    with pytest.raises(cuda.CudaError) as info:
        f.launch(grid, block, (a, a, a, 1))
    assert_cuda_error(info, "CUDA_ERROR_INVALID_VALUE")
    assert info.value.function == "cuLaunchKernel"
    f.launch(1, 1, (a, a, a, 1))                    # a good launch still works
    cuda.synchronize()


def test_argument_errors_are_python_errors_before_launch(driver):
    f = kernels.module("saxpy").get_function("saxpy")   # (f32 a, u64 x, u64 y, u64 n)
    x = cuda.mem_alloc(64)
    with pytest.raises(TypeError, match=r"saxpy takes 4 arguments, got 3"):
        f.launch(1, 32, (1.0, x, x))
    with pytest.raises(TypeError, match=r"saxpy: parameter 0 .*got float64"):
        f.launch(1, 32, (np.float64(1.0), x, x, 16))
    with pytest.raises(ValueError, match=r"saxpy: parameter 3 .*out of range"):
        f.launch(1, 32, (1.0, x, x, 2**64))
    with pytest.raises(ValueError, match=r"saxpy: parameter 3 .*out of range"):
        f.launch(1, 32, (1.0, x, x, -2**63 - 1))
    with pytest.raises(TypeError, match=r"saxpy: parameter 3 .*float"):
        f.launch(1, 32, (1.0, x, x, 16.0))
    with pytest.raises(TypeError, match=r"saxpy: parameter 1 .*cannot pass a str"):
        f.launch(1, 32, (1.0, "x", x, 16))
    with pytest.raises(TypeError, match="grid"):
        f.launch((1, 2, 3, 4), 32, (1.0, x, x, 16))
    f.launch(1, 32, (2.0, x, x, 16))                # Python numbers convert to the declared types
    cuda.synchronize()


def test_emulator_rejects_unknown_handles(driver):
    if driver.kind != "emu":
        pytest.skip("a garbage handle may crash a real driver; only the emulator is asked")
    with pytest.raises(cuda.CudaError) as info:
        driver.cuStreamSynchronize(0xDEAD0)
    assert_cuda_error(info, "CUDA_ERROR_INVALID_HANDLE")


def test_ptx_newer_than_the_driver_is_refused(driver):
    ptx = ".version 99.0\n.target sm_60\n.address_size 64\n.visible .entry k()\n{\n    ret;\n}\n"
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(ptx)
    assert info.value.name in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX")


def test_cubin_on_the_emulator_is_refused_clearly(driver):
    if driver.kind != "emu":
        pytest.skip("a real GPU runs cubins")
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    err, prog = nvrtc.nvrtcCreateProgram(b'extern "C" __global__ void k(){}', b"k.cu", 0, [], [])
    opts = [b"--gpu-architecture=sm_80"]
    assert nvrtc.nvrtcCompileProgram(prog, 1, opts)[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_cubin(cubin)
    assert_cuda_error(info, "CUDA_ERROR_NO_BINARY_FOR_GPU")
    assert "PTX only" in str(info.value)


def test_fatbin_runs_its_ptx(driver, rng, tmp_path):
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void twice(float* x, int n)'
                   '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }')
    out = tmp_path / "k.fatbin"
    # SASS for sm_80 and sm_90 (a real GPU runs its own) and compute_80 PTX (the emulated GPU
    # runs that; a real driver older than the compiler could not JIT it).
    result = subprocess.run([nvcc, "-fatbin", "-gencode", "arch=compute_80,code=[sm_80,compute_80]",
                             "-gencode", "arch=compute_90,code=sm_90",
                             str(src), "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    module = cuda.Module.load(out)                  # recognised by content as a fatbin
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    dx = cuda.mem_alloc(x.nbytes)
    cuda.memcpy_htod(dx, x)
    module.get_function("twice").launch((n + 127) // 128, 128, (dx, n))
    back = poisoned(n)
    cuda.memcpy_dtoh(back, dx)
    np.testing.assert_array_equal(back, 2 * x)


def test_illegal_address_is_reported_late_and_is_sticky(driver):
    f = cuda.Module.from_ptx(OOB_PTX).get_function("write_past_end")
    out = cuda.mem_alloc(4 * 64)
    # The emulated GPU bounds-checks every allocation; a real GPU faults only on unmapped
    # memory (the bytes past a small cudaMalloc block are often mapped), so there the
    # kernel writes just past address 0 instead.
    target = out if driver.kind == "emu" else 0
    f.launch(1, 32, (target, 64))                   # the launch itself succeeds: it is queued
    with pytest.raises(cuda.CudaError) as info:
        cuda.synchronize()
    assert_cuda_error(info, "CUDA_ERROR_ILLEGAL_ADDRESS")
    if driver.kind == "emu":
        details = info.value.details
        assert "write_past_end" in details and "thread (" in details and "line 15" in details, details
    with pytest.raises(cuda.CudaError) as info:     # sticky: later calls fail the same way
        cuda.mem_alloc(16)
    assert_cuda_error(info, "CUDA_ERROR_ILLEGAL_ADDRESS")
    cuda.reset_device()                             # the documented way out
    fresh = cuda.mem_alloc(16)
    cuda.memcpy_htod(fresh, np.arange(4, dtype=np.float32))
    back = poisoned(4)
    cuda.memcpy_dtoh(back, fresh)
    np.testing.assert_array_equal(back, np.arange(4, dtype=np.float32))


def test_cuda_error_carries_everything(driver):
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(".version 7.0\n.target sm_60\n.address_size 64\nnonsense\n")
    e = info.value
    assert (e.code, e.name, e.function) == (218, "CUDA_ERROR_INVALID_PTX", "cuModuleLoadDataEx")
    assert e.description and e.log
    assert "CUDA_ERROR_INVALID_PTX" in str(e) and e.log.strip() in str(e)


def test_half_precision_parameter_overflow_is_refused(driver):
    assert pack_value("k", 0, "h", "f16", 2, 1.5) == np.float16(1.5).tobytes()
    with pytest.raises(ValueError, match="overflows float16"):
        pack_value("k", 0, "h", "f16", 2, 70000.0)


def test_reqntid_demands_that_exact_block(driver):
    ptx = (".version 7.0\n.target sm_60\n.address_size 64\n"
           ".visible .entry fixed() .reqntid 64, 2\n{\n    ret;\n}\n")
    f = cuda.Module.from_ptx(ptx).get_function("fixed")
    f.launch(1, (64, 2))
    cuda.synchronize()
    for block in ((128,), (64, 1), (32, 4)):
        with pytest.raises(cuda.CudaError) as info:
            f.launch(1, block)
        assert info.value.name == "CUDA_ERROR_INVALID_VALUE"

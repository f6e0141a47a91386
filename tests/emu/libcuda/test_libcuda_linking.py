"""Links of several PTX inputs by clients of the emulated libcuda.so.1 run on the emulated GPU:
numba-cuda's `link=` of a PTX file (nvJitLink, interposed: its LTO-IR and the PTX are linked
as PTX, emu/libcuda/nvjitlink.py) and cuda.core's Linker on its cuLink* backend (the driver's
linker, emu/driver/culink.py). Each client runs in a fresh interpreter whose
dlopen("libcuda.so.1") finds the emulated one; skipped where a client is not installed.
"""
import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from lowlevel.emu import libcuda

ROOT = pathlib.Path(__file__).resolve().parents[3]
DRIVER_TESTS = ROOT / "tests" / "emu" / "driver"


@pytest.fixture(scope="module")
def folder() -> pathlib.Path:
    try:
        return libcuda.directory()
    except libcuda.BuildError as e:
        pytest.skip(str(e))


def run_client(folder, code: str, *argv: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LD_LIBRARY_PATH": str(folder), "PYTHONPATH": str(ROOT),
                   "NUMBA_DISABLE_PERFORMANCE_WARNINGS": "1"}
    environment.pop("LOWLEVEL_DRIVER", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv], env=environment,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


# A device function in PTX, in numba's ABI (a status returned, the result through a pointer),
# that reads a variable of its own module: result = 3 * x + offset.
TRIPLE_PLUS = r"""
.version 7.8
.target sm_80
.address_size 64
.file 1 "triple.cu"
.visible .global .align 4 .u32 offset = 7;
.visible .func (.param .b32 status) triple_plus(.param .b64 result, .param .b32 x)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<2>;
    .loc 1 2 1
    ld.param.u64 %rd1, [result];             // where numba wants the int32 result
    ld.param.u32 %r1, [x];
    ld.global.u32 %r2, [offset];             // this module's variable
    mad.lo.s32 %r3, %r1, 3, %r2;             // 3 * x + offset
    st.u32 [%rd1], %r3;
    mov.u32 %r4, 0;
    st.param.b32 [status], %r4;              // status 0: returned normally
    ret;
}
"""


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba-cuda is not installed")
def test_numba_links_a_ptx_file_and_its_kernel_calls_the_function(folder, tmp_path):
    path = tmp_path / "triple.ptx"
    path.write_text(TRIPLE_PLUS)
    out = run_client(folder, """
        import sys
        import numpy as np
        from numba import cuda
        triple_plus = cuda.declare_device("triple_plus", "int32(int32)")

        @cuda.jit(link=[sys.argv[1]])
        def kernel(out, x):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = triple_plus(x[i])
        x = np.random.default_rng().integers(-1000, 1000, 300).astype(np.int32)
        out = cuda.to_device(np.full(300, -1, np.int32))          # poisoned
        kernel[3, 128](out, cuda.to_device(x))
        np.testing.assert_array_equal(out.copy_to_host(), 3 * x + 7)
        print("linked and ran")
    """, str(path))
    assert out.returncode == 0 and "linked and ran" in out.stdout, out.stderr[-3000:]


@pytest.mark.skipif(importlib.util.find_spec("cuda.core") is None, reason="cuda.core is not installed")
def test_cuda_core_links_two_ptx_modules_with_the_drivers_linker(folder):
    out = run_client(folder, """
        import importlib, sys
        import numpy as np
        from cuda.core import Device, LaunchConfig, Linker, LinkerOptions, ObjectCode, launch
        import cuda.bindings.driver as driver
        linking = importlib.import_module(Linker.__module__)
        # cuda.core links with nvJitLink where it loads and falls back to the driver's cuLink*;
        # its choice is made once, in these module globals: this process asks for the driver.
        if not all(hasattr(linking, n) for n in ("_use_nvjitlink_backend", "_driver", "_driver_input_types")):
            print("SKIP: this cuda.core chooses its linking backend differently"); sys.exit(0)
        linking._decide_nvjitlink_or_driver()
        linking._use_nvjitlink_backend, linking._driver = False, driver
        types = driver.CUjitInputType
        linking._driver_input_types = linking._driver_input_types or {
            "ptx": types.CU_JIT_INPUT_PTX, "cubin": types.CU_JIT_INPUT_CUBIN, "fatbin": types.CU_JIT_INPUT_FATBINARY,
            "object": types.CU_JIT_INPUT_OBJECT, "library": types.CU_JIT_INPUT_LIBRARY}
        import pathlib
        sys.path[:0] = [sys.argv[1], str(pathlib.Path(sys.argv[1]).parents[1])]     # its folder, tests/ (helpers)
        from test_culink_ptx_linker import CALLEE, CALLER
        device = Device()
        device.set_current()
        caller, callee = (ObjectCode.from_ptx(t.encode(), name=n) for t, n in ((CALLER, "caller.ptx"), (CALLEE, "callee.ptx")))
        linked = Linker(caller, callee, options=LinkerOptions(arch=f"sm_{device.arch}")).link("cubin")
        n = 500
        rng = np.random.default_rng()
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        stream = device.create_stream()
        buffers = [device.allocate(a.nbytes, stream=stream) for _ in range(3)]
        got = np.full(n, np.nan, np.float32)                          # poisoned
        for buffer, host in zip(buffers, (got, a, b)):
            driver.cuMemcpyHtoDAsync(int(buffer.handle), host.ctypes.data, host.nbytes, stream.handle)
        launch(stream, LaunchConfig(grid=(n + 127) // 128, block=128), linked.get_kernel("apply"),
               buffers[0], buffers[1], buffers[2], np.uint32(n))
        driver.cuMemcpyDtoHAsync(got.ctypes.data, int(buffers[0].handle), got.nbytes, stream.handle)
        stream.sync()
        np.testing.assert_allclose(got, a.astype(np.float64) * 2.0 + b + 2.0, rtol=1e-5, atol=1e-5)
        print("linked and ran")
    """, str(DRIVER_TESTS))
    if "SKIP:" in out.stdout:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0 and "linked and ran" in out.stdout, out.stderr[-3000:]

"""The emulated GPU as a drop-in libcuda.so.1 (lowlevel/emu/libcuda): clients that load
libcuda.so.1 by name run on it, in their own processes, as they would on a GPU's driver.

Each client runs in a fresh interpreter with LD_LIBRARY_PATH on the library's folder (or
LOWLEVEL_LIBCUDA for lowlevel's own real-driver binding), so nothing of this process leaks
into it. Skipped where no C compiler can build the library.
"""
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from lowlevel.capi.prototypes import PROTOTYPES
from lowlevel.emu import libcuda

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def folder() -> pathlib.Path:
    try:
        return libcuda.directory()
    except libcuda.BuildError as e:
        pytest.skip(str(e))


def client(folder, code: str, *argv: str, timeout: int = 120, **env) -> subprocess.CompletedProcess:
    """`code` (with `argv`) run by a fresh Python whose dlopen("libcuda.so.1") finds the emulated one."""
    environment = {**os.environ, "LD_LIBRARY_PATH": str(folder), "PYTHONPATH": str(ROOT), **env}
    environment.pop("LOWLEVEL_DRIVER", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv], env=environment,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_the_folder_holds_libcuda_so_1_and_its_table_is_the_prototypes(folder):
    assert (folder / "libcuda.so.1").is_file() and os.readlink(folder / "libcuda.so") == "libcuda.so.1"
    assert libcuda.directory() == folder                       # built once, then found
    out = client(folder, """
        import ctypes
        lib = ctypes.CDLL("libcuda.so.1")
        lib.lowlevel_emu_symbol.restype = ctypes.c_char_p
        print(lib.lowlevel_emu_table_size(), lib.lowlevel_emu_symbol(0).decode())
    """)
    assert out.returncode == 0, out.stderr
    count, first = out.stdout.split()
    assert int(count) == len(PROTOTYPES) and first == next(iter(PROTOTYPES.values()))[0]


def test_the_command_prints_the_folder(folder):
    out = subprocess.run([sys.executable, "-m", "lowlevel", "emu-libcuda"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(folder)


def test_lowlevels_real_driver_binding_runs_the_readme_kernel_over_it(folder):
    env = {"LOWLEVEL_DRIVER": "cuda", "LOWLEVEL_LIBCUDA": str(folder / "libcuda.so.1"), "PYTHONPATH": str(ROOT)}
    info = subprocess.run([sys.executable, "-m", "lowlevel", "info"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, **env})
    assert info.returncode == 0, info.stderr
    assert "driver:  cuda - the emulated GPU behind its libcuda.so.1" in info.stdout
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np
        from lowlevel import cuda, kernels
        n = 1 << 16
        a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        da, db, dc = cuda.mem_alloc(a.nbytes), cuda.mem_alloc(b.nbytes), cuda.mem_alloc(a.nbytes)
        cuda.memcpy_htod(da, a); cuda.memcpy_htod(db, b)
        add = kernels.module("vector_add").get_function("vector_add")
        add.launch(grid=(n + 255) // 256, block=256, args=(da, db, dc, n))
        c = np.full_like(a, np.nan); cuda.memcpy_dtoh(c, dc)
        assert np.array_equal(c, a + b)
        assert cuda.get_driver().kind == "cuda"
    """)], capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **env})
    assert run.returncode == 0, run.stderr


def test_get_proc_address_answers_by_version_and_the_export_table_is_refused(folder):
    out = client(folder, """
        import ctypes
        lib = ctypes.CDLL("libcuda.so.1")
        assert lib.cuInit(0) == 0
        def proc(name, version):
            p, status = ctypes.c_void_p(), ctypes.c_int(-1)
            code = lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(p), version, ctypes.c_uint64(0),
                                           ctypes.byref(status))
            return code, p.value, status.value
        address = lambda symbol: ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        assert proc("cuMemAlloc", 12000) == (0, address("cuMemAlloc_v2"), 0)
        assert proc("cuMemAlloc", 3000) == (0, address("cuMemAlloc"), 0)          # the 32-bit one
        assert proc("cuStreamBeginCapture", 10000) == (0, address("cuStreamBeginCapture"), 0)
        assert proc("cuNoSuchFunction", 13000) == (500, None, 1)                   # CUDA_ERROR_NOT_FOUND
        assert proc("cuGetProcAddress", 11000) == (500, None, 2)                   # version not sufficient
        table = ctypes.c_void_p(1)
        assert lib.cuGetExportTable(ctypes.byref(table), None) == 801 and table.value is None
        assert lib.cuMemAlloc(None, 4) == 801 and lib.cuMemAlloc(None, 4) == 801   # a stub, both times
        print("done")
    """)
    assert out.returncode == 0, out.stderr
    missing = [line for line in out.stderr.splitlines() if "cuMemAlloc is not implemented" in line]
    assert len(missing) == 1, out.stderr                                           # said once


def test_the_cuda_runtime_is_told_once_why_it_cannot_run(folder):
    """libcudart (what CuPy and PyTorch call) needs the driver's private export tables: it is
    refused, and one line names it and says why; NVRTC, which asks too, is refused silently
    (test_cuda_core_compiles_with_nvrtc_and_runs_a_vector_add: nothing on stderr)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        cudart = load_nvidia_dynamic_lib("cudart").abs_path
    except Exception as e:              # noqa: BLE001  (not installed, or not loadable here)
        pytest.skip(f"no libcudart: {e}")
    out = client(folder, """
        import ctypes, sys
        runtime = ctypes.CDLL(sys.argv[1])
        count = ctypes.c_int(-1)
        codes = [runtime.cudaGetDeviceCount(ctypes.byref(count)) for _ in range(2)]
        print(codes)
    """, cudart)
    assert out.returncode == 0, out.stderr
    assert "0" not in out.stdout.strip("[]\n").split(", "), out.stdout        # the runtime fails, cleanly
    told = [line for line in out.stderr.splitlines() if "cuGetExportTable refused for" in line]
    assert len(told) == 1 and "libcudart" in told[0] and "CuPy" in told[0], out.stderr


def test_a_child_forked_after_init_gets_not_initialized(folder):
    out = client(folder, """
        import ctypes, os
        lib = ctypes.CDLL("libcuda.so.1")
        assert lib.cuInit(0) == 0
        count = ctypes.c_int()
        assert lib.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value >= 1
        pid = os.fork()
        if pid == 0:
            os._exit(lib.cuDeviceGetCount(ctypes.byref(count)))
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), lib.cuDeviceGetCount(ctypes.byref(count)))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "0"]            # CUDA_ERROR_NOT_INITIALIZED in the child only


def test_calls_while_the_interpreter_exits_neither_hang_nor_print(folder):
    out = client(folder, """
        import ctypes, threading
        lib = ctypes.CDLL("libcuda.so.1")
        assert lib.cuInit(0) == 0
        ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
        assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and lib.cuCtxSetCurrent(ctx) == 0
        def hammer():
            lib.cuCtxSetCurrent(ctx)
            while True:                      # until the process ends: allocate, free, synchronize
                if lib.cuMemAlloc_v2(ctypes.byref(ptr), 1024) == 0:
                    lib.cuMemFree_v2(ptr)
                lib.cuCtxSynchronize()
        for _ in range(2):
            threading.Thread(target=hammer, daemon=True).start()
        print("exiting")
    """, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "exiting"
    assert out.stderr == ""


def test_a_pending_exception_of_the_caller_survives_the_call(folder, tmp_path):
    # A C caller (as Cython code is) that calls the driver while an exception is pending.
    (tmp_path / "pending.c").write_text(textwrap.dedent("""
        #include <dlfcn.h>
        int cuDriverGetVersion(int *);
        int call_with_pending(void *exception_type, int *version) {
            void (*set)(void *, const char *) = (void (*)(void *, const char *))dlsym(RTLD_DEFAULT, "PyErr_SetString");
            set(exception_type, "the caller's own");
            return cuDriverGetVersion(version);
        }
    """))
    cc = libcuda.build.compiler()
    build = subprocess.run([*cc.split(), "-shared", "-fPIC", str(tmp_path / "pending.c"), "-o",
                            str(tmp_path / "pending.so"), f"-L{folder}", "-lcuda", "-ldl"],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    out = client(folder, f"""
        import ctypes
        assert ctypes.CDLL("libcuda.so.1").cuInit(0) == 0
        helper = ctypes.PyDLL({str(tmp_path / "pending.so")!r})   # holds Python's lock; checks errors after
        version = ctypes.c_int()
        try:
            helper.call_with_pending(ctypes.py_object(LookupError), ctypes.byref(version))
        except LookupError as e:
            print(e, version.value > 0)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "the caller's own True"


def test_log_api_names_each_call_and_the_emulators_reason(folder):
    out = client(folder, """
        import ctypes
        lib = ctypes.CDLL("libcuda.so.1")
        ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
        assert lib.cuInit(0) == 0 and lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert lib.cuCtxSetCurrent(ctx) == 0
        print(lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(0)))
    """, LOWLEVEL_LOG_API="1")
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr     # CUDA_ERROR_INVALID_VALUE
    line = next(x for x in out.stderr.splitlines() if "cuMemAlloc(" in x)
    assert "CUDA_ERROR_INVALID_VALUE" in line and "cannot allocate 0 bytes" in line


def test_a_client_that_is_not_python_gets_a_clear_error(folder, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "main.c").write_text(textwrap.dedent("""
        #include <stdio.h>
        int cuInit(unsigned int);
        int main(void) { printf("%d\\n", cuInit(0)); return 0; }
    """))
    build = subprocess.run([cc, str(tmp_path / "main.c"), "-o", str(tmp_path / "main"), f"-L{folder}", "-lcuda"],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LD_LIBRARY_PATH": str(folder)})
    assert run.returncode == 0 and run.stdout.strip() == "100"                # CUDA_ERROR_NO_DEVICE
    assert "not a running Python interpreter" in run.stderr


@pytest.mark.skipif(importlib.util.find_spec("cuda.core") is None, reason="cuda-core is not installed")
def test_cuda_core_compiles_with_nvrtc_and_runs_a_vector_add(folder):
    out = client(folder, """
        import ctypes
        import numpy as np
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        from cuda.bindings import driver
        dev = Device()
        dev.set_current()
        stream = dev.create_stream()
        src = '''extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) c[i] = a[i] + b[i];
        }'''
        arch = "".join(str(x) for x in dev.compute_capability)
        kernel = Program(src, code_type="c++", options=ProgramOptions(arch=f"compute_{arch}")).compile("ptx") \\
            .get_kernel("vadd")
        n = 1000
        a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        bufs = [dev.allocate(4 * n, stream=stream) for _ in range(3)]
        c = np.full_like(a, np.nan)
        driver.cuMemcpyHtoDAsync(int(bufs[0].handle), a.ctypes.data, 4 * n, stream.handle)
        driver.cuMemcpyHtoDAsync(int(bufs[1].handle), b.ctypes.data, 4 * n, stream.handle)
        driver.cuMemcpyHtoDAsync(int(bufs[2].handle), c.ctypes.data, 4 * n, stream.handle)
        launch(stream, LaunchConfig(grid=(n + 127) // 128, block=128), kernel, *bufs, np.int32(n))
        driver.cuMemcpyDtoHAsync(c.ctypes.data, int(bufs[2].handle), 4 * n, stream.handle)
        stream.sync()
        assert np.array_equal(c, a + b)
        print("ok")
    """, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok" and out.stderr == ""


LINK_AND_RUN = """
    import ctypes, sys
    import numpy as np
    from cuda.bindings import nvjitlink
    from lowlevel import kernels
    lib = ctypes.CDLL("libcuda.so.1")
    ctx, module, function = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.cuInit(0) == 0 and lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert lib.cuCtxSetCurrent(ctx) == 0
    if sys.argv[1] == "link":
        handle = nvjitlink.create(1, ["-arch=sm_90"])
        ptx = kernels.ptx_source("vector_add").encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "vector_add.ptx")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        nvjitlink.destroy(handle)
        open(sys.argv[2], "wb").write(cubin)
    else:
        cubin = bytearray(open(sys.argv[2], "rb").read())       # linked by another process
    image = (ctypes.c_char * len(cubin)).from_buffer(cubin)
    code = lib.cuModuleLoadData(ctypes.byref(module), image)
    if code:
        print("load", code); raise SystemExit
    assert lib.cuModuleGetFunction(ctypes.byref(function), module, b"vector_add") == 0
    n = 1000
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    ptrs = [ctypes.c_uint64() for _ in range(3)]
    for p, host in zip(ptrs, (a, b, np.full(n, np.nan, np.float32))):
        assert lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4 * n)) == 0
        assert lib.cuMemcpyHtoD_v2(p, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(4 * n)) == 0
    count = ctypes.c_int(n)
    args = (ctypes.c_void_p * 4)(*[ctypes.addressof(x) for x in (*ptrs, count)])
    assert lib.cuLaunchKernel(function, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None, args, None) == 0
    c = np.empty(n, np.float32)
    assert lib.cuMemcpyDtoH_v2(c.ctypes.data_as(ctypes.c_void_p), ptrs[2], ctypes.c_size_t(4 * n)) == 0
    assert np.array_equal(c, a + b)
    print("ran")
"""


def test_a_cubin_nvjitlink_linked_in_the_process_runs_and_one_from_elsewhere_is_refused(folder, tmp_path):
    cubin = tmp_path / "vector_add.cubin"
    linked = client(folder, LINK_AND_RUN, "link", str(cubin), timeout=300)
    assert linked.returncode == 0 and linked.stdout.strip() == "ran", linked.stderr
    assert cubin.read_bytes()[:4] == b"\x7fELF"                   # the client got nvJitLink's real cubin
    elsewhere = client(folder, LINK_AND_RUN, "load", str(cubin), timeout=300)
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert elsewhere.stdout.strip() == "load 209"                 # CUDA_ERROR_NO_BINARY_FOR_GPU


@pytest.mark.skipif(importlib.util.find_spec("numba") is None or importlib.util.find_spec("numba.cuda") is None,
                    reason="numba-cuda is not installed")
def test_numba_runs_a_jit_kernel_and_updates_a_lowlevel_tensor_in_place(folder):
    out = client(folder, """
        import numpy as np
        import lowlevel as ll
        from numba import cuda

        @cuda.jit
        def add(a, b, c):
            i = cuda.grid(1)
            if i < c.size:
                c[i] = a[i] + b[i]

        @cuda.jit
        def scale(x, factor):
            i = cuda.grid(1)
            if i < x.size:
                x[i] *= factor

        n = 1000
        a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        c = np.full_like(a, np.nan)
        add[(n + 127) // 128, 128](a, b, c)
        assert np.array_equal(c, a + b)
        t = ll.tensor(a, device="cuda")
        scale[(n + 127) // 128, 128](t, np.float32(3.0))       # through __cuda_array_interface__
        cuda.synchronize()
        assert np.array_equal(t.numpy(), a * np.float32(3.0))
        print("ok")
    """, timeout=600, NUMBA_DISABLE_PERFORMANCE_WARNINGS="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"

"""The compile pipeline on the CPU: NVRTC, nvJitLink, nvfatbin, cuobjdump, the cache, and
what the driver is given to load."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers.memory import poisoned

from lowlevel import compiler, cuda, kernels
from lowlevel.capi.images import KIND_ELF, KIND_PTX, fatbin_entries
from lowlevel.compiler import select
from lowlevel.compiler.toolchain import find_tool

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# Many live values and a register cap: ptxas must spill.
SPILLER = r"""
extern "C" __global__ void spiller(float* out, const float* in, int n) {
    float acc[48];
    for (int i = 0; i < 48; ++i) acc[i] = in[(threadIdx.x * 7 + i * 13) % n];
    float s = 0.0f;
    for (int j = 0; j < 48; ++j)
        for (int i = 0; i < 48; ++i) s += acc[i] * acc[(i + j) % 48];
    out[threadIdx.x] = s;
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_targets_come_back_as_text_and_bytes():
    ptx = compiler.compile(SAXPY, "ptx", "sm_80")
    assert isinstance(ptx, str) and ".target sm_80" in ptx and ".entry saxpy" in ptx
    cubin = compiler.compile(SAXPY, "cubin", "sm_90")
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"


def test_fatbin_holds_sass_for_each_arch_and_ptx_for_the_lowest():
    fat = compiler.compile(SAXPY, "fatbin", ["sm_90", "sm_80"])
    entries = fatbin_entries(fat)
    assert sorted(e["arch"] for e in entries if e["kind"] == KIND_ELF) == [80, 90]
    assert [e["arch"] for e in entries if e["kind"] == KIND_PTX] == [80]


def test_saxpy_sass_contains_ffma():
    sass = compiler.disassemble(compiler.compile(SAXPY, "cubin", "sm_90"))
    assert re.search(r"\bFFMA\b", sass), sass


def _ptxas_v(ptx: str, arch: str, tmp_path, extra=()) -> str:
    ptxas = find_tool("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not found")
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    out = subprocess.run([ptxas, "-v", f"-arch={arch}", *extra, str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_resource_usage_agrees_with_ptxas(tmp_path):
    ptx = compiler.compile(SPILLER, "ptx", "sm_90")
    cubin = compiler.link_ptx(ptx, "sm_90", ("-maxrregcount=24",))
    usage = compiler.resource_usage(cubin)["spiller"]
    log = _ptxas_v(ptx, "sm_90", tmp_path, ("-maxrregcount=24",))
    registers = int(re.search(r"Used (\d+) registers", log).group(1))
    stack, stores, loads = map(int, re.search(
        r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log).groups())
    assert usage["registers"] == registers <= 24
    assert usage["stack"] == stack
    assert usage["spills"] == stores + loads > 0
    assert usage["constant"] > 0


def test_compile_error_carries_the_log():
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile('extern "C" __global__ void k() { undefined_name = 1; }', name="broken.cu")
    assert "undefined_name" in info.value.log and "broken.cu(1)" in info.value.log


def test_link_error_carries_the_log():
    bad = ".version 7.0\n.target sm_60\n.address_size 64\n.visible .entry k()\n{\n  bogus.op %r1;\n}\n"
    with pytest.raises(compiler.LinkError) as info:
        compiler.link_ptx(bad, "sm_90")
    assert "line 6" in info.value.log and "bogus" in info.value.log


def test_name_expressions_find_templated_kernels(driver, rng):
    src = "template <typename T> __global__ void scale(T* x, T s, int n)" \
          "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }"
    names = compiler.lowered_names(src, ["scale<float>", "scale<double>"])
    assert names["scale<float>"].startswith("_Z") and names["scale<float>"] != names["scale<double>"]
    module = cuda.Module.from_cuda(src, name_expressions=["scale<float>", "scale<double>"])
    x = rng.standard_normal(100)
    d = cuda.mem_alloc(x.nbytes)
    cuda.memcpy_htod(d, x)
    module.get_function("scale<double>").launch(1, 128, (d, np.float64(2.5), 100))
    back = poisoned(100, np.float64)
    cuda.memcpy_dtoh(back, d)
    np.testing.assert_array_equal(back, x * 2.5)


def test_from_cuda_in_three_lines(driver, rng):
    n = 3000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(y.nbytes)
    cuda.memcpy_htod(dx, x)
    cuda.memcpy_htod(dy, y)
    # the three lines
    module = cuda.Module.from_cuda(SAXPY)
    saxpy = module.get_function("saxpy")
    saxpy.launch((n + 255) // 256, 256, (np.float32(2.0), dx, dy, n))
    back = poisoned(n)
    cuda.memcpy_dtoh(back, dy)
    np.testing.assert_allclose(back, 2 * x + y, rtol=1e-6, atol=1e-6)
    assert module.image_kind == ("sass" if driver.runs_sass else "ptx-jit")
    assert module.notes


def test_fatbin_loads_and_runs(driver, rng):
    fat = compiler.compile(SAXPY, "fatbin", ["sm_80", "sm_90"])
    module = cuda.Module.from_fatbin(fat)
    n = 500
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(y.nbytes)
    cuda.memcpy_htod(dx, x)
    cuda.memcpy_htod(dy, y)
    module.get_function("saxpy").launch(2, 256, (np.float32(-1.5), dx, dy, n))
    back = poisoned(n)
    cuda.memcpy_dtoh(back, dy)
    np.testing.assert_allclose(back, -1.5 * x + y, rtol=1e-6, atol=1e-6)
    if driver.kind == "emu":
        assert module.image_kind == "ptx-jit"      # the emulated GPU ran the fatbin's PTX


def test_bare_cubin_on_the_emulated_gpu_is_refused_with_the_reason(driver):
    if driver.kind != "emu":
        pytest.skip("a real GPU runs cubins")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_cubin(compiler.compile(SAXPY, "cubin", "sm_90"))
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert "PTX only" in str(info.value)


def test_load_picks_by_content(driver, tmp_path):
    ptx_file = tmp_path / "saxpy.bin"                        # PTX behind a misleading name
    ptx_file.write_text(kernels.ptx_source("saxpy"))         # ISA 7.0: any driver JITs it
    assert cuda.Module.load(ptx_file).kind == "ptx"
    fat_file = tmp_path / "saxpy.ptx"                        # a fatbin called .ptx
    fat_file.write_bytes(compiler.compile(SAXPY, "fatbin", ["sm_80", "sm_90"]))   # SASS for an H100/H200 too
    assert cuda.Module.load(fat_file).kind == "fatbin"


def test_cache_hit_miss_and_invalidation(private_cache):
    compiler.compile(SAXPY, "ptx", "sm_80")
    entries = set(private_cache.glob("*.bin"))
    assert len(entries) == 1
    compiler.compile(SAXPY, "ptx", "sm_80")                  # hit: nothing new
    assert set(private_cache.glob("*.bin")) == entries
    compiler.compile(SAXPY, "ptx", "sm_80", options=("--use_fast_math",))    # options: miss
    compiler.compile(SAXPY + "\n// edited\n", "ptx", "sm_80")                # source: miss
    compiler.compile(SAXPY, "ptx", "sm_90")                                  # arch: miss
    assert len(set(private_cache.glob("*.bin"))) == 4
    # a hit returns exactly what the compiler produced
    assert compiler.compile(SAXPY, "ptx", "sm_80") == compiler.nvrtc.compile_source(SAXPY, "kernel.cu", 80, "ptx")[0]


def test_cache_can_be_turned_off(private_cache, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_CACHE", "0")
    compiler.compile(SAXPY, "ptx", "sm_80")
    assert not private_cache.exists() or not list(private_cache.glob("*.bin"))


def test_cache_is_safe_under_concurrent_processes(private_cache):
    program = textwrap.dedent(f"""
        from lowlevel import compiler
        src = {SPILLER!r}
        for arch in ("sm_80", "sm_90"):
            assert ".entry spiller" in compiler.compile(src, "ptx", arch)
            assert compiler.compile(src, "cubin", arch)[:4] == b"\\x7fELF"
    """)
    procs = [subprocess.Popen([sys.executable, "-c", program], env=os.environ.copy(),
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert len(list(private_cache.glob("*.bin"))) == 4 and not list(private_cache.glob(".tmp-*"))
    assert compiler.compile(SPILLER, "cubin", "sm_90")[:4] == b"\x7fELF"


@pytest.mark.parametrize("emulated, arch, driver_version, sass, ptx_isa, expect", [
    (False, 90, 13000, [80, 90], (9, 5), ["sass"]),             # PTX too new: SASS only
    (False, 90, 13050, [80, 90], (9, 5), ["sass", "ptx-jit"]),
    (False, 100, 13050, [80, 90], (9, 5), ["ptx-jit"]),         # NVRTC lacks the arch: JIT
    (True, 90, 13050, [], (9, 5), ["ptx-jit"]),                 # the emulated GPU: PTX only
    (False, 90, 12040, [80, 90], (8, 4), ["sass", "ptx-jit"]),
    (False, 90, 12060, [90], (8, 6), ["sass"]),                 # 12.6 JITs at most ISA 8.5
])
def test_image_choice(emulated, arch, driver_version, sass, ptx_isa, expect):
    assert select.plan(emulated, arch, driver_version, sass, ptx_isa, (13, 5)) == expect


@pytest.mark.parametrize("emulated", [False, True])
def test_image_choice_says_why_nothing_works(emulated):
    with pytest.raises(select.NoLoadableImage) as info:
        select.plan(emulated, 100, 13000, [80, 90], (9, 5), (13, 5))
    text = str(info.value)
    assert "ISA 9.5" in text and "CUDA 13.0" in text and "at most ISA 9.0" in text
    assert ("PTX only" in text) if emulated else ("sm_100" in text)


def test_emulated_gpu_as_an_old_driver_refuses_new_ptx():
    program = ("from lowlevel import cuda\n"
               "try:\n"
               f"    cuda.Module.from_cuda({SAXPY!r})\n"
               "except Exception as e:\n"
               "    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "LOWLEVEL_DRIVER": "emu", "LOWLEVEL_EMU_DRIVER_VERSION": "13000"})
    assert "NoLoadableImage" in out.stdout and "PTX only" in out.stdout, out.stdout + out.stderr


def test_ptx_command_shows_each_stage(tmp_path):
    src = tmp_path / "saxpy.cu"
    src.write_text(SAXPY)
    out = subprocess.run([sys.executable, "-m", "lowlevel", "ptx", str(src), "--arch", "sm_90", "--sass",
                          "--resources", "--emit", "fatbin", "-o", str(tmp_path / "s.fatbin")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for section in ("CUDA C++ source", "== PTX", "== SASS for sm_90", "resources per kernel", "the emulated GPU"):
        assert section in text
    assert "FFMA" in text
    row = re.search(r"^saxpy\s+(\d+)\s", text, re.M)
    assert row and int(row.group(1)) > 0
    assert fatbin_entries((tmp_path / "s.fatbin").read_bytes())


def test_arch_spellings_agree():
    assert compiler.parse_arch("sm_90") == compiler.parse_arch("compute_90") == compiler.parse_arch((9, 0)) == 90
    fat = compiler.compile(SAXPY, "fatbin", (9, 0))          # one architecture, as a tuple
    assert sorted(e["arch"] for e in fatbin_entries(fat) if e["kind"] == KIND_ELF) == [90]

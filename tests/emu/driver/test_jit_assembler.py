"""The emulated driver's JIT runs ptxas first (lowlevel/emu/driver/assembler.py): PTX ptxas refuses
is refused with ptxas's log, the JIT options reach ptxas, and the kernel figures
cuFuncGetAttribute reports are ptxas's.

Tests that take the `driver` fixture state what a real driver does (they run on a GPU too
where there is one); the others look inside the emulator.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from lowlevel import compiler, cuda, kernels
from lowlevel.emu.driver import assembler

VECTOR_ADD = (pathlib.Path(__file__).resolve().parents[3] / "ptx" / "vector_add.ptx").read_text()

# PTX that loaded and ran on the emulated GPU before, though ptxas refuses it:
# (what is wrong, the line of ptx/vector_add.ptx, what it becomes).
REFUSED_BY_PTXAS = [
    ("a 64-bit source of mul.wide.u32", "mul.wide.u32    %rd0, %r0, %r1", "mul.wide.u32    %r0, %rd0, %r1"),
    ("cvt.u64.u32 into a 32-bit register", "cvt.u64.u32     %rd1, %r2", "cvt.u64.u32     %r2, %rd1"),
    ("add.rn.f64 on .f32 registers", "add.rn.f32      %f2, %f0, %f1", "add.rn.f64      %f2, %f0, %f1"),
    ("a label defined twice", "DONE:", "DONE:\nDONE:"),
    ("a register declared twice", ".reg .b32   %r<4>;", ".reg .b32   %r<4>;\n    .reg .b32   %r<4>;"),
    (".version given twice", ".version 7.0 ", ".version 7.0\n.version 7.0 "),
    (".version 7.0 with .target sm_90", ".target sm_60", ".target sm_90"),
    (".target sm_10 (cvta.to needs sm_20)", ".target sm_60", ".target sm_10"),
    ("a shift amount that overflows", "shl.b64         %rd7, %rd2, 2", "shl.b64         %rd7, %rd2, 99999999999999999999999"),
]

HUNGRY = r'''
extern "C" __global__ void hungry(const float4* in, float* out) {
    float4 v[12];
    #pragma unroll
    for (int i = 0; i < 12; i++) v[i] = in[threadIdx.x * 12 + i];
    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < 12; i++)
        #pragma unroll
        for (int j = 0; j < 12; j++)
            s += v[i].x * v[j].y + v[i].z * v[j].w;
    out[threadIdx.x] = s;
}'''


@pytest.fixture
def load():
    """Load PTX; the modules are unloaded at the end of the test, here, on the test's
    thread (a Module and its Functions form a cycle that the garbage collector would
    otherwise free on whichever thread it runs)."""
    loaded = []

    def load_ptx(ptx, options=None):
        loaded.append(cuda.Module.from_ptx(ptx, options))
        return loaded[-1]
    yield load_ptx
    cuda.synchronize()
    for module in loaded:
        module.unload()


def emu_only(driver):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")


def standalone_ptxas() -> str:
    from cuda.pathfinder import find_nvidia_binary_utility
    path = find_nvidia_binary_utility("ptxas")
    if path is None:
        pytest.skip("no standalone ptxas: pip install nvidia-cuda-nvcc")
    return path


@pytest.mark.parametrize("what, line, becomes", REFUSED_BY_PTXAS, ids=[c[0] for c in REFUSED_BY_PTXAS])
def test_ptx_that_ptxas_refuses_is_invalid_ptx(driver, what, line, becomes):
    assert line in VECTOR_ADD
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(VECTOR_ADD.replace(line, becomes, 1))
    assert info.value.name == "CUDA_ERROR_INVALID_PTX", what
    assert "ptxas" in info.value.log and "error" in info.value.log, info.value.log


def test_the_refusal_log_is_ptxas_s_naming_the_line(driver):
    emu_only(driver)
    bad = VECTOR_ADD.replace("mul.wide.u32    %rd0, %r0, %r1", "mul.wide.u32    %r0, %rd0, %r1", 1)
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(bad)
    assert "line 49; error   : Arguments mismatch for instruction 'mul.wide'" in info.value.log, info.value.log
    assert "NVJITLINK" not in info.value.log        # ptxas's log, as the driver's JIT writes it


def test_valid_ptx_the_emulator_cannot_run_says_so(driver):
    emu_only(driver)
    ptx = VECTOR_ADD.replace(".version 7.0", ".version 8.0").replace("DONE:", "    pmevent 1;\nDONE:")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(ptx)
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "valid PTX that the emulated GPU cannot run" in info.value.log and "pmevent" in info.value.log
    assert "at line 79" in info.value.log, info.value.log


def test_driver_version_checks_come_before_ptxas(driver):
    emu_only(driver)
    newer_target = VECTOR_ADD.replace(".version 7.0", ".version 8.6").replace(".target sm_60", ".target sm_100")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(newer_target)
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU", info.value.log
    newer_isa = VECTOR_ADD.replace(".version 7.0", ".version 9.9")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(newer_isa)
    assert info.value.name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", info.value.log


def test_num_regs_is_ptxas_s_figure(driver, tmp_path):
    ptxas = standalone_ptxas()
    source = tmp_path / "vector_add.ptx"
    source.write_text(VECTOR_ADD)
    out = subprocess.run([ptxas, "-arch=sm_90", "-v", str(source), "-o", str(tmp_path / "out.cubin")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    registers = int(next(line for line in (out.stdout + out.stderr).splitlines() if "Used" in line).split()[4])
    f = kernels.module("vector_add").get_function("vector_add")
    assert f.num_regs == registers == 12
    assert (f.attribute("SHARED_SIZE_BYTES"), f.attribute("LOCAL_SIZE_BYTES"), f.attribute("CONST_SIZE_BYTES")) == (0, 0, 0)


def test_max_registers_reaches_ptxas(driver, rng, load):
    ptx = compiler.compile(HUNGRY, "ptx", "sm_90")
    free = load(ptx).get_function("hungry")
    capped = load(ptx, {"MAX_REGISTERS": 32}).get_function("hungry")
    assert free.num_regs > 32, free.num_regs
    assert capped.num_regs <= 32, capped.num_regs
    assert capped.attribute("LOCAL_SIZE_BYTES") > 0          # the rest spills to local memory
    x = rng.standard_normal((32, 12, 4), dtype=np.float32)
    din, dout = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(32 * 4)
    cuda.memcpy_htod(din, x)
    capped.launch(1, 32, (din, dout))
    got = np.full(32, np.nan, np.float32)
    cuda.memcpy_dtoh(got, dout)
    v = x.astype(np.float64)
    want = (v[:, :, 0].sum(1) * v[:, :, 1].sum(1) + v[:, :, 2].sum(1) * v[:, :, 3].sum(1))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_shared_and_constant_figures(driver, load):
    src = r'''
__constant__ float coef[40];
extern "C" __global__ void k(float* out) {
    __shared__ float s[300];
    s[threadIdx.x] = coef[threadIdx.x % 40];
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 300];
}'''
    f = load(compiler.compile(src, "ptx", "sm_90")).get_function("k")
    assert f.attribute("SHARED_SIZE_BYTES") == 1200
    assert f.attribute("CONST_SIZE_BYTES") == 160


def test_info_log_is_ptxas_s(driver):
    emu_only(driver)
    module = cuda.Module.from_ptx(VECTOR_ADD)
    assert "Used 12 registers" in module.info_log, module.info_log
    assert "assembled by ptxas" in module.info_log and "emulated: vector_add" in module.info_log


def test_emulator_s_own_checks_when_told(driver, monkeypatch):
    emu_only(driver)
    monkeypatch.setenv(assembler.ENV, "0")
    assert assembler.active() is None
    assert assembler.description() == "the emulator's own checks (LOWLEVEL_EMU_ASSEMBLER=0)"
    module = cuda.Module.from_ptx(VECTOR_ADD)
    assert "the emulator's own checks" in module.info_log
    with pytest.raises(cuda.CudaError) as info:          # its own refusals still work
        cuda.Module.from_ptx(VECTOR_ADD.replace("add.rn.f32", "frobnicate.f32"))
    assert info.value.name == "CUDA_ERROR_INVALID_PTX" and "frobnicate" in info.value.log
    monkeypatch.delenv(assembler.ENV)
    assert assembler.description().startswith("ptxas")


def test_lowlevel_info_says_which_checks_ran():
    for setting, says in (("1", "PTX JIT: ptxas via nvJitLink 13."), ("0", "PTX JIT: the emulator's own checks")):
        env = {**os.environ, "LOWLEVEL_DRIVER": "emu", assembler.ENV: setting}
        out = subprocess.run([sys.executable, "-m", "lowlevel", "info"], capture_output=True, text=True,
                             timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        assert says in out.stdout, out.stdout


# ---- inside the assembler module -----------------------------------------------------------
def test_jit_options_become_ptxas_flags():
    assert assembler.jit_flags({"MAX_REGISTERS": 32}) == ["-maxrregcount=32"]
    assert assembler.jit_flags({"OPTIMIZATION_LEVEL": 4}) == ["-O3"]
    assert assembler.jit_flags({"OPTIMIZATION_LEVEL": 1, "GENERATE_LINE_INFO": 1}) == ["-O1", "-lineinfo"]
    assert assembler.jit_flags({"OPTIMIZATION_LEVEL": 3, "GENERATE_DEBUG_INFO": 1}) == ["-g"]
    # 1024 threads of 64 registers fill the 65536-register file; 256 threads leave the 255 maximum
    assert assembler.jit_flags({"THREADS_PER_BLOCK": 1024}) == ["-maxrregcount=64"]
    assert assembler.jit_flags({"THREADS_PER_BLOCK": 256}) == ["-maxrregcount=255"]
    assert assembler.jit_flags({"THREADS_PER_BLOCK": 1024, "MAX_REGISTERS": 40}) == ["-maxrregcount=40"]
    assert assembler.jit_flags({"MAX_REGISTERS": 0, "GENERATE_DEBUG_INFO": 0}) == []


def test_figures_from_a_linked_log_count_the_callees():
    log = """ptxas info    : Function properties for _Z6helperPfi
ptxas         .     72 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'kk' for 'sm_90'
ptxas info    : Function properties for kk
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 1200 bytes smem
info    : 40 bytes gmem, 160 bytes cmem[3]
info    : Function properties for 'kk':
info    : used 35 registers, used 7 barriers, 72 stack, 2224 bytes smem, 540 bytes cmem[0], 0 bytes lmem"""
    assert assembler.parse_figures(log) == {"kk": assembler.KernelFigures(35, 1200, 72, 160)}
    whole_program = """ptxas info    : Compiling entry function 'kk' for 'sm_90'
ptxas info    : Function properties for kk
    64 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 31 registers, used 0 barriers, 64 bytes cumulative stack size
ptxas info    : Function properties for _Z6helperPfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"""
    assert assembler.parse_figures(whole_program) == {"kk": assembler.KernelFigures(31, 0, 64, None)}


def test_the_standalone_ptxas_serves_when_nvjitlink_is_absent():
    path = standalone_ptxas()
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    program = assembler.PtxasProgram(path, version.rsplit("V", 1)[-1].strip())
    good = assembler.assemble(program, VECTOR_ADD.encode(), "sm_90", [])
    assert good.accepted and good.figures["vector_add"].registers == 12
    bad = assembler.assemble(program, VECTOR_ADD.replace("DONE:", "DONE:\nDONE:").encode(), "sm_90", [])
    assert not bad.accepted and "Duplicate definition of label 'DONE'" in bad.error_log


def test_results_are_cached_on_disk_and_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_CACHE_DIR", str(tmp_path))
    asm = assembler.active()
    if asm is None:
        pytest.skip("no assembler here")
    ptx = VECTOR_ADD.replace("vector_add", "cached_add").encode()
    first = assembler.assemble(asm, ptx, "sm_90", ["-O2"])
    [entry] = tmp_path.glob("ptxas-*.json")
    assembler.clear_memory_cache()

    class Refuses:                      # an assembler that must not be asked again
        identity, description = asm.identity, asm.description

        def run(self, *args):
            raise AssertionError("assembled again despite the cache")
    assert assembler.assemble(Refuses(), ptx, "sm_90", ["-O2"]) == first
    # a damaged entry is a miss, never a wrong answer
    data = json.loads(entry.read_text())
    data["body"]["accepted"] = not data["body"]["accepted"]
    entry.write_text(json.dumps(data))
    assembler.clear_memory_cache()
    again = assembler.assemble(asm, ptx, "sm_90", ["-O2"])       # assembled anew
    assert (again.accepted, again.figures) == (first.accepted, first.figures)
    assert json.loads(entry.read_text())["body"]["accepted"] == first.accepted     # and stored again
    # other options, another entry
    assembler.assemble(asm, ptx, "sm_90", ["-O1"])
    assert len(list(tmp_path.glob("ptxas-*.json"))) == 2
    assert not list(tmp_path.glob(".tmp-*"))


def test_no_disk_cache_when_caching_is_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LOWLEVEL_CACHE", "0")
    if assembler.active() is None:
        pytest.skip("no assembler here")
    assembler.assemble(assembler.active(), VECTOR_ADD.replace("vector_add", "uncached").encode(), "sm_90", [])
    assert not list(tmp_path.iterdir())

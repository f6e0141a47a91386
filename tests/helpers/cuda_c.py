"""CUDA C to PTX at test time, by NVRTC (through cuda-python) or by nvcc when present.

Tests use it to run what the compilers really emit, not PTX written to suit the emulator.
"""
import functools
import pathlib
import subprocess
import tempfile

import pytest

from lowlevel import compiler, cuda
from lowlevel.capi.versions import max_ptx_isa, ptx_isa_version
from lowlevel.compiler.toolchain import find_tool


def nvrtc_ptx(source: str, arch: str = "compute_80", options=()) -> str:
    """PTX for `source` from NVRTC, through lowlevel.compiler; extern "C" kernels keep their
    names. A compile error fails the test with NVRTC's log."""
    try:
        return compiler.compile(source, "ptx", arch, tuple(options))
    except compiler.ToolMissing as e:
        pytest.skip(str(e))


@functools.cache
def _nvcc() -> str | None:
    return find_tool("nvcc")


def nvcc_ptx(source: str, arch: str = "sm_80", options=("-O3",)) -> str:
    """PTX for `source` from nvcc (skips the test when nvcc is not installed)."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (pip install nvidia-cuda-nvcc)")
    includes = []
    if "#include <" in source:
        # The nvcc wheel's cuda_fp16.h includes <nv/target>, which lives with CCCL.
        from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (only for such sources)
        cccl = find_nvidia_header_directory("cccl")
        if cccl is None:
            pytest.skip("<nv/target> (CCCL) not found for nvcc's CUDA headers")
        includes.append(f"-I{cccl}")
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "kernels.cu"
        src.write_text(source)
        out = pathlib.Path(tmp) / "kernels.ptx"
        result = subprocess.run([nvcc, "-ptx", f"-arch={arch}", *options, *includes, str(src), "-o", str(out)],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            if "host compiler" in result.stderr or "gcc" in result.stderr:
                pytest.skip(f"nvcc cannot run here: {result.stderr.strip()[:200]}")
            raise AssertionError(f"nvcc failed:\n{result.stderr}")
        return out.read_text()


COMPILERS = {
    "nvrtc": lambda src, fast_math=False: nvrtc_ptx(src, options=["--use_fast_math"] if fast_math else []),
    "nvcc-O3": lambda src, fast_math=False: nvcc_ptx(src, options=["-O3", *(["--use_fast_math"] if fast_math else [])]),
}


def load_compiled(ptx: str):
    """A module from compiler-made PTX on the driver in use.

    NVRTC and nvcc 13.5 write PTX ISA 9.5; a real driver older than CUDA 13.5 cannot JIT it
    (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). There the PTX is assembled for the GPU's own
    architecture with nvJitLink and loaded as SASS, as Module.from_cuda does."""
    drv = cuda.get_driver()
    if drv.runs_sass and ptx_isa_version(ptx) > max_ptx_isa(drv.version()):
        return cuda.Module.from_cubin(compiler.link_ptx(ptx, cuda.GPU(0).compute_capability))
    return cuda.Module.from_ptx(ptx)

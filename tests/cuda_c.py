"""CUDA C to PTX at test time, by NVRTC (through cuda-python) or by nvcc when present.

Tests use it to run what the compilers really emit, not PTX written to suit the emulator.
"""
import functools
import pathlib
import subprocess
import tempfile

import pytest


def nvrtc_ptx(source: str, arch: str = "compute_80", options=()) -> str:
    """PTX for `source` from NVRTC; extern "C" kernels keep their names."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"kernels.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *[o.encode() for o in options]]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise AssertionError(f"NVRTC failed: {log.decode(errors='replace')}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@functools.cache
def _nvcc() -> str | None:
    from lowlevel.toolchain import find_tool
    return find_tool("nvcc")


def nvcc_ptx(source: str, arch: str = "sm_80", options=("-O3",)) -> str:
    """PTX for `source` from nvcc (skips the test when nvcc is not installed)."""
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (pip install nvidia-cuda-nvcc)")
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "kernels.cu"
        src.write_text(source)
        out = pathlib.Path(tmp) / "kernels.ptx"
        result = subprocess.run([nvcc, "-ptx", f"-arch={arch}", *options, str(src), "-o", str(out)],
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

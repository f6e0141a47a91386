"""`lowlevel trace matmul --library ptx|cublas`: the route through the handwritten kernels
(sgemm_tiled, hgemm_mma) beside cuBLAS's, and a shape or dtype the kernels refuse as a
clear error."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trace(*args):
    return subprocess.run([sys.executable, "-m", "lowlevel", "trace", "matmul", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "LOWLEVEL_DRIVER": "emu"})


@pytest.mark.parametrize("dtype, kernel", [("float32", "sgemm_tiled"), ("float16", "hgemm_mma")])
def test_library_ptx_shows_the_handwritten_kernel(dtype, kernel):
    out = trace("--size", "64", "--dtype", dtype, "--library", "ptx")
    assert out.returncode == 0, out.stderr
    assert "L4  kernel libraries (matmul library: ptx)" in out.stdout
    assert re.search(rf"{kernel} \({kernel}, grid \(1, 1\) block \(\d+, 1, 1\)\)", out.stdout)
    assert "cublas" not in out.stdout.lower().split("l4  kernel libraries")[1].split("l5")[0]


def test_library_cublas_shows_cublas():
    out = trace("--size", "64", "--dtype", "float16", "--library", "cublas")
    assert out.returncode == 0, out.stderr
    assert "(matmul library: cublas)" in out.stdout and "cuBLAS gemm (float16)" in out.stdout


def test_a_shape_the_kernel_refuses_is_a_clear_error():
    out = trace("--size", "12", "--dtype", "float16", "--library", "ptx")
    assert out.returncode == 2 and "matmul on the ptx library: hgemm_mma multiplies (12 x 12) @ (12 x 12)" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "lowlevel", "trace", "add", "--size", "8", "--library", "ptx"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "LOWLEVEL_DRIVER": "emu"})
    assert out.returncode == 2 and "--library chooses the matmul library; add has none" in out.stderr
    assert "Traceback" not in out.stderr

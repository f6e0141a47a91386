"""The acceptance oracle of handwritten sm_90 PTX in the tests: NVIDIA's ptxas (from the
nvidia-cuda-nvcc wheel, found with cuda.pathfinder). A test assembles its kernel with it
first, so that what the emulator runs is PTX a real toolchain takes for the emulated
device's architecture; without a ptxas the test skips."""
import functools
import pathlib
import subprocess
import tempfile

import pytest


@functools.cache
def _ptxas():
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
        return find_nvidia_binary_utility("ptxas")
    except ImportError:
        return None


def assemble_sm90(text: str) -> None:
    """Assemble `text` with ptxas -arch=sm_90; fail with ptxas's log if it refuses."""
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no standalone ptxas to check the PTX with: pip install nvidia-cuda-nvcc")
    with tempfile.TemporaryDirectory() as folder:
        src = pathlib.Path(folder) / "k.ptx"
        src.write_text(text)
        done = subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(src.with_suffix(".cubin"))],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"ptxas -arch=sm_90 refuses the kernel:\n{done.stderr}"

"""ptxas, the acceptance oracle for PTX: does it assemble a text for the emulated device
(sm_90)? Tests of what the emulator refuses at load check each refusal against ptxas itself
where it is installed (ptxas_refusal); tests of handwritten sm_90 kernels assemble them
first (assemble_sm90), so that what the emulator runs is PTX a real toolchain takes."""
import pathlib
import subprocess
import tempfile

import pytest

from lowlevel.compiler.toolchain import find_tool


def ptxas_refusal(ptx: str, arch: str = "sm_90") -> str | None:
    """ptxas's error log for `ptx`, "" when it assembles it, None when ptxas is absent."""
    tool = find_tool("ptxas")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "k.ptx"
        src.write_text(ptx)
        run = subprocess.run([tool, f"-arch={arch}", str(src), "-o", str(pathlib.Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, timeout=120)
    return "" if run.returncode == 0 else (run.stderr or run.stdout or "refused")


def assemble_sm90(text: str) -> None:
    """Assemble `text` with ptxas -arch=sm_90; fail with ptxas's log if it refuses."""
    log = ptxas_refusal(text)
    if log is None:
        pytest.skip("no standalone ptxas to check the PTX with: pip install nvidia-cuda-nvcc")
    assert log == "", f"ptxas -arch=sm_90 refuses the kernel:\n{log}"

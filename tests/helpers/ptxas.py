"""ptxas, the acceptance oracle for PTX: does it assemble a text for the emulated device
(sm_90)? For tests of what the emulator refuses at load, so that each refusal is checked
against ptxas itself where it is installed, not only against a note of what it said."""
import pathlib
import subprocess
import tempfile

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

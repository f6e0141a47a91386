"""What a new user hit in the CLI and the README (issue 15, section 4): `trace --device cpu`,
`ptx --option -G`, a missing file, the README's tensor example, and explain() in a REPL."""
import contextlib
import io
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNEL = 'extern "C" __global__ void scale(float *x, float a, int n) ' \
         '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n'


def lowlevel(*args):
    return subprocess.run([sys.executable, "-m", "lowlevel", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "LOWLEVEL_DRIVER": "emu"})


def test_trace_on_the_cpu_reports_no_gpu_work():
    out = lowlevel("trace", "add", "--size", "16", "--device", "cpu")
    assert out.returncode == 0, out.stderr
    assert "EMULATED GPU" not in out.stdout and "GPU work (" not in out.stdout
    assert "emulated GPU work" not in out.stdout and "device time between events" not in out.stdout
    assert "the CPU backend" in out.stdout.splitlines()[0]
    assert re.search(r"the traced call: \d+\.\d us of host work on the CPU backend; no GPU work ran", out.stdout)


def test_trace_on_the_cpu_still_writes_its_timeline(tmp_path):
    out = lowlevel("trace", "add", "--size", "16", "--device", "cpu", "--timeline", str(tmp_path / "t.json"))
    assert out.returncode == 0, out.stderr
    assert f"written to {tmp_path / 't.json'}" in out.stdout and (tmp_path / "t.json").is_file()


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "scale.cu"
    path.write_text(KERNEL)
    return path


def registers(text):
    return int(re.search(r"^scale\s+(\d+)", text, re.M).group(1))


def needs_toolchain():
    from lowlevel.compiler import toolchain
    missing = [n for n, what in toolchain.summary().items() if n in ("nvrtc", "nvjitlink") and "not" in what]
    if missing:
        pytest.skip(f"no {', '.join(missing)} here")


@pytest.mark.parametrize("form", [["--option", "-G"], ["--option=-G"], ["-O", "-G"]])
def test_ptx_takes_debug_code_in_each_spelling(kernel_file, form):
    needs_toolchain()
    out = lowlevel("ptx", str(kernel_file), *form, "--resources")
    # ptxas refuses to optimise debug PTX ("Optimized debugging not supported"): -O0 for it
    assert out.returncode == 0, out.stderr
    assert ".target sm_90, debug" in out.stdout
    assert registers(out.stdout) > 0


def test_ptx_levels_reach_ptxas_not_nvrtc(kernel_file):
    needs_toolchain()
    o0, o3 = (lowlevel("ptx", str(kernel_file), level, "--resources") for level in ("-O0", "-O3"))
    assert o0.returncode == 0 and o3.returncode == 0, o0.stderr + o3.stderr
    assert registers(o0.stdout) > registers(o3.stdout)      # unoptimised code keeps more registers live


def test_ptx_debug_code_with_O3_is_ptxas_own_refusal(kernel_file):
    needs_toolchain()
    out = lowlevel("ptx", str(kernel_file), "--option", "-G", "-O3", "--resources")
    assert out.returncode == 1 and "Optimized debugging not supported" in out.stderr


def test_ptx_of_a_missing_file_is_one_line(tmp_path):
    out = lowlevel("ptx", str(tmp_path / "nope.cu"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"lowlevel ptx: cannot read {tmp_path / 'nope.cu'}: No such file or directory"


def readme_block(heading):
    text = (ROOT / "README.md").read_text()
    return re.search(rf"^{re.escape(heading)}\n\n```python\n(.*?)```", text, re.S | re.M).group(1)


def test_the_readme_tensor_example_uses_b_and_prints_something_meaningful(driver):
    code = readme_block("### A tensor op through the five layers")
    assert re.search(r"\bb\b.*=", code) and re.search(r"[^.\w]b\)|@ b\b", code)      # b is made and used
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    sums = np.array(lines[0].strip("[]").split(), float)
    assert np.allclose(sums, 1.0, atol=1e-5)                    # each softmax row sums to 1
    columns = np.array(lines[1].strip("[]").split(), int)
    assert len(set(columns)) > 1                                # not one value repeated
    assert "<- chosen" in out.getvalue()                        # explain's route, printed once
    assert out.getvalue().count("matmul: key set") == 1


def test_explain_shows_once_in_a_repl(driver):
    import lowlevel as ll
    a = ll.ones(2, 2, device="cuda")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sys.displayhook(ll.explain("add", a, a))               # what the REPL does with the value
    assert out.getvalue().count("add: key set") == 1 and "\\n" not in out.getvalue()

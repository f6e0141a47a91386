"""What reports device times says what they are: measured, the emulator's, or modelled
(LOWLEVEL_EMU_TIMING=model, read as each context is made: a fresh process per case)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELLED = "modelled (H200 time model)"


def run(*args, timing: str | None):
    env = {**os.environ, "LOWLEVEL_DRIVER": "emu"}
    env.pop("LOWLEVEL_EMU_TIMING", None)
    if timing is not None:
        env["LOWLEVEL_EMU_TIMING"] = timing
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)


@pytest.mark.parametrize("timing, says", [(None, "emulator CPU time"), ("model", MODELLED)])
def test_info_and_trace_say_what_device_times_are(timing, says):
    info = run("-m", "lowlevel", "info", timing=timing)
    assert info.returncode == 0, info.stderr
    assert f"device times: {says}" in info.stdout
    trace = run("-m", "lowlevel", "trace", "add", "--size", "16", timing=timing)
    assert trace.returncode == 0, trace.stderr
    assert "device time between events around the call: " in trace.stdout
    assert f"(the emulated GPU: {says})" in trace.stdout
    assert (" M/s)" in trace.stdout) == (timing is None)        # no emulator rate over modelled time


def test_an_unknown_timing_is_refused_by_name():
    out = run("-c", "from lowlevel import cuda; cuda.mem_alloc(16)", timing="fast")
    assert out.returncode != 0
    assert "CUDA_ERROR_INVALID_VALUE" in out.stderr and "LOWLEVEL_EMU_TIMING='fast'" in out.stderr


def test_the_readme_time_model_example_runs_verbatim():
    page = open(os.path.join(ROOT, "docs", "time-model.md")).read()
    section = page[page.index("## The H200 time model"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = run("-c", code, timing=None)
    assert out.returncode == 0, out.stderr
    timing, ms = out.stdout.split("\n")[:2]
    assert timing == MODELLED
    assert (16 << 20) / 55e9 * 1e3 <= float(ms) < 100        # the copy alone: 0.3 ms at 55 GB/s

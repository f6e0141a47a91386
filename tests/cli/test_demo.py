"""`lowlevel demo`: the list, and every demo on the emulated GPU with and without the H200
time model, each in its own process (--model must be set before the driver starts)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from lowlevel.cli.demo import DEMOS

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIGURES = re.compile(r"^   \S.*?\s(\d+\.\d{3})\s+(\d+\.\d{3}|-)\s+\d+\.\d\d\s+(\d+\.\d\d|-)$", re.M)


def run(*args, script=None, driver="emu"):
    command = [sys.executable, str(script), *args] if script else [sys.executable, "-m", "lowlevel", "demo", *args]
    env = {k: v for k, v in os.environ.items() if k != "LOWLEVEL_EMU_TIMING"}
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**env, "LOWLEVEL_DRIVER": driver, "PYTHONPATH": str(ROOT)})   # a script: lowlevel as installed
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_demo_lists_the_demos():
    text = run()
    for name in DEMOS:
        assert re.search(rf"^  {name}\s+\S", text, re.M), name
    assert sorted(DEMOS) == sorted(p.stem for p in (ROOT / "tools" / "demos").glob("*.py")
                                   if p.stem not in ("__init__", "demo_kit"))


@pytest.mark.parametrize("model", [False, True], ids=["emulator", "model"])
@pytest.mark.parametrize("name", DEMOS)
def test_each_demo_runs_and_reports(name, model, tmp_path):
    trace = tmp_path / f"{name}.json"
    text = run(name, *(["--model"] if model else []), "--trace", str(trace))
    rows = FIGURES.findall(text)
    assert len(rows) >= 2 and any(dev != "-" and float(dev) > 0 for _, dev, _ in rows), text
    assert ("MODELLED for an H200" in text) == model and ("the EMULATED GPU's own CPU time" in text) == (not model)
    assert "-- timeline (lowlevel.profile().report())" in text
    assert f"-- what this shows ({'model' if model else 'emulator'} times)" in text


@pytest.mark.parametrize("name", DEMOS)
def test_each_demo_runs_on_a_real_gpu(name, tmp_path):
    from lowlevel import cuda
    if cuda.real_driver_status():
        pytest.skip(f"no real GPU here: {cuda.real_driver_status()}")
    text = run(name, "--model", "--trace", str(tmp_path / "t.json"), driver="cuda")
    assert len(FIGURES.findall(text)) >= 2 and "measured on a real GPU" in text   # --model changes nothing there


def test_a_demo_runs_as_a_plain_script(tmp_path):
    text = run("--trace", str(tmp_path / "t.json"), script=ROOT / "tools" / "demos" / "graph_replay.py")
    assert "eager: 20 launch calls" in text and len(FIGURES.findall(text)) == 2


def test_an_unknown_demo_is_refused():
    out = subprocess.run([sys.executable, "-m", "lowlevel", "demo", "nope"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "no demo 'nope'; the demos are launch_async" in out.stderr

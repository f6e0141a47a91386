"""`lowlevel demo`: the list, and every demo on the emulated GPU with and without the H200
time model, each in its own process (--model must be set before the driver starts)."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from helpers import chrome_trace

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
    assert f"-- trace written to {trace}" in text and "ui.perfetto.dev" in text
    found = chrome_trace.check(json.loads(trace.read_text()))      # fields, balanced spans, flows
    device = [s for s in found["spans"] if found["processes"][s["pid"]].startswith("device")]
    kernels = [s for s in device if s.get("cat") == "kernel"]
    assert device and len(found["flows"]) >= len(kernels)              # a flow from each launch
    assert any("modelled" in name for name in found["processes"].values()) == model


def spans_overlap(a, b) -> bool:
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def test_the_two_stream_demo_overlaps_copies_and_kernels_in_the_model(tmp_path):
    trace = tmp_path / "two_streams.json"
    run("two_streams", "--model", "--trace", str(trace))
    found = chrome_trace.check(json.loads(trace.read_text()))
    device = [s for s in found["spans"] if found["processes"][s["pid"]].startswith("device")]
    streams = sorted({s["tid"] for s in device})
    assert len(streams) == 2, found["threads"]
    copies = [s for s in device if s["cat"] == "copy" and s["tid"] == streams[1]]
    kernels = [s for s in device if s["cat"] == "kernel" and s["tid"] == streams[0]]
    # the second stream's copies run while the first stream's kernels do (and the other way)
    assert any(spans_overlap(c, k) for c in copies for k in kernels), (copies, kernels)
    copies0 = [s for s in device if s["cat"] == "copy" and s["tid"] == streams[0]]
    kernels1 = [s for s in device if s["cat"] == "kernel" and s["tid"] == streams[1]]
    assert any(spans_overlap(c, k) for c in copies0 for k in kernels1), (copies0, kernels1)


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

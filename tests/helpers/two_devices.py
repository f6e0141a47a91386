"""Checks that need two devices run in a fresh interpreter: the emulated GPU presents
LOWLEVEL_EMU_DEVICES devices, read once at cuInit, and the other tests expect one."""
import os
import pathlib
import subprocess
import sys

import pytest

from lowlevel import cuda


def run_checks(script: str, kind: str, checks: list[str]) -> None:
    """Run the test file `script` as a program on driver `kind` with two (small) emulated
    devices; it must print "ok:NAME" for each of `checks`, in order."""
    if kind == "cuda" and cuda.device_count() < 2:
        pytest.skip("one GPU here: these checks need two")
    path = pathlib.Path(script).resolve()
    tests = path.parents[1]
    # the helpers, and the lowlevel this test imported (the checkout's, installed or not)
    roots = (str(tests), str(pathlib.Path(cuda.__file__).parents[2]), os.environ.get("PYTHONPATH", ""))
    env = dict(os.environ, LOWLEVEL_DRIVER=kind, LOWLEVEL_EMU_DEVICES="2", LOWLEVEL_EMU_MEMORY="256M",
               PYTHONPATH=os.pathsep.join(p for p in roots if p))
    result = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{path.name} failed:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.split() == [f"ok:{name}" for name in checks], result.stdout


def main(namespace: dict) -> None:
    """The program side: run every check_* function of `namespace` in order."""
    for name, check in list(namespace.items()):
        if name.startswith("check_"):
            check()
            print(f"ok:{name}", flush=True)

"""The emulator's layout keeps its promises: it imports nothing of lowlevel but capi, its
modules import each other in no cycle, no file is over 500 lines, and no module reaches
for another's private (underscore) names."""
import pathlib
import shutil
import subprocess

import pytest

EMU = pathlib.Path(__file__).resolve().parents[2] / "lowlevel" / "emu"


@pytest.fixture(scope="module")
def graph():
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("lowlevel")


def emu_modules(graph):
    return sorted(m for m in graph.modules if m == "lowlevel.emu" or m.startswith("lowlevel.emu."))


def test_the_emulator_imports_only_capi(graph):
    outside = {(m, i) for m in emu_modules(graph) for i in graph.find_modules_directly_imported_by(m)
               if i.startswith("lowlevel") and not i.startswith(("lowlevel.emu", "lowlevel.capi"))}
    assert not outside, f"emu imports outside capi: {sorted(outside)}"


def test_no_import_cycle_inside_the_emulator(graph):
    cycles = [(m, i) for m in emu_modules(graph) for i in graph.find_modules_directly_imported_by(m)
              if i.startswith("lowlevel.emu") and graph.chain_exists(importer=i, imported=m)]
    assert not cycles, f"modules of emu that import each other in a cycle: {cycles}"


def test_no_emulator_file_is_over_500_lines():
    long = {str(p.relative_to(EMU)): n for p in EMU.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, f"files over 500 lines: {long}"


def test_no_private_names_are_used_across_modules():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    run = subprocess.run([ruff, "check", "--no-cache", "--select", "SLF001,PLC2701", "--preview", str(EMU)],
                         capture_output=True, text=True, cwd=EMU.parents[1])
    assert run.returncode == 0, run.stdout + run.stderr

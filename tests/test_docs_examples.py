"""The README and docs/ hold up: every ```python example runs verbatim, each in a fresh
interpreter on every driver present (the examples assert their own results), every relative
link resolves, and the README stays a short front door with the two set-up commands first.

An example whose first lines say `# LOWLEVEL_EMU_DEVICES=2` needs two devices: the emulated
GPU gets them from that variable, a real machine must have two GPUs (else it is skipped).
Examples run in a temporary directory, so files they write (a trace, a plot) land there.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from lowlevel import cuda

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEVICES = re.compile(r"^# LOWLEVEL_EMU_DEVICES=(\d+)", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")
README_MAX_LINES = 300
FIRST_SCREEN = 40            # lines


def examples(page: pathlib.Path) -> list[tuple[str, str]]:
    """(the heading above it, code) of each ```python block of `page`, in order (a `#` line
    inside a block is code, not a heading)."""
    found, heading, code, fenced = [], page.name, None, False
    for line in page.read_text().splitlines(keepends=True):
        if fenced:
            if line.startswith("```"):
                if code is not None:
                    found.append((heading, "".join(code)))
                code, fenced = None, False
            elif code is not None:
                code.append(line)
        elif line.startswith("```"):
            code, fenced = ([] if line.strip() == "```python" else None), True
        elif re.match(r"#{1,4} ", line):
            heading = line.lstrip("#").strip()
    return found


CASES = [(page, heading, code) for page in PAGES for heading, code in examples(page)]
IDS = [f"{page.relative_to(ROOT)}: {heading}" for page, heading, _ in CASES]


@pytest.mark.parametrize("page, heading, code", CASES, ids=IDS)
def test_example_runs_verbatim(driver, page, heading, code, tmp_path):
    devices = DEVICES.search(code)
    env = dict(os.environ, LOWLEVEL_DRIVER=driver.kind, LOWLEVEL_EMU_MEMORY="256M",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    if devices:
        if driver.kind == "cuda" and cuda.device_count() < int(devices[1]):
            pytest.skip(f"the {heading!r} example needs {devices[1]} GPUs; this machine has {cuda.device_count()}")
        env["LOWLEVEL_EMU_DEVICES"] = devices[1]
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    where = page.relative_to(ROOT)
    assert result.returncode == 0, f"{where}'s example under {heading!r} failed:\n{result.stdout}\n{result.stderr}"


def test_every_page_has_examples_and_every_driver_feature_one():
    assert all(examples(page) for page in PAGES if page.name not in ("architecture.md", "demos.md", "host-path.md"))
    features = [heading for heading, _ in examples(ROOT / "docs" / "driver.md")]
    for title in ("Occupancy", "Clusters", "Cooperative launch", "Managed memory", "Several devices"):
        assert title in features, f"docs/driver.md has no example under {title!r}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    broken = [target for target in LINK.findall(page.read_text())
              if "://" not in target and not target.startswith("#")
              and not (page.parent / target.split("#")[0]).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"
    first_screen = "\n".join(lines[:FIRST_SCREEN])
    assert "pip install -e . && lowlevel trace matmul --size 1024 --dtype float32" in first_screen
    assert "pip install -e '.[test]' && python -m pytest -q" in first_screen
    linked = set(LINK.findall("\n".join(lines)))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"docs pages the README does not link to: {sorted(pages - linked)}"

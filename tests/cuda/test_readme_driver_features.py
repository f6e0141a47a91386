"""Every ```python example of README.md's "## Driver features" section runs verbatim, each in
a fresh interpreter on every driver present (the examples assert their own results). An
example whose first lines say `# LOWLEVEL_EMU_DEVICES=2` needs two devices: the emulated GPU
gets them from that variable, a real machine must have two GPUs (else it is skipped)."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from lowlevel import cuda

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = "## Driver features"
DEVICES = re.compile(r"^# LOWLEVEL_EMU_DEVICES=(\d+)", re.M)


def section_examples(readme: str) -> list[tuple[str, str]]:
    """(subsection title, code) of each ```python block under SECTION, in order."""
    start = readme.index(f"\n{SECTION}\n")
    end = readme.find("\n## ", start + 1)
    text = readme[start:end if end >= 0 else len(readme)]
    examples, title = [], SECTION
    for part in re.split(r"^(### .*)$", text, flags=re.M):
        if part.startswith("### "):
            title = part[4:].strip()
            continue
        examples += [(title, code) for code in re.findall(r"^```python\n(.*?)^```", part, re.S | re.M)]
    return examples


EXAMPLES = section_examples((ROOT / "README.md").read_text())


def test_the_section_has_an_example_for_each_feature():
    titles = [title for title, _ in EXAMPLES]
    assert titles == ["Occupancy", "Clusters", "Cooperative launch", "Managed memory", "Several devices"]


@pytest.mark.parametrize("title, code", EXAMPLES, ids=[title for title, _ in EXAMPLES])
def test_readme_example_runs(driver, title, code):
    devices = DEVICES.search(code)
    env = dict(os.environ, LOWLEVEL_DRIVER=driver.kind, LOWLEVEL_EMU_MEMORY="256M",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    if devices:
        if driver.kind == "cuda" and cuda.device_count() < int(devices[1]):
            pytest.skip(f"the {title!r} example needs {devices[1]} GPUs; this machine has {cuda.device_count()}")
        env["LOWLEVEL_EMU_DEVICES"] = devices[1]
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"README example {title!r} failed:\n{result.stdout}\n{result.stderr}"

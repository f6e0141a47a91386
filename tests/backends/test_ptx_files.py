"""Static checks for the handwritten kernels in ptx/.

Every ``ptx/*.ptx`` file (found by glob, so new files are checked
automatically) must:

* assemble with ptxas for sm_80 and for sm_90 (each file x arch is its own test);
  a file for an architecture-specific target (``.target sm_90a``: wgmma, setmaxnreg)
  assembles for that target only, since no other GPU runs it;
* carry the conservative header: ``.version`` no newer than 7.8 (the files use
  7.0 = CUDA 11.0, so any driver since CUDA 11 can JIT them), a ``.target``
  and ``.address_size 64``; an sm_90a file says ``.version 8.0``, the first PTX ISA
  that knows sm_90a (any driver since CUDA 12.0);
* be commented line by line: every instruction line has a ``//`` comment on
  the same line or on the line just above, because these files are teaching
  material.

These checks need no GPU: ptxas comes from the nvidia-cuda-nvcc wheel and is
found with ``cuda.pathfinder``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

PTX_DIR = Path(__file__).resolve().parents[2] / "ptx"
PTX_FILES = sorted(PTX_DIR.glob("*.ptx"))
ARCHS = ["sm_80", "sm_90"]
MAX_VERSION = (7, 8)
# architecture-specific targets: the newest .version a file for them may say
ARCH_SPECIFIC_MAX_VERSION = {"sm_90a": (8, 0)}


def _ptxas() -> str | None:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility  # noqa: PLC0415  (optional: the test skips without it)
    except ImportError:
        return None
    return find_nvidia_binary_utility("ptxas")


def _ids(paths):
    return [p.name for p in paths]


def test_ptx_directory_has_kernels():
    assert PTX_FILES, f"no *.ptx files found in {PTX_DIR}"


def _strip_block_comments(text: str) -> str:
    """Replace /* ... */ comments by blank lines, keeping line numbers."""
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def _directives(text: str) -> dict[str, str]:
    found = {}
    for line in _strip_block_comments(text).splitlines():
        code = line.split("//", 1)[0].strip()
        m = re.match(r"^\.(version|target|address_size)\s+(.+?)\s*;?\s*$", code)
        if m and m.group(1) not in found:
            found[m.group(1)] = m.group(2)
    return found


def _target(path: Path) -> str:
    return _directives(path.read_text()).get("target", "").split(",")[0].strip()


def _builds():
    """(file, arch) pairs: every arch of ARCHS, or the file's own architecture-specific target."""
    return [pytest.param(p, t if t in ARCH_SPECIFIC_MAX_VERSION else a, id=f"{p.name}-{a}")
            for p in PTX_FILES for t in [_target(p)] for a in ([t] if t in ARCH_SPECIFIC_MAX_VERSION else ARCHS)]


@pytest.mark.parametrize("path, arch", _builds())
def test_ptxas_assembles(path: Path, arch: str, tmp_path: Path):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip(
            "ptxas not found: cuda.pathfinder.find_nvidia_binary_utility('ptxas') "
            "returned None (install the nvidia-cuda-nvcc wheel, e.g. "
            "`pip install cuda-toolkit[nvcc]`, or a CUDA toolkit)"
        )
    out = tmp_path / f"{path.stem}.{arch}.cubin"
    proc = subprocess.run(
        [ptxas, f"-arch={arch}", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"ptxas -arch={arch} {path.name} failed (rc={proc.returncode}):\n"
        f"{proc.stderr}{proc.stdout}"
    )
    assert out.exists() and out.stat().st_size > 0, f"ptxas wrote no output for {path.name}"


@pytest.mark.parametrize("path", PTX_FILES, ids=_ids(PTX_FILES))
def test_header_is_conservative(path: Path):
    d = _directives(path.read_text())
    assert "version" in d, f"{path.name}: no .version directive"
    m = re.fullmatch(r"(\d+)\.(\d+)", d["version"])
    assert m, f"{path.name}: cannot parse .version {d['version']!r}"
    version = (int(m.group(1)), int(m.group(2)))
    assert "target" in d, f"{path.name}: no .target directive"
    newest = ARCH_SPECIFIC_MAX_VERSION.get(_target(path), MAX_VERSION)
    assert version <= newest, (
        f"{path.name}: .version {d['version']} is newer than "
        f"{newest[0]}.{newest[1]}; older drivers could not JIT it"
    )
    assert re.fullmatch(r"sm_\d+a?", d["target"].split(",")[0].strip()), (
        f"{path.name}: unexpected .target {d['target']!r}"
    )
    assert d.get("address_size") == "64", f"{path.name}: expected .address_size 64"


def _is_instruction(code: str) -> bool:
    """True for a line of PTX code that is an instruction (not a directive,
    a label, or bare punctuation such as the braces and parentheses around a
    kernel's parameter list and body)."""
    if not code:
        return False
    if code.startswith("."):  # .version, .entry, .param, .reg, .shared, ...
        return False
    if re.fullmatch(r"[{}()\s;,]+", code):  # punctuation only
        return False
    if re.fullmatch(r"[$%\w]+:", code):  # a label
        return False
    return True


@pytest.mark.parametrize("path", PTX_FILES, ids=_ids(PTX_FILES))
def test_every_instruction_is_commented(path: Path):
    lines = _strip_block_comments(path.read_text()).splitlines()
    missing = []
    for idx, line in enumerate(lines):
        code, sep, _comment = line.partition("//")
        code = code.strip()
        if not _is_instruction(code):
            continue
        if sep:  # comment on the same line
            continue
        above = lines[idx - 1].strip() if idx > 0 else ""
        if above.startswith("//"):  # comment on the line just above
            continue
        missing.append(f"  line {idx + 1}: {line.strip()}")
    assert not missing, (
        f"{path.name}: instruction lines without a comment:\n" + "\n".join(missing)
    )


def test_every_ptx_file_has_a_row_in_the_readme_kernel_table():
    rows = [line for line in (PTX_DIR / "README.md").read_text().splitlines() if line.startswith("| `")]
    named = {word.strip("`") for line in rows for word in line.split("|")[1].split() if word.endswith(".ptx`")}
    missing = sorted(p.name for p in PTX_FILES if p.name not in named)
    assert not missing, f"ptx/README.md's kernel table has no row for {missing}"

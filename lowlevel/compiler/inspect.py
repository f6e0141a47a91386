"""What a cubin or fatbin holds: its SASS, and each kernel's resources.

cuobjdump and nvdisasm read the ELF; ptxas's verbose log (kept from the compile or link
that made the cubin) adds the spill counts, which the cubin does not record.
"""
import hashlib
import re
import subprocess
import tempfile

from .toolchain import find_tool
from .errors import ToolMissing

_ptxas_logs: dict[str, str] = {}        # sha256 of a cubin -> ptxas verbose log that made it


def remember_ptxas_log(cubin: bytes, log: str) -> None:
    _ptxas_logs[hashlib.sha256(cubin).hexdigest()] = log


def _run(tool: str, args: list[str], image: bytes, suffix: str) -> str:
    path = find_tool(tool)
    if path is None:
        raise ToolMissing(f"{tool} not found: pip install nvidia-cuda-{tool}")
    with tempfile.NamedTemporaryFile(suffix=suffix) as f:
        f.write(image)
        f.flush()
        out = subprocess.run([path, *args, f.name], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _suffix(image: bytes) -> str:
    return ".cubin" if image[:4] == b"\x7fELF" else ".fatbin"


def disassemble(image: bytes) -> str:
    """The SASS of a cubin or fatbin, as cuobjdump -sass prints it."""
    if find_tool("cuobjdump") is None and image[:4] == b"\x7fELF":
        return _run("nvdisasm", ["-c"], image, ".cubin")
    return _run("cuobjdump", ["-sass"], image, _suffix(image))


_SPILLS = re.compile(r"Function properties for '?([\w$]+)'?:?\s*\n.*?(\d+) bytes spill stores, (\d+) bytes spill loads", re.S)


def parse_ptxas_log(log: str) -> dict[str, dict]:
    """Kernel -> {spill_stores, spill_loads} from a ptxas -v style log."""
    return {name: {"spill_stores": int(st), "spill_loads": int(ld)} for name, st, ld in _SPILLS.findall(log)}


def resource_usage(image: bytes, ptxas_log: str | None = None) -> dict[str, dict]:
    """Kernel -> {registers, shared, stack, local, constant, spills} of a cubin (or fatbin).

    The numbers are cuobjdump's reading of the ELF, which is what ptxas -v reports.
    `spills` (spill stores + loads, bytes) comes from ptxas's log: the one given, or the
    one kept when lowlevel.compiler built this cubin; else None (a cubin does not record it).
    """
    text = _run("cuobjdump", ["--dump-resource-usage"], image, _suffix(image))
    log = ptxas_log if ptxas_log is not None else _ptxas_logs.get(hashlib.sha256(image).hexdigest(), "")
    spills = parse_ptxas_log(log)
    usage = {}
    for name, fields in re.findall(r"Function ([\w$]+):\s*\n\s*(.*)", text):
        values = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", fields))
        s = spills.get(name)
        usage[name] = {
            "registers": int(values.get("REG", 0)),
            "shared": int(values.get("SHARED", 0)),
            "stack": int(values.get("STACK", 0)),
            "local": int(values.get("LOCAL", 0)),
            "constant": int(values.get("CONSTANT[0]", 0)),
            "spills": None if s is None else s["spill_stores"] + s["spill_loads"],
        }
    return usage

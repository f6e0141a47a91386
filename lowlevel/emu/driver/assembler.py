"""The real PTX assembler behind the emulated driver's JIT.

A real driver's JIT is ptxas: what ptxas refuses, cuModuleLoadData refuses. So before the
emulated GPU decodes a module, the PTX goes through ptxas for the emulated device's
architecture: nvJitLink in-process (a dependency, `cuda.bindings.nvjitlink`), else the
`ptxas` program of the nvidia-cuda-nvcc wheel, both found through cuda.pathfinder. Its
verdict decides accept or refuse, its log is the JIT log, and its per-kernel figures
(registers, shared, local, constant bytes) are what cuFuncGetAttribute reports.

nvJitLink compiles PTX as relocatable code and then links it; the driver compiles a
module as a whole program. Both accept the same PTX from ISA 3.1 on (older PTX, which
ptxas compiles whole-program only, goes to the standalone ptxas: see `active`), but a kernel that calls a non-inlined
function or touches module variables may get a few more registers here than from the
driver. With no assembler (or LOWLEVEL_EMU_ASSEMBLER=0) the emulator's own checks are all
there is (`description()` says which ran).

Results are cached by a hash of the PTX, the options, the architecture and the
assembler's identity: in memory, and on disk beside lowlevel.compiler's cache
($LOWLEVEL_CACHE_DIR, LOWLEVEL_CACHE=0 for none), written atomically, checked on read.
"""
import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import re
import subprocess
import tempfile
import threading

from ...capi.versions import max_ptx_isa as isa_of_cuda

ENV = "LOWLEVEL_EMU_ASSEMBLER"


@dataclasses.dataclass(frozen=True)
class KernelFigures:
    """What ptxas reports for one kernel; `const` is the module's user constant bank
    (cmem[3]), None when the assembler's log does not say."""
    registers: int
    shared: int
    local: int
    const: int | None


class AssemblerUnusable(Exception):
    """The assembler could not judge the PTX at all (it does not know the architecture,
    did not start, timed out): the emulator's own checks decide instead."""


@dataclasses.dataclass(frozen=True)
class Assembly:
    accepted: bool
    info_log: str
    error_log: str
    figures: dict            # kernel name -> KernelFigures (accepted modules only)


# ---- the two assemblers ---------------------------------------------------------------------
class NvJitLink:
    """ptxas inside nvJitLink: no process to start, so a load costs milliseconds."""

    def __init__(self, module, version, path: str):
        self._nvjitlink = module
        self.version = version
        self.identity = ("nvJitLink", list(version), *_file_identity(path))
        self.description = f"ptxas via nvJitLink {version[0]}.{version[1]} ({path})"

    def run(self, ptx: bytes, arch: str, flags: list[str]) -> tuple[bool, str, str]:
        nvj = self._nvjitlink
        options = [f"-arch={arch}", "-verbose", *(_nvjitlink_flag(f) for f in flags)]
        try:
            handle = nvj.create(len(options), options)
        except nvj.nvJitLinkError as e:      # e.g. an architecture newer than this nvJitLink
            raise AssemblerUnusable(f"nvJitLink refuses the options {options}: {e}") from None
        try:
            try:
                nvj.add_data(handle, nvj.InputType.PTX, ptx, len(ptx), "application.ptx")
                nvj.complete(handle)
                accepted = True
            except nvj.nvJitLinkError:
                accepted = False
            info = _nvjitlink_log(handle, nvj.get_info_log_size, nvj.get_info_log)
            error = _nvjitlink_log(handle, nvj.get_error_log_size, nvj.get_error_log)
            return accepted, info, error
        finally:
            nvj.destroy(handle)


def _nvjitlink_flag(flag: str) -> str:
    # nvJitLink takes -maxrregcount, -g, -lineinfo itself; its own -O knows only 0 and 3,
    # so -O<n> goes to ptxas through -Xptxas like any other ptxas flag.
    known = flag.startswith("-maxrregcount=") or flag in ("-g", "-lineinfo")
    return flag if known else f"-Xptxas={flag}"


def _nvjitlink_log(handle, size_fn, get_fn) -> str:
    try:
        buf = bytearray(size_fn(handle))
        get_fn(handle, buf)
    except Exception:           # a log that cannot be read is an empty log, not a failure
        return ""
    text = bytes(buf).rstrip(b"\0").decode(errors="replace")
    # nvJitLink appends its own "ERROR NVJITLINK_ERROR_PTX_COMPILE: ..." line: the driver's
    # log is ptxas's alone.
    return "\n".join(line for line in text.splitlines() if not line.startswith("ERROR NVJITLINK_")).strip()


class PtxasProgram:
    """The standalone ptxas, one process per module: a whole-program compile, like the driver's."""

    def __init__(self, path: str, version: str):
        self.path = path
        self.version = version
        self.identity = ("ptxas", version, *_file_identity(path))
        self.description = f"ptxas {version} ({path})"

    def run(self, ptx: bytes, arch: str, flags: list[str]) -> tuple[bool, str, str]:
        with tempfile.TemporaryDirectory(prefix="lowlevel-ptxas-") as folder:
            source = pathlib.Path(folder) / "application.ptx"
            source.write_bytes(ptx)
            # Run in the folder, so the log names "application.ptx", not a temporary path.
            command = [self.path, f"-arch={arch}", "-v", *flags, source.name, "-o", "application.cubin"]
            try:
                out = subprocess.run(command, capture_output=True, timeout=300, cwd=folder)
            except (OSError, subprocess.SubprocessError) as e:
                raise AssemblerUnusable(f"{self.path} did not run: {e}") from None
        stdout, stderr = (s.decode(errors="replace").strip() for s in (out.stdout, out.stderr))
        if "is not defined for option 'gpu-name'" in stderr:     # an architecture it does not know
            raise AssemblerUnusable(stderr)
        if out.returncode == 0:
            return True, "\n".join(s for s in (stdout, stderr) if s), ""
        return False, stdout, stderr


def _file_identity(path: str) -> list:
    """Where an assembler's file is and which build it is, for the cache key: a wheel
    upgraded in place is a different assembler."""
    try:
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns]
    except OSError:
        return [path]


@functools.cache
def _find_nvjitlink():
    try:
        # Imported here: cuda-bindings is optional, and loading it costs time the
        # emulator's own checks do not need.
        from cuda.bindings import nvjitlink
        from cuda.pathfinder import load_nvidia_dynamic_lib
        version = tuple(nvjitlink.version())
        return NvJitLink(nvjitlink, version, load_nvidia_dynamic_lib("nvJitLink").abs_path)
    except Exception:           # not installed, or the library does not load
        return None


@functools.cache
def _find_ptxas():
    try:
        # Imported here: cuda-pathfinder is optional (see _find_nvjitlink).
        from cuda.pathfinder import find_nvidia_binary_utility
        path = find_nvidia_binary_utility("ptxas")
    except Exception:
        return None
    if path is None:
        return None
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"V(\d+\.\d+\.\d+)", text)
    return PtxasProgram(path, m.group(1) if m else "unknown version")


def disabled_reason() -> str:
    """Why no assembler runs ('' when one does)."""
    if os.environ.get(ENV, "1") in ("0", "off", "false"):
        return f"{ENV}=0"
    if _find_nvjitlink() is None and _find_ptxas() is None:
        return "no assembler found: pip install nvidia-nvjitlink"
    return ""


# ptxas compiles relocatable code (-c, what nvJitLink asks of it) from PTX ISA 3.1 on only.
RELOCATABLE_ISA = (3, 1)


def active(version: tuple[int, int] | None = None):
    """The assembler the emulated JIT runs for PTX of ISA `version`, or None (then the
    emulator's own checks only). The driver's JIT compiles a module whole-program, which
    reads any PTX ISA; nvJitLink compiles relocatable code, which ptxas refuses below ISA
    3.1, so such PTX goes to the standalone ptxas, a whole-program compile like the driver's."""
    if disabled_reason():
        return None
    if version is not None and tuple(version) < RELOCATABLE_ISA:
        return _find_ptxas()
    return _find_nvjitlink() or _find_ptxas()


def missing_reason(version: tuple[int, int] | None = None) -> str:
    """Why active(version) is None: disabled_reason(), or no whole-program assembler for
    PTX older than nvJitLink reads."""
    return disabled_reason() or (
        f"PTX ISA {version[0]}.{version[1]} is below {RELOCATABLE_ISA[0]}.{RELOCATABLE_ISA[1]}, "
        "which nvJitLink's relocatable compile needs, and no standalone ptxas was found "
        "(pip install nvidia-cuda-nvcc)")


def description() -> str:
    """Which checks the emulated JIT runs, for `lowlevel info`."""
    assembler = active()
    if assembler is None:
        return f"the emulator's own checks ({disabled_reason()})"
    return assembler.description


def max_ptx_isa(assembler) -> tuple[int, int] | None:
    """The newest PTX ISA this assembler reads, or None when its version is unknown."""
    if isinstance(assembler, NvJitLink):
        major, minor = assembler.version[:2]
    else:
        m = re.match(r"(\d+)\.(\d+)", assembler.version)
        if m is None:
            return None
        major, minor = int(m.group(1)), int(m.group(2))
    return isa_of_cuda(major * 1000 + minor * 10)


# ---- what the log says about each kernel ----------------------------------------------------
_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"^ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame")
_USED = re.compile(r"^ptxas info\s*: Used (\d+) registers(.*)")
_LINKED = re.compile(r"^info\s*: Function properties for '([^']+)':")
_LINKED_USED = re.compile(r"^info\s*: used (\d+) registers.*?(\d+) stack.*?(\d+) bytes lmem")
_USER_CONST = re.compile(r"(\d+) bytes cmem\[3\]")


def parse_figures(log: str) -> dict[str, KernelFigures]:
    """Kernel -> figures from a ptxas -v (or nvJitLink -verbose) info log.

    ptxas reports each entry's registers, static shared bytes and stack frame; a link
    step (nvJitLink) then reports the final registers and stack with callees included,
    which win where present. The module's user constant bank (cmem[3]) counts for each."""
    found: dict[str, dict] = {}
    entry = current = linked = None
    for line in log.splitlines():
        if m := _ENTRY.match(line):
            entry = m.group(1)
            found[entry] = {"registers": 0, "shared": 0, "local": 0}
        elif m := _PROPERTIES.match(line):
            current = m.group(1)
        elif (m := _FRAME.search(line)) and current == entry and entry in found:
            found[entry]["local"] = int(m.group(1))
        elif (m := _USED.match(line)) and entry in found:
            rest = m.group(2)
            found[entry]["registers"] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", rest):
                found[entry]["shared"] = int(s.group(1))
            if s := re.search(r"(\d+) bytes cumulative stack size", rest):
                found[entry]["local"] = int(s.group(1))
        elif m := _LINKED.match(line):
            linked = m.group(1)
        elif (m := _LINKED_USED.match(line)) and linked in found:
            found[linked]["registers"] = int(m.group(1))
            found[linked]["local"] = int(m.group(2)) + int(m.group(3))
    const = sum(int(n) for n in _USER_CONST.findall(log)) if _USER_CONST.search(log) else None
    return {name: KernelFigures(**f, const=const) for name, f in found.items()}


# ---- assembling, with the caches ------------------------------------------------------------
_memory: dict[str, Assembly] = {}
_memory_lock = threading.Lock()
_MEMORY_ENTRIES = 4096


def assemble(assembler, ptx: bytes, arch: str, flags: list[str]) -> Assembly:
    """ptxas's verdict on `ptx` for `arch` ("sm_90") with ptxas `flags`, from a cache when
    the same PTX was assembled the same way before."""
    key = _key(assembler, ptx, arch, flags)
    with _memory_lock:
        hit = _memory.get(key)
    if hit is None:
        hit = _disk_load(key)
    if hit is None:
        accepted, info, error = assembler.run(ptx, arch, flags)
        hit = Assembly(accepted, info, error, parse_figures(info) if accepted else {})
        _disk_store(key, hit)
    with _memory_lock:
        if len(_memory) >= _MEMORY_ENTRIES:
            _memory.pop(next(iter(_memory)))
        _memory[key] = hit
    return hit


def _key(assembler, ptx: bytes, arch: str, flags: list[str]) -> str:
    h = hashlib.sha256()
    for part in (json.dumps([assembler.identity, arch, flags]).encode(), ptx):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def cache_dir() -> pathlib.Path | None:
    """Where lowlevel.compiler's cache lives (the same rules), or None with caching off."""
    if os.environ.get("LOWLEVEL_CACHE", "1") in ("0", "off", "false", ""):
        return None
    explicit = os.environ.get("LOWLEVEL_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "lowlevel"


def _encode(key: str, result: Assembly) -> bytes:
    body = dataclasses.asdict(result)
    text = json.dumps(body, sort_keys=True)
    return json.dumps({"key": key, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                       "body": body}, sort_keys=True).encode()


def _decode(key: str, data: bytes) -> Assembly | None:
    """The entry, if it is whole and is the one asked for; else None (a miss)."""
    try:
        entry = json.loads(data)
        body = entry["body"]
        text = json.dumps(body, sort_keys=True)
        if entry["key"] != key or entry["sha256"] != hashlib.sha256(text.encode()).hexdigest():
            return None
        figures = {name: KernelFigures(**f) for name, f in body["figures"].items()}
        return Assembly(bool(body["accepted"]), body["info_log"], body["error_log"], figures)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _disk_load(key: str) -> Assembly | None:
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = (folder / f"ptxas-{key}.json").read_bytes()
    except OSError:
        return None
    return _decode(key, data)


def _disk_store(key: str, result: Assembly) -> None:
    """Write an entry atomically (a temporary file renamed into place); a cache that
    cannot be written is skipped, not an error."""
    folder = cache_dir()
    if folder is None:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-ptxas-")
        with os.fdopen(fd, "wb") as f:
            f.write(_encode(key, result))
        os.replace(tmp, folder / f"ptxas-{key}.json")
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def clear_memory_cache() -> None:
    """Forget the in-memory results (tests use it to see the disk cache at work)."""
    with _memory_lock:
        _memory.clear()


# ---- what the driver hands over -------------------------------------------------------------
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_VERSION = re.compile(r"^\s*\.version\s+(\d+)\.(\d+)\b", re.M)
_TARGET = re.compile(r"^\s*\.target\s+(?:sm|compute)_(\d+[af]?)\b", re.M)


def ptx_header(text: str) -> tuple[tuple[int, int] | None, str | None]:
    """The first `.version` and `.target sm_XY` of PTX text, read without parsing the rest,
    so that the driver's own version checks come before the assembler's verdict.
    `.target compute_XY`, which ptxas reads as sm_XY, comes back as "sm_XY"."""
    code = _COMMENTS.sub(lambda m: "\n" * m.group().count("\n") + " ", text)
    version, target = _VERSION.search(code), _TARGET.search(code)
    return (tuple(map(int, version.groups())) if version else None,
            f"sm_{target.group(1)}" if target else None)


def target_arch(target: str | None, device_arch: int) -> str:
    """The -arch to assemble for: the device's, or the PTX's own architecture-specific
    variant of it (PTX for sm_90a is assembled as sm_90a on an sm_90 device)."""
    if target and re.fullmatch(rf"sm_{device_arch}[af]", target):
        return target
    return f"sm_{device_arch}"


REGISTERS_PER_BLOCK = 65536
REGISTER_UNIT = 256         # registers are given to a warp in units of 256


def registers_for_threads(threads: int) -> int:
    """The most registers per thread that let a block of `threads` threads fit in the
    register file: what CU_JIT_THREADS_PER_BLOCK asks the JIT to respect."""
    warps = -(-threads // 32)
    units = REGISTERS_PER_BLOCK // (warps * REGISTER_UNIT)
    return max(1, min(255, units * REGISTER_UNIT // 32))


def jit_flags(options: dict[str, int]) -> list[str]:
    """ptxas flags for the driver's JIT options (name without CU_JIT_ -> value)."""
    flags = []
    max_registers = options.get("MAX_REGISTERS") or 0
    threads = options.get("THREADS_PER_BLOCK") or 0
    if threads:
        budget = registers_for_threads(threads)
        max_registers = min(max_registers, budget) if max_registers else budget
    if max_registers:
        flags.append(f"-maxrregcount={max_registers}")
    if options.get("GENERATE_DEBUG_INFO"):
        flags.append("-g")              # ptxas refuses optimised debugging: no -O with it
    elif "OPTIMIZATION_LEVEL" in options:
        flags.append(f"-O{min(options['OPTIMIZATION_LEVEL'], 3)}")    # the driver's 4 is ptxas's 3
    if options.get("GENERATE_LINE_INFO"):
        flags.append("-lineinfo")
    return flags

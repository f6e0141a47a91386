"""Layer 4 to layer 5: how source becomes the instructions a GPU runs.

    compile(source, target="ptx", arch="sm_90")          CUDA C++ -> PTX text   (NVRTC)
    compile(source, target="cubin", arch="sm_90")        CUDA C++ -> SASS bytes (NVRTC)
    compile(source, target="fatbin", arch=["sm_80", "sm_90"])
                                                         SASS for each + PTX for the lowest
    link_ptx(ptx, arch="sm_90", options=("-O3",))        PTX -> SASS bytes      (nvJitLink)
    disassemble(cubin_or_fatbin)                         the SASS as text       (cuobjdump)
    resource_usage(cubin)                                registers, shared, stack, spills...

None of it needs a GPU. Results are cached on disk (see cache.py).

    archs.py      "sm_90", 90 or (9, 0) -> 90
    nvrtc.py      NVRTC through cuda-python          jitlink.py   nvJitLink
    fatbin.py     nvfatbin                            inspect.py   cuobjdump, nvdisasm, ptxas logs
    cache.py      the on-disk cache                   select.py    SASS or PTX for a driver
    toolchain.py  the programs and libraries found    errors.py    CompileError, LinkError, ToolMissing

This package sits below lowlevel.cuda (cuda.Module.from_cuda compiles with it) and imports
only lowlevel.capi: compiling needs no driver.
"""
from ..capi.versions import LOWLEVEL_VERSION
from . import cache, fatbin, jitlink, nvrtc
from .archs import parse_arch
from .errors import CompileError, LinkError, ToolMissing
from .inspect import disassemble, parse_ptxas_log, remember_ptxas_log, resource_usage

DEFAULT_ARCH = "sm_90"


def _toolkit() -> dict:
    return {"nvrtc": nvrtc.version(), "lowlevel": LOWLEVEL_VERSION}


def _cached(kind: str, produce, *key_parts):
    """Run `produce()` -> (payload, meta) unless the cache has it; returns (payload, meta)."""
    k = cache.key(kind, *key_parts)
    hit = cache.load(k)
    if hit is not None:
        payload, meta = hit
        return payload, {**meta, "cache": "hit"}
    payload, meta = produce()
    cache.store(k, payload, meta)
    return payload, {**meta, "cache": "miss"}


def _nvrtc_step(source: str, arch: int, target: str, options, name_expressions, name: str):
    if target == "cubin" and not any(o.startswith(("--ptxas-options", "-Xptxas")) for o in options):
        options = (*options, "--ptxas-options=--verbose")    # the log then tells spills

    def produce():
        code, log, lowered = nvrtc.compile_source(source, name, arch, target, options, name_expressions)
        data = code.encode() if isinstance(code, str) else code
        return data, {"log": log, "lowered_names": lowered}
    payload, meta = _cached("nvrtc", produce, source, name, arch, target, list(options),
                            list(name_expressions), _toolkit())
    code = payload.decode() if target == "ptx" else payload
    if target == "cubin":
        remember_ptxas_log(payload, meta["log"])
    return code, meta


def compile(source: str, target: str = "ptx", arch=DEFAULT_ARCH, options=(), name_expressions=(),
            name: str = "kernel.cu"):
    """Compile CUDA C++ with NVRTC. PTX comes back as text, cubins and fatbins as bytes.

    `arch`: "sm_90"-style (or 90, or (9, 0)); for a fatbin a list of them (SASS for each, plus PTX for the
    lowest, so newer GPUs can JIT it). `options`: NVRTC's ("-O3" is its default; "-G",
    "--use_fast_math", "-lineinfo", "-default-device", "-I..."). A compile error raises
    CompileError carrying NVRTC's log. See `lowered_names` for templated kernels.
    """
    options = tuple(options)
    if target == "fatbin":
        archs = sorted({parse_arch(a) for a in ([arch] if isinstance(arch, (str, int, tuple)) else arch)})
        cubins = {a: _nvrtc_step(source, a, "cubin", options, name_expressions, name)[0] for a in archs}
        ptx = {archs[0]: _nvrtc_step(source, archs[0], "ptx", options, name_expressions, name)[0]}
        return fatbin.build(cubins, ptx)
    if target not in ("ptx", "cubin"):
        raise ValueError(f"target must be 'ptx', 'cubin' or 'fatbin', not {target!r}")
    if not isinstance(arch, (str, int, tuple)):
        raise TypeError(f"target {target!r} takes one arch, got {arch!r}")
    return _nvrtc_step(source, parse_arch(arch), target, options, name_expressions, name)[0]


def lowered_names(source: str, name_expressions, arch=DEFAULT_ARCH, options=(), name: str = "kernel.cu") -> dict:
    """Name expression ("scale<float>") -> the mangled name NVRTC gave that kernel."""
    _, meta = _nvrtc_step(source, parse_arch(arch), "ptx", tuple(options), tuple(name_expressions), name)
    return meta["lowered_names"]


def compile_log(source: str, target: str = "ptx", arch=DEFAULT_ARCH, options=(), name: str = "kernel.cu") -> str:
    """NVRTC's log (warnings) for a compile that succeeded."""
    return _nvrtc_step(source, parse_arch(arch), target, tuple(options), (), name)[1]["log"]


def link_ptx(ptx: str, arch=DEFAULT_ARCH, options=()) -> bytes:
    """PTX to a cubin for `arch` with nvJitLink ("-O3", "-lineinfo", "-maxrregcount=32", ...).
    A failure raises LinkError with the linker's log (ptxas's error lines)."""
    a = parse_arch(arch)

    def produce():
        cubin, info = jitlink.ptx_to_cubin(ptx, a, tuple(options))
        return cubin, {"log": info}
    cubin, meta = _cached("nvjitlink", produce, ptx, a, list(options), jitlink.version(), LOWLEVEL_VERSION)
    remember_ptxas_log(cubin, meta["log"])
    return cubin


def make_fatbin(cubins: dict, ptx: dict | None = None) -> bytes:
    """A fatbin from cubins and PTX you already have: {"sm_90": cubin_bytes}, {"sm_80": ptx_text}."""
    return fatbin.build({parse_arch(a): c for a, c in cubins.items()},
                        {parse_arch(a): p for a, p in (ptx or {}).items()})


__all__ = [
    "CompileError", "LinkError", "ToolMissing", "cache", "compile", "compile_log", "disassemble",
    "link_ptx", "lowered_names", "make_fatbin", "parse_arch", "parse_ptxas_log", "resource_usage",
]

"""CUDA C++ to PTX or a cubin with NVRTC, through cuda-python's bindings.

NVRTC compiles for one architecture per program: PTX for a virtual one ("compute_90"),
a cubin (SASS) for a real one ("sm_90"). Name expressions ("scale<float>") ask NVRTC for
the mangled names of templated or C++ kernels, so they can be fetched from the module.
"""
import functools

from .errors import CompileError, ToolMissing


def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # noqa: PLC0415  (loaded on first use; ToolMissing says what to install)
    except ImportError as e:
        raise ToolMissing("NVRTC bindings are missing: pip install cuda-python nvidia-cuda-nvrtc") from e
    return nvrtc


def version() -> tuple[int, int]:
    err, major, minor = _nvrtc().nvrtcVersion()
    return major, minor


def _check(nvrtc, result, what: str) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"{what} failed: {err.name}")


def _text(nvrtc, prog, size_fn, get_fn) -> bytes:
    err, size = size_fn(prog)
    _check(nvrtc, err, size_fn.__name__)
    buf = b" " * size
    _check(nvrtc, get_fn(prog, buf), get_fn.__name__)
    return buf


def compile_source(source: str, name: str, arch: int, target: str, options=(), name_expressions=()):
    """Compile once: returns (code, log, lowered_names).

    target "ptx": code is PTX text for compute_<arch>; "cubin": SASS bytes for sm_<arch>.
    """
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression")
        virtual = target == "ptx"
        all_options = [f"--gpu-architecture={'compute' if virtual else 'sm'}_{arch}", *options,
                       *_default_include_path()]
        encoded = [o.encode() for o in all_options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _text(nvrtc, prog, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog)
        log = log.rstrip(b"\0").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile {name} ({err.name}) with options {all_options}",
                               log, all_options)
        if virtual:
            code = _text(nvrtc, prog, nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX).rstrip(b"\0").decode()
        else:
            code = bytes(_text(nvrtc, prog, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN))
        lowered = {}
        for expr in name_expressions:
            err, mangled = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            _check(nvrtc, err, "nvrtcGetLoweredName")
            lowered[expr] = mangled.decode()
        return code, log, lowered
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@functools.cache
def _default_include_path() -> tuple[str, ...]:
    """--include-path for the CCCL headers (<cuda/barrier>, <cub/cub.cuh>, <nv/target>, which
    <cooperative_groups.h> includes) and the CUDA headers (cuda_fp16.h, cuda_bf16.h, ...), so
    sources can #include them as with nvcc; NVRTC itself brings only its builtin headers.
    CCCL comes first, as nvcc and CuPy order it, so its headers win over older copies."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (optional: without it, no --include-path)
    except ImportError:
        return ()
    found = []
    for name in ("cccl", "cudart"):
        try:
            include = find_nvidia_header_directory(name)
        except Exception:
            include = None
        if include:
            found.append(f"--include-path={include}")
    return tuple(found)


def supported_archs() -> list[int]:
    """The real architectures this NVRTC can compile SASS for."""
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    _check(nvrtc, err, "nvrtcGetSupportedArchs")
    return list(archs)

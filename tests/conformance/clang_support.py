"""A seventh build for the conformance suite: clang's NVPTX backend,

    clang-19 -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -O3 -ffp-contract=on -S
             --cuda-path=VIEW

with the CUDA 13 headers and libdevice of the wheels (found by cuda.pathfinder) and CUB,
cooperative groups and libcu++ from CCCL. Where clang is not installed its cases skip saying
so (.ci/run installs clang-19 from the system's packages and, where it cannot, says why in
LOWLEVEL_CLANG_UNAVAILABLE, which becomes the skip reason).

clang looks for a CUDA installation laid out as the toolkit is (bin/, include/,
nvvm/libdevice/libdevice.10.bc); the wheels put these elsewhere, so a view of symlinks is
assembled once per session in a temporary directory. clang 19's CUDA headers predate CUDA 13
and have a known bug: what they need is supplied here (_SHIMS, _DEFINES, header_fixes), each
with its reason.

A source that clang cannot build fails its test with clang's log, unless the test module
names it in CLANG_CANNOT = {label: reason}: a documented limitation of clang skips with its
reason, anything else is a failure to look at.
"""
import atexit
import functools
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from typing import NamedTuple

import pytest
from conformance_support import BUILDS, Build
from helpers.cuda_c import load_compiled

from lowlevel import cuda

WANTED = "clang-19"
MIN_MAJOR = 19     # older clangs do not know sm_90's PTX or parse the CUDA 13 headers

# Headers clang 19's runtime wrapper includes that a CUDA 13 installation of wheels lacks:
# texture references were removed in CUDA 13 (texture_fetch_functions.h with them), and the
# wrapper force-includes curand's kernel header only to patch its redeclaration of blockDim
# and threadIdx (curand is a library of its own, not installed for the tests).
_SHIMS = {
    "texture_fetch_functions.h": "/* removed in CUDA 13 (texture references) */\n",
    "curand_mtgp32_kernel.h": "/* curand is not installed; nothing of it is used */\n",
}
# clang 19's __reduce_*_sync (__clang_cuda_intrinsics.h) pass (mask, value) to the builtins,
# which take (value, mask) as redux.sync does: the value becomes the member mask and a GPU
# faults (llvm/llvm-project#131415, fixed by #132881). Where the installed header has the
# swap, each builtin is redefined to swap back (a macro does not expand itself again).
_SWAPPED_REDUX = re.compile(r"(__nvvm_redux_sync_\w+)\(__mask, __value\)")
# crt/math_functions.h defines _NV_RSQRT_SPECIFIER (noexcept from glibc 2.42 on) and the
# wrapper skips that header (it defines __MATH_FUNCTIONS_H__ to use its own declarations),
# so math_functions.hpp meets the name undefined. Empty is what glibc before 2.42 gets.
_DEFINES = ("-D_NV_RSQRT_SPECIFIER=",)


# clang's CUDA default, -ffp-contract=fast, fuses a multiply and an add across statements,
# inside the linked libdevice too, which nvcc leaves as libdevice has them: tgammaf then errs
# by 6 ulp near x = 24 where the Programming Guide bounds it by 5 (the same PTX on any GPU:
# fma, mul and add are exact IEEE operations). `on` fuses within an expression only, and
# the libdevice functions come out as nvcc's.
OPTIONS = ("-O3", "-ffp-contract=on")


class ClangBuild:
    """The clang build, with the attributes of conformance_support.Build."""
    name, compiler, options, fast_math, debug = "clang", "clang", OPTIONS, False, False

    def __init__(self, cannot: "dict[str, str] | None" = None):
        self.cannot = cannot or {}

    def __repr__(self):
        return "<Build clang>"

    def ptx(self, source: str, label: str = "kernels") -> str:
        """PTX of `source` (compiled once per session), or a skip where the test module
        lists `label` in CLANG_CANNOT with the reason clang cannot build it."""
        if label in self.cannot:
            pytest.skip(f"clang cannot build {label}: {self.cannot[label]}")
        result = _compile(source)
        if isinstance(result, _Skip):
            pytest.skip(result.reason)
        if isinstance(result, _Failure):
            raise AssertionError(f"{label} [clang]: {result.message}")
        keep = os.environ.get("LOWLEVEL_CONFORMANCE_PTX_DIR")
        if keep:
            path = pathlib.Path(keep)
            path.mkdir(parents=True, exist_ok=True)
            (path / f"{label}.clang.ptx").write_text(result)
        return result

    def load(self, source: str, label: str = "kernels"):
        ptx = self.ptx(source, label)
        try:
            return load_compiled(ptx)
        except cuda.CudaError as exc:
            raise AssertionError(f"{label} [clang] refused at load: {exc.name}: "
                                 f"{(exc.log or '').strip() or exc}") from exc


class _Skip:
    def __init__(self, reason):
        self.reason = reason


class _Failure:
    def __init__(self, message):
        self.message = message


# ---- finding clang and a CUDA installation for it -------------------------------------------
def _major(clang: str) -> int:
    run = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"clang version (\d+)", run.stdout)
    return int(found.group(1)) if found else 0


@functools.cache
def _clang() -> "str | _Skip":
    names = [WANTED, *(f"clang-{v}" for v in range(MIN_MAJOR + 1, MIN_MAJOR + 6)), "clang"]
    for name in names:
        path = shutil.which(name)
        if path and _major(path) >= MIN_MAJOR:
            return path
    why = os.environ.get("LOWLEVEL_CLANG_UNAVAILABLE")
    if why:
        return _Skip(why)
    return _Skip(f"{WANTED} is not installed (apt-get install {WANTED}: its NVPTX backend; "
                 ".ci/run installs it)")


class CudaView(NamedTuple):
    path: str                  # for --cuda-path
    includes: tuple            # -I options: the shims, and CCCL where found
    cccl: bool


@functools.cache
def _cuda_view() -> "CudaView | _Skip":
    """A CUDA root of symlinks to what the wheels hold, for clang's --cuda-path."""
    from cuda.pathfinder import find_bitcode_lib, find_nvidia_header_directory  # noqa: PLC0415  (only with clang)
    cudart = find_nvidia_header_directory("cudart")
    if cudart is None:
        return _Skip("the CUDA runtime headers not found (pip install nvidia-cuda-runtime)")
    try:
        libdevice = pathlib.Path(find_bitcode_lib("device"))
    except Exception as exc:           # BitcodeLibNotFoundError and kin
        return _Skip(f"libdevice not found (pip install nvidia-nvvm): {exc}")
    root = pathlib.Path(tempfile.mkdtemp(prefix="lowlevel-clang-cuda-"))
    atexit.register(shutil.rmtree, root, True)
    (root / "bin").mkdir()             # clang checks for it; nothing in it is run
    (root / "include").symlink_to(cudart, target_is_directory=True)
    (root / "nvvm").mkdir()
    (root / "nvvm" / "libdevice").symlink_to(libdevice.parent, target_is_directory=True)
    shims = root / "shims"
    shims.mkdir()
    for name, text in _SHIMS.items():
        (shims / name).write_text(text)
    cccl = find_nvidia_header_directory("cccl")      # CUB, <cuda/...>, <nv/target>
    return CudaView(str(root), (f"-I{shims}", *([f"-I{cccl}"] if cccl else [])), bool(cccl))


def header_fixes(clang: str | None = None) -> tuple:
    """-D options that undo the redux operand swap where the header of `clang` (the clang
    in use by default; a skip where there is none) has it."""
    if clang is None:
        clang = _clang()
        if isinstance(clang, _Skip):
            pytest.skip(clang.reason)
    return _header_fixes(clang)


@functools.cache
def _header_fixes(clang: str) -> tuple:
    run = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True,
                         timeout=60)
    header = pathlib.Path(run.stdout.strip()) / "include" / "__clang_cuda_intrinsics.h"
    text = header.read_text() if header.is_file() else ""
    return tuple(f"-D{name}(m,v)={name}(v,m)" for name in sorted(set(_SWAPPED_REDUX.findall(text))))


# ---- compiling, once per source and session ------------------------------------------------
def _command(clang: str, fix_headers: bool) -> list:
    view = _cuda_view()
    return [clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80", *OPTIONS, "-S",
            f"--cuda-path={view.path}", "-Wno-unknown-cuda-version", *_DEFINES,
            *(header_fixes(clang) if fix_headers else ()), *view.includes]


@functools.cache
def _precompiled_wrapper(clang: str) -> tuple:
    """-include-pch of clang's CUDA runtime wrapper and the CUDA headers it includes, built
    once: parsing them is most of each compile (0.6 s of CPU for an empty kernel, 0.15 s
    with it). Made with the options of each compile, as a precompiled header must be; where
    it cannot be made, the compiles go on without it (slower, the same PTX)."""
    root = pathlib.Path(_cuda_view().path)
    (root / "empty.h").write_text("")
    run = subprocess.run([*_command(clang, True), "-Xclang", "-emit-pch", str(root / "empty.h"),
                          "-o", str(root / "wrapper.pch")], capture_output=True, text=True,
                         timeout=300)
    return ("-include-pch", str(root / "wrapper.pch")) if run.returncode == 0 else ()


def clang_ptx(source: str, fix_headers: bool = True) -> str:
    """PTX of `source` from clang, or a skip saying why there is none here; `fix_headers`
    False leaves clang's own header as it is installed (the redux swap: header_fixes)."""
    result = _compile(source, fix_headers)
    if isinstance(result, _Skip):
        pytest.skip(result.reason)
    if isinstance(result, _Failure):
        raise AssertionError(result.message)
    return result


@functools.cache
def _compile(source: str, fix_headers: bool = True) -> "str | _Skip | _Failure":
    clang = _clang()
    if isinstance(clang, _Skip):
        return clang
    view = _cuda_view()
    if isinstance(view, _Skip):
        return view
    if "#include <" in source and not view.cccl:
        # as nvcc's build: the CUDA headers include <nv/target>, which comes with CCCL
        return _Skip("the CCCL headers not found (pip install nvidia-cuda-cccl)")
    pch = _precompiled_wrapper(clang) if fix_headers else ()
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "kernels.cu"
        src.write_text(source)
        out = pathlib.Path(tmp) / "kernels.ptx"
        run = subprocess.run([*_command(clang, fix_headers), *pch, str(src), "-o", str(out)],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            return _Failure(f"{pathlib.Path(clang).name} failed:\n{run.stderr.strip()[-3000:]}")
        return out.read_text()


@pytest.fixture(params=[*sorted(BUILDS), "clang"])
def build(request):
    """Each build; the clang build reads the test module's CLANG_CANNOT, {label: reason}:
    the sources clang cannot build for a documented reason (they skip with it)."""
    if request.param != "clang":
        return Build(request.param)
    return ClangBuild(getattr(request.module, "CLANG_CANNOT", {}))


any_build = build

"""A seventh build for the conformance files that ask for it (the `any_build` fixture):
clang's NVPTX backend, `clang -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -O3 -S`,
where clang is installed (Debian: apt-get install clang); elsewhere its cases skip saying
so. The six builds of conformance_support.BUILDS come with it.
"""
import functools
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from conformance_support import BUILDS, Build
from helpers.cuda_c import load_compiled

from lowlevel import cuda


@functools.cache
def _clang() -> str | None:
    for name in ("clang", "clang-18", "clang-17", "clang-16", "clang-15", "clang-14"):
        path = shutil.which(name)
        if path:
            return path
    return None


class ClangBuild:
    name, compiler, options, fast_math, debug = "clang", "clang", ("-O3",), False, False

    def ptx(self, source: str, label: str = "kernels") -> str:
        result = _compile(source)
        if result.startswith("SKIP:"):
            pytest.skip(result[5:])
        return result

    def load(self, source: str, label: str = "kernels") -> "cuda.Module":
        ptx = self.ptx(source, label)
        try:
            return load_compiled(ptx)
        except cuda.CudaError as exc:
            raise AssertionError(f"{label} [clang] refused at load: {exc.name}: "
                                 f"{(exc.log or '').strip() or exc}") from exc


@functools.cache
def _compile(source: str) -> str:
    clang = _clang()
    if clang is None:
        return "SKIP:clang is not installed (apt-get install clang gives its NVPTX backend)"
    from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (only with clang)
    includes = [f"-I{d}" for d in {find_nvidia_header_directory("cccl"),
                                    find_nvidia_header_directory("cudart")} if d]
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "kernels.cu"
        src.write_text(source)
        out = pathlib.Path(tmp) / "kernels.ptx"
        run = subprocess.run([clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80",
                              "-O3", "-S", "-nocudainc", "-nocudalib", *includes, str(src),
                              "-o", str(out)], capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            return f"SKIP:clang cannot build this source here: {run.stderr.strip()[:300]}"
        return out.read_text()


@pytest.fixture(params=[*sorted(BUILDS), "clang"])
def any_build(request):
    return ClangBuild() if request.param == "clang" else Build(request.param)

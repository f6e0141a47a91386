"""Builds for the conformance suite: each CUDA C source compiled by nvcc (sm_80) and by
NVRTC (compute_80), three ways each, once per session, and loaded through the driver API.

The six builds:

    nvcc-O3        nvcc -arch=sm_80 -O3
    nvcc-fastmath  nvcc -arch=sm_80 -O3 --use_fast_math   (ex2.approx, div.approx, .ftz)
    nvcc-G         nvcc -arch=sm_80 -G                    (debug: locals in .local, generic
                                                           addressing, calls kept, no unrolling)
    nvrtc          --gpu-architecture=compute_80
    nvrtc-fastmath --gpu-architecture=compute_80 --use_fast_math
    nvrtc-G        --gpu-architecture=compute_80 -G

A source is compiled the first time a test asks for it in a build and kept for the session
(keyed by compiler, source and options). Set LOWLEVEL_CONFORMANCE_PTX_DIR=/some/dir to keep
each PTX on disk (named after the kernel and build) when a failure needs reading.

The `build` fixture is made available to the suite by tests/conformance/conftest.py.
"""
import functools
import os
import pathlib

import numpy as np
import pytest
from helpers.cuda_c import load_compiled, nvcc_ptx

from lowlevel import compiler, cuda

BUILDS = {
    "nvcc-O3": ("nvcc", ("-O3",)),
    "nvcc-fastmath": ("nvcc", ("-O3", "--use_fast_math")),
    "nvcc-G": ("nvcc", ("-G",)),
    "nvrtc": ("nvrtc", ()),
    "nvrtc-fastmath": ("nvrtc", ("--use_fast_math",)),
    "nvrtc-G": ("nvrtc", ("-G",)),
}


class Build:
    """One of BUILDS: `.name`, `.compiler`, `.options`, `.fast_math`, `.debug`."""

    def __init__(self, name: str):
        self.name = name
        self.compiler, self.options = BUILDS[name]
        self.fast_math = "--use_fast_math" in self.options
        self.debug = "-G" in self.options

    def __repr__(self):
        return f"<Build {self.name}>"

    def ptx(self, source: str, label: str = "kernels") -> str:
        """PTX of `source` in this build (compiled once per session), or skip saying why
        this compiler cannot build it here."""
        result = _compile(self.compiler, source, self.options)
        if isinstance(result, _Skip):
            pytest.skip(result.reason)
        if isinstance(result, _Failure):
            raise AssertionError(result.message)
        keep = os.environ.get("LOWLEVEL_CONFORMANCE_PTX_DIR")
        if keep:
            path = pathlib.Path(keep)
            path.mkdir(parents=True, exist_ok=True)
            (path / f"{label}.{self.name}.ptx").write_text(result)
        return result

    def load(self, source: str, label: str = "kernels") -> "cuda.Module":
        """The module of `source` in this build, loaded on the current driver. A refused
        load fails the test with the JIT log (which names the instruction and line)."""
        ptx = self.ptx(source, label)
        try:
            return load_compiled(ptx)
        except cuda.CudaError as exc:
            log = (exc.log or "").strip()
            raise AssertionError(f"{label} [{self.name}] refused at load: {exc.name}: "
                                 f"{log or exc}") from exc


@pytest.fixture(params=sorted(BUILDS))
def build(request) -> Build:
    return Build(request.param)


# ---- compiling, cached per session ----------------------------------------------------------
class _Skip:
    def __init__(self, reason):
        self.reason = reason


class _Failure:
    def __init__(self, message):
        self.message = message


@functools.cache
def _compile(compiler: str, source: str, options: tuple) -> "str | _Skip | _Failure":
    try:
        if compiler == "nvcc":
            return _nvcc_ptx(source, options)
        return _nvrtc_ptx(source, options)
    except Exception as exc:            # kept, so every test of this build reports the same
        return _Failure(f"{compiler} {' '.join(options)} failed: {exc}")


def _nvrtc_ptx(source: str, options: tuple):
    if any(f"#include <{h}" in source for h in ("cub/", "cuda/", "cooperative_groups")):
        # CUB, cuda::barrier and <nv/target> (which cooperative groups include) come with
        # the CCCL headers, which lowlevel.compiler puts on NVRTC's include path when found
        from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (only for such sources)
        if find_nvidia_header_directory("cccl") is None:
            return _Skip("CUB (the CCCL headers) not found")
    try:
        return compiler.compile(source, "ptx", "compute_80", options)
    except compiler.ToolMissing as exc:
        return _Skip(str(exc))
    except compiler.CompileError as exc:
        if "unrecognized option" in exc.log or "invalid option" in exc.log.lower():
            return _Skip(f"NVRTC rejects {' '.join(options)}: {exc.log.strip()[:200]}")
        raise


def _nvcc_ptx(source: str, options: tuple):
    return nvcc_ptx(source, "sm_80", options)


# ---- host-side helpers ----------------------------------------------------------------------
def upload(host: np.ndarray):
    host = np.ascontiguousarray(host)
    dev = cuda.mem_alloc(max(1, host.nbytes))
    if host.nbytes:
        cuda.memcpy_htod(dev, host)
    return dev


def poisoned_device(shape, dtype):
    """A device buffer of `shape` x `dtype` filled with 0xFF bytes (NaN / 0xFFFF...)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    dev = cuda.mem_alloc(max(1, nbytes))
    cuda.memset_d8(dev, 0xFF, max(1, nbytes))
    return dev


def download(dev, shape, dtype) -> np.ndarray:
    """Device to host into a host array poisoned first (so a short copy shows)."""
    dtype = np.dtype(dtype)
    out = np.full(shape, np.nan, dtype) if dtype.kind == "f" else np.full(shape, -1).astype(dtype)
    if out.nbytes:
        cuda.memcpy_dtoh(out, dev)
    return out


def ulps_f32(got, ref) -> np.ndarray:
    """|got - ref| in units of float32 spacing at |ref| (ref in float64)."""
    ref = np.asarray(ref, np.float64)
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(np.asarray(got, np.float64) - ref) / spacing

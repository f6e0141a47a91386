"""Triton as a client of the emulated GPU: kernels compiled at test time by the real Triton
compiler, without a GPU, and launched through lowlevel's driver API as Triton's own
launcher would launch them.

    compile_kernel(fn, signature, constexprs, arch)
        triton.compile of an ASTSource for GPUTarget("cuda", arch, 32): Triton needs no GPU
        for that (it brings its own LLVM and ptxas). Kept per session (and Triton caches
        its builds in ~/.triton/cache, so a second session compiles nothing).
    TritonKernel.launch(grid, *args)
        the PTX (`asm["ptx"]`) loaded by cuModuleLoadData, the launch shaped by the
        metadata: 32 * num_warps threads, `shared` bytes of dynamic shared memory (opted in
        past 48 KB), a cluster when num_ctas > 1, and the two pointers Triton appends to
        every kernel's parameters (global scratch, `global_scratch_size` bytes per program,
        where tensor descriptors made in the kernel live on sm_90; profile scratch).
    hopper_instructions(ptx)
        the instructions of the PTX from the Hopper families the emulated GPU may lack
        (wgmma.*, cp.async.bulk.tensor, tensormap.*, setmaxnreg): what the sm_90a tests
        cover.
"""
import functools
import os
import re

import numpy as np
import pytest

from lowlevel import cuda

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")     # Triton 3.9's default, said (no warning)
triton = pytest.importorskip("triton", reason="triton not installed (pip install -e '.[triton]')", exc_type=ImportError)
from triton.backends.compiler import GPUTarget  # noqa: E402  (after the import check)
from triton.compiler import ASTSource  # noqa: E402

_HOPPER = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:wgmma|cp\.async\.bulk\.tensor|tensormap|setmaxnreg)[\w.:]*)", re.M)
SMEM_DEFAULT = 48 * 1024


def hopper_instructions(ptx: str) -> list[str]:
    """The sm_90 instructions (wgmma, TMA, tensormap, setmaxnreg) in `ptx`, sorted, once each."""
    return sorted(set(_HOPPER.findall(ptx)))


def hopper_families(ptx: str) -> set[str]:
    """The families of hopper_instructions(ptx): wgmma, cp.async.bulk.tensor, tensormap, setmaxnreg."""
    return {"cp.async.bulk.tensor" if i.startswith("cp.") else i.split(".")[0] for i in hopper_instructions(ptx)}


class TritonKernel:
    """One compiled Triton kernel: `.ptx`, `.metadata`, and launch()."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.ptx: str = compiled.asm["ptx"]
        self.metadata = compiled.metadata
        self._function = None

    @property
    def function(self) -> "cuda.Function":
        if self._function is None:
            self._function = cuda.Module.from_ptx(self.ptx).get_function(self.metadata.name)
            if self.metadata.shared > SMEM_DEFAULT:
                self._function.max_dynamic_shared_memory = self.metadata.shared
        return self._function

    def launch(self, grid, *args) -> None:
        """Run on `grid` programs with `args` (device pointers, Python numbers) and wait."""
        md = self.metadata
        grid = (*grid, 1, 1)[:3]
        programs = grid[0] * grid[1] * grid[2]
        scratch = None
        if md.global_scratch_size:
            scratch = cuda.mem_alloc(md.global_scratch_size * programs * md.num_ctas)
        extra = (scratch or 0, 0)                 # global scratch, profile scratch
        cluster = None if md.num_ctas == 1 else (md.num_ctas, 1, 1)
        self.function.launch(grid, (32 * md.num_warps, 1, 1), (*args, *extra),
                             shared_mem=md.shared, cluster=cluster)
        cuda.synchronize()


@functools.cache
def _compile(fn, signature: tuple, constexprs: tuple, arch: int, options: tuple) -> TritonKernel:
    source = ASTSource(fn=fn, signature=dict(signature), constexprs=dict(constexprs))
    return TritonKernel(triton.compile(source, target=GPUTarget("cuda", arch, 32), options=dict(options)))


def compile_kernel(fn, signature: dict, constexprs: dict, arch: int, **options) -> TritonKernel:
    """`fn` compiled for sm_`arch` (80, or 90 meaning sm_90a as Triton targets it)."""
    return _compile(fn, tuple(signature.items()), tuple(constexprs.items()), arch,
                    tuple(sorted(options.items())))


def device(host: np.ndarray):
    host = np.ascontiguousarray(host)
    dev = cuda.mem_alloc(max(1, host.nbytes))
    cuda.memcpy_htod(dev, host)
    return dev


def poisoned(shape, dtype):
    """Device memory for an output, every byte 0xFF first (NaN for floats, -1 for ints)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    dev = cuda.mem_alloc(nbytes)
    cuda.memset_d8(dev, 0xFF, nbytes)
    return dev


def host(dev, shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype)
    cuda.memcpy_dtoh(out, dev)
    return out

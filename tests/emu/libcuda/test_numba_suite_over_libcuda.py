"""numba-cuda's own test suite over the emulated libcuda.so.1: a representative subset of its
modules (atomics, warp intrinsics, sync, shared and constant memory, casts, complex,
records, device arrays, events, streams, pinned, mapped and managed memory, device functions
and the foreign ones linked with `link=`), run by numba's own runner in a fresh process.
Every test must pass or skip, but for the ones listed in EXPECTED, each with the reason it
cannot pass here. Skipped where numba-cuda is absent (pip install -e '.[clients]').

The whole suite: LD_LIBRARY_PATH=$(lowlevel emu-libcuda) python -m numba.runtests numba.cuda.tests
(numba-cuda 0.30.4's test_cupy_bfloat16_interop calls pytest.importorskip at import, which
numba's unittest loader does not catch: without CuPy, list the modules instead).
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from lowlevel.emu import libcuda

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODULES = [f"numba.cuda.tests.{m}" for m in (
    "cudapy.test_atomics", "cudapy.test_warp_ops", "cudapy.test_sync", "cudapy.test_sm", "cudapy.test_constmem",
    "cudapy.test_casting", "cudapy.test_complex", "cudapy.test_record_dtype", "cudadrv.test_cuda_ndarray",
    "cudadrv.test_events", "cudadrv.test_streams", "cudadrv.test_pinned", "cudadrv.test_host_alloc",
    "cudadrv.test_managed_alloc", "cudadrv.test_profiler",
    "cudapy.test_device_func")]                 # link= of PTX and CUDA C files: PTX inputs linked (emu/ptx/linker.py)
# Tests that cannot pass here, and why (numba's runner reports a skip raised in setUp as an error).
EXPECTED = {
    "test_kernel_with_buffer": "needs CuPy, which is not installed",
    "test_kernel_with_strided_memory_view": "needs CuPy, which is not installed",
}
RESULT = re.compile(r"^(\w+) \(([\w.]+)\)(?:\n.*?)? \.\.\. (ok|ERROR|FAIL|skipped.*|expected failure)$", re.M)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None or importlib.util.find_spec("filecheck") is None,
                    reason="numba-cuda (and filecheck, which its tests import) is not installed: "
                           "pip install -e '.[clients]'")
def test_numba_cudas_own_tests_pass_on_the_emulated_gpu():
    try:
        folder = libcuda.directory()
    except libcuda.BuildError as e:
        pytest.skip(str(e))
    env = {**os.environ, "LD_LIBRARY_PATH": str(folder), "PYTHONPATH": str(ROOT),
           "NUMBA_DISABLE_PERFORMANCE_WARNINGS": "1"}
    env.pop("LOWLEVEL_DRIVER", None)
    run = subprocess.run([sys.executable, "-m", "numba.runtests", "-v", *MODULES], env=env, capture_output=True,
                         text=True, timeout=900, cwd=ROOT)
    outcomes = {name: outcome for name, _, outcome in RESULT.findall(run.stderr)}
    ran = re.search(r"^Ran (\d+) tests", run.stderr, re.M)
    assert ran and int(ran[1]) >= 300, run.stderr[-3000:]
    broken = {name: outcome for name, outcome in outcomes.items() if outcome in ("ERROR", "FAIL")}
    unexpected = sorted(set(broken) - set(EXPECTED))
    assert not unexpected, f"numba-cuda tests failing on the emulated GPU: {unexpected}\n{run.stderr[-6000:]}"
    passed = sum(outcome == "ok" for outcome in outcomes.values())
    assert passed >= 0.97 * (passed + len(broken)), (passed, broken)

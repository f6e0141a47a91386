"""Creation on CUDA happens on the device: zeros, ones, full, arange, eye, the *_like forms,
rand, randn and randint write their values there (memsets, fill, arange and Philox
kernels), so the host memory they take does not grow with the tensor's size (issue 23's
reproducer: ll.ones(600_000_000, device="cuda") took 9.4 GB of host memory), and no
host-to-device copy of the values is made."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import lowlevel as ll
from lowlevel import trace

ROOT = pathlib.Path(__file__).resolve().parents[2]
# SMALL fills the grid of every kernel here, with each thread going round its grid-stride loop
# more than once (grid_for caps the grid at 2048 blocks of 256 threads; a Philox thread makes 4
# elements per round): the emulated GPU's working memory grows with the threads a launch runs
# up to there, and not with the elements.
SMALL, LARGE = 1 << 22, 1 << 23

# Run in a fresh process: tracemalloc counts what Python and numpy allocate on the host
# (numpy reports its buffers to it), not the emulated GPU's memory (mapped by the emulator
# outside Python's allocators), so its peak is the host memory an op itself makes.
MEASURE = """
import json, sys, tracemalloc
import lowlevel as ll
from lowlevel import cuda
MAKERS = {
    "zeros": lambda n: ll.zeros(n, device="cuda"), "ones": lambda n: ll.ones(n, device="cuda"),
    "full": lambda n: ll.full((n,), 2.5, dtype=ll.float64, device="cuda"),
    "arange": lambda n: ll.arange(n, device="cuda"), "arange_float": lambda n: ll.arange(0.0, n / 2, 0.5, device="cuda"),
    "eye": lambda n: ll.eye(int(n ** 0.5), device="cuda"), "rand": lambda n: ll.rand(n, device="cuda"),
    "randn": lambda n: ll.randn(n, device="cuda"), "randint": lambda n: ll.randint(0, 9, (n,), device="cuda"),
    "full_like": lambda n: ll.full_like(ll.zeros(n, device="cuda"), 3),
}
peaks = {}
for name, make in MAKERS.items():
    make(16); make(%(small)d); cuda.synchronize()          # modules loaded, launch shapes seen
    peaks[name] = []
    for n in (%(small)d, %(large)d):
        tracemalloc.start()
        t = make(n)
        cuda.synchronize()
        peaks[name].append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        del t
print(json.dumps(peaks))
"""


def test_host_memory_of_creation_on_cuda_does_not_grow_with_the_size():
    script = MEASURE % {"small": SMALL, "large": LARGE}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peaks = json.loads(done.stdout.strip().splitlines()[-1])
    grown_values = 4 * (LARGE - SMALL)               # what float32 values of the difference take
    for name, (small, large) in peaks.items():
        assert large - small < grown_values / 20, (name, small, large)


def _no_copies_to_the_device(make):
    make()                      # warm: modules loaded, the number constants made
    with trace.Recorder() as r:
        t = make()
    return t, [c["symbol"] for c in r.calls if c["symbol"].startswith("cuMemcpy")]


@pytest.mark.parametrize("dtype", [ll.float32, ll.float64, ll.float16, ll.bfloat16, ll.int32, ll.int64],
                         ids=lambda d: d.name)
def test_arange_and_eye_on_cuda_equal_numpy_and_copy_nothing(driver, dtype):
    cases = [((5,), {}), ((2, 11, 3), {}), ((-3.5, 4.0, 0.25), {}), ((10, -7, -3), {}), ((0.0, 1.0, 0.1), {})]
    for args, kw in cases:
        if not dtype.is_float and any(isinstance(a, float) for a in args):
            continue
        got, copies = _no_copies_to_the_device(lambda: ll.arange(*args, dtype=dtype, device="cuda"))
        assert copies == [], args
        expect = np.arange(*args, dtype=np.float64) if dtype.is_float else np.arange(*args)
        np.testing.assert_array_equal(got.numpy(), ll.tensor(expect, dtype=dtype).numpy(), err_msg=str(args))
        np.testing.assert_array_equal(ll.arange(*args, dtype=dtype).numpy(), got.numpy())
    for n, m in ((3, 3), (2, 5), (6, 1), (0, 4)):
        got, copies = _no_copies_to_the_device(lambda: ll.eye(n, m, dtype=dtype, device="cuda"))
        assert copies == [] and got.dtype is dtype
        np.testing.assert_array_equal(got.numpy(), np.eye(n, m))


def test_arange_takes_torchs_dtypes_and_refuses_a_zero_step():
    assert ll.arange(4).dtype is ll.int64 and ll.arange(4.0).dtype is ll.float32
    assert ll.arange(0, 1, 0.25).numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    assert ll.arange(3, 1).shape == (0,)
    with pytest.raises(ValueError, match="step must be nonzero"):
        ll.arange(0, 3, 0)


def test_random_draws_copy_nothing_to_the_device(driver):
    for make in (lambda: ll.rand(3, 5, device="cuda"), lambda: ll.randn(100, device="cuda"),
                 lambda: ll.randint(-4, 4, (9,), device="cuda"), lambda: ll.rand(7, dtype=ll.float16, device="cuda")):
        t, copies = _no_copies_to_the_device(make)
        assert copies == [] and t.device.type == "cuda"

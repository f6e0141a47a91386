"""Every test that takes the `driver` fixture runs once per driver present: the emulated
GPU always, the real driver when libcuda loads and has a device (else skipped, saying why).

Fixtures only: the helpers tests share are in tests/helpers/ (`from helpers.memory import upload`)."""
import os

import numpy as np
import pytest

# On a real GPU: load every kernel when its module loads (lazy loading may synchronise the
# context at a first launch, which would wait on the streams the tests hold shut), and
# JIT every time (a cached JIT result comes with an empty info log). Set before cuInit.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

from lowlevel import cuda

DRIVER_KINDS = ["emu", "cuda"]


def _use(kind):
    """Switch to the driver `kind` for one test (skipping the real one where it is absent),
    and leave a clean context behind: a test may break it on purpose (faults are sticky)."""
    if kind == "cuda":
        why_not = cuda.real_driver_status()
        if why_not:
            pytest.skip(f"no real GPU here: {why_not}")
    drv = cuda.use_driver(kind)
    yield drv
    try:
        cuda.synchronize()
    except cuda.CudaError:
        cuda.reset_device()


@pytest.fixture(params=DRIVER_KINDS)
def driver(request):
    yield from _use(request.param)


@pytest.fixture(params=["cpu", *(f"cuda-{kind}" for kind in DRIVER_KINDS)])
def device(request):
    """A tensor device: "cpu", then "cuda" on each driver present."""
    if request.param == "cpu":
        yield "cpu"
        return
    for _ in _use(request.param.split("-")[1]):
        yield "cuda"


@pytest.fixture(autouse=True, scope="session")
def private_compile_cache(tmp_path_factory):
    """Compiles in the tests go to a cache of their own, not the user's."""
    os.environ["LOWLEVEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def mem(request):
    """An emulated GPU's memory, driven directly (tests/emu): one per test module, of the
    module's DEVICE_MEMORY_BYTES (128 MiB where it sets none)."""
    # Imported here, not at the top: only the engine tests of tests/emu drive it directly.
    from lowlevel.emu.engine.memory import DeviceMemory  # noqa: PLC0415
    return DeviceMemory(getattr(request.module, "DEVICE_MEMORY_BYTES", 1 << 27))

"""Cooperative launches: a grid-wide synchronisation (cooperative_groups::this_grid().sync(),
whose barrier lives in a workspace the driver provides) gives numpy's answer; a grid that
cannot be resident all at once is refused; without a cooperative launch grid.sync() traps."""
import numpy as np
import pytest
from helpers.cooperative_kernels import cooperative_module
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda

GRID, BLOCK = 6, 64


@pytest.fixture
def grid_sum(driver):
    return cooperative_module().get_function("grid_sum")


def _arguments(rng, n=3000):
    data = rng.integers(-1000, 1000, n, dtype=np.int32)
    return data, (upload(data), device_poisoned(4 * GRID * BLOCK), device_poisoned(8), n)


def test_a_grid_wide_sync_joins_two_phases(grid_sum, rng):
    data, args = _arguments(rng)
    grid_sum.launch(GRID, BLOCK, args, cooperative=True)
    assert download(args[2], 1, np.int64)[0] == data.astype(np.int64).sum()
    threads = GRID * BLOCK
    partial = download(args[1], threads, np.int32)
    np.testing.assert_array_equal(partial, [data[t::threads].sum() for t in range(threads)])


def test_cuLaunchCooperativeKernel_runs_a_grid_sync(grid_sum, driver, rng):
    data, args = _arguments(rng)
    packed = grid_sum.pack(args)
    driver.cuLaunchCooperativeKernel(grid_sum.handle, GRID, 1, 1, BLOCK, 1, 1, 0, None, packed.kernel_params)
    assert download(args[2], 1, np.int64)[0] == data.astype(np.int64).sum()


def test_a_cooperative_grid_must_fit_on_the_device(grid_sum, rng):
    _, args = _arguments(rng)
    sms = cuda.Device(0).attribute("MULTIPROCESSOR_COUNT")
    resident = grid_sum.occupancy(BLOCK) * sms
    with pytest.raises(cuda.CudaError) as refused:
        grid_sum.launch(resident + 1, BLOCK, args, cooperative=True)
    assert refused.value.name == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"


def test_grid_sync_without_a_cooperative_launch_traps(grid_sum, rng):
    _, args = _arguments(rng)
    grid_sum.launch(GRID, BLOCK, args)
    with pytest.raises(cuda.CudaError) as failed:
        cuda.synchronize()
    assert failed.value.name == "CUDA_ERROR_LAUNCH_FAILED"

"""Cooperative launches: a grid-wide synchronisation (cooperative_groups::this_grid().sync(),
whose barrier lives in a workspace the driver provides) gives numpy's answer; a grid that
cannot be resident all at once is refused; without a cooperative launch grid.sync() traps."""
import ctypes

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
    sms = cuda.GPU(0).attribute("MULTIPROCESSOR_COUNT")
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


def test_a_captured_cooperative_launch_stays_cooperative(grid_sum, driver, rng):
    """Replayed, and after cuGraphExecKernelNodeSetParams gives it a new grid, the node is
    still a cooperative launch (its grid.sync() would trap otherwise)."""
    stream = cuda.Stream(non_blocking=True)
    data, args = _arguments(rng)
    cuda.synchronize()
    with cuda.capture(stream) as graph:
        grid_sum.launch(GRID, BLOCK, args, stream=stream, cooperative=True)
    replay = graph.instantiate()
    replay.launch(stream)
    stream.synchronize()
    assert download(args[2], 1, np.int64)[0] == data.astype(np.int64).sum()
    node, count = ctypes.c_void_p(), ctypes.c_size_t(1)
    driver.cuGraphGetNodes(graph.handle, ctypes.byref(node), ctypes.byref(count))
    other, other_args = _arguments(rng)
    packed = grid_sum.pack(other_args)
    params = (ctypes.c_uint64 * 9)()      # CUDA_KERNEL_NODE_PARAMS_v2
    params[0] = grid_sum.handle
    (ctypes.c_uint * 8).from_buffer(params, 8)[:7] = [GRID // 2, 1, 1, BLOCK, 1, 1, 0]
    params[5] = ctypes.cast(packed.kernel_params, ctypes.c_void_p).value
    driver.cuGraphExecKernelNodeSetParams(replay.handle, node, params)
    replay.launch(stream)
    stream.synchronize()
    assert download(other_args[2], 1, np.int64)[0] == other.astype(np.int64).sum()

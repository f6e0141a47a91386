"""cuLaunchKernelEx and its launch attributes (cluster shape, cooperative, priority), and
cuLaunchCooperativeKernel: what runs, and what the driver refuses."""
import ctypes

import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda, kernels
from lowlevel.capi.constants import CURESULT, LAUNCH_ATTRIBUTE
from lowlevel.capi.launch_types import CUlaunchAttribute
from lowlevel.cuda.launch_config import LaunchConfig

N = 16 * 128


@pytest.fixture
def add(driver):
    return kernels.module("vector_add").get_function("vector_add")


def _inputs(rng):
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    return a, b, upload(a), upload(b)


@pytest.mark.parametrize("keywords", [{"priority": 0}, {"cooperative": False}, {"cooperative": True},
                                      {"cluster": (2, 1, 1)}, {"cluster": (4, 1, 1), "priority": -1}])
def test_launch_attributes_run_the_kernel(add, rng, keywords):
    a, b, da, db = _inputs(rng)
    out = device_poisoned(a.nbytes)
    add.launch(16, 128, (da, db, out, N), **keywords)
    np.testing.assert_array_equal(download(out, N), a + b)


def test_cuLaunchCooperativeKernel(add, driver, rng):
    a, b, da, db = _inputs(rng)
    out = device_poisoned(a.nbytes)
    packed = add.pack((da, db, out, N))
    driver.cuLaunchCooperativeKernel(add.handle, 16, 1, 1, 128, 1, 1, 0, None, packed.kernel_params)
    np.testing.assert_array_equal(download(out, N), a + b)


def _raw_launch(add, driver, attr_id, rng):
    _, _, da, db = _inputs(rng)
    attr = CUlaunchAttribute()
    attr.id = attr_id
    config = LaunchConfig((16, 1, 1), (128, 1, 1), 0, 0, [attr])
    packed = add.pack((da, db, device_poisoned(4 * N), N))
    return driver.cuLaunchKernelEx.unchecked(config.pointer(), add.handle, packed.kernel_params, None)


@pytest.mark.parametrize("attr_id", [15, 99, -1])
def test_an_unknown_launch_attribute_is_refused(add, driver, rng, attr_id):
    assert attr_id not in LAUNCH_ATTRIBUTE.values()
    assert _raw_launch(add, driver, attr_id, rng) == CURESULT["CUDA_ERROR_INVALID_VALUE"]


def test_the_ignore_attribute_is_ignored(add, driver, rng):
    assert _raw_launch(add, driver, LAUNCH_ATTRIBUTE["CU_LAUNCH_ATTRIBUTE_IGNORE"], rng) == 0
    cuda.synchronize()


@pytest.mark.parametrize("grid, cluster", [(16, (3, 1, 1)), (16, (16, 1, 1)), (32, (32, 1, 1)), (16, (2, 2, 1))])
def test_bad_cluster_shapes_are_refused(add, rng, grid, cluster):
    _, _, da, db = _inputs(rng)
    with pytest.raises(cuda.CudaError) as refused:
        add.launch(grid, 128, (da, db, device_poisoned(4 * N), N), cluster=cluster)
    assert refused.value.name == "CUDA_ERROR_INVALID_CLUSTER_SIZE"


def test_a_non_portable_cluster_needs_the_opt_in(add, rng):
    a, b, da, db = _inputs(rng)
    add.set_attribute("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
    out = device_poisoned(a.nbytes)
    add.launch(16, 128, (da, db, out, N), cluster=(16, 1, 1))
    np.testing.assert_array_equal(download(out, N), a + b)


def test_launch_keywords_are_checked_before_the_driver(add, rng):
    _, _, da, db = _inputs(rng)
    args = (da, db, device_poisoned(4 * N), N)
    with pytest.raises(TypeError, match="cooperative"):
        add.launch(16, 128, args, cooperative=1)
    with pytest.raises(ValueError, match="cluster"):
        add.launch(16, 128, args, cluster=(0, 1, 1))
    with pytest.raises(ValueError, match="priority"):
        add.launch(16, 128, args, priority=2**40)


def test_the_structures_point_where_the_driver_reads(add):
    config = LaunchConfig((4, 2, 1), (64, 1, 1), 256, 0, [])
    assert config.struct.numAttrs == 0 and config.struct.sharedMemBytes == 256
    assert ctypes.addressof(config.struct) == ctypes.cast(config.pointer(), ctypes.c_void_p).value


@pytest.mark.parametrize("field, value", [("hitRatio", 1.5), ("missProp", 2), ("hitProp", 7)])
def test_a_malformed_access_policy_window_is_refused(add, driver, rng, field, value):
    _, _, da, db = _inputs(rng)
    attr = CUlaunchAttribute()
    attr.id = LAUNCH_ATTRIBUTE["CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW"]
    attr.value.accessPolicyWindow.base_ptr = da.ptr
    attr.value.accessPolicyWindow.num_bytes = 4 * N
    attr.value.accessPolicyWindow.hitRatio = 0.5
    setattr(attr.value.accessPolicyWindow, field, value)
    config = LaunchConfig((16, 1, 1), (128, 1, 1), 0, 0, [attr])
    packed = add.pack((da, db, device_poisoned(4 * N), N))
    code = driver.cuLaunchKernelEx.unchecked(config.pointer(), add.handle, packed.kernel_params, None)
    assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]

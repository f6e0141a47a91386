"""cuFuncGetAttribute / cuFuncSetAttribute: the opt-in to more than 48 KB of dynamic shared
memory, the carveout, the cluster settings, and the read-only resource attributes."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda
from lowlevel.capi.constants import FUNCTION_ATTRIBUTE

REVERSE = r"""
extern "C" __global__ void reverse_twice(const float *in, float *out, int n) {
    extern __shared__ float staged[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = in[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 2.0f * staged[n - 1 - i];
}
"""
KB = 1024


@pytest.fixture
def reverse(driver):
    return cuda.Module.from_cuda(REVERSE).get_function("reverse_twice")


def _launch(f, data, shared):
    dst = device_poisoned(data.nbytes)
    f.launch(1, 256, (upload(data), dst, data.size), shared_mem=shared)
    return download(dst, data.shape)


def test_100_kb_of_dynamic_shared_memory_needs_the_opt_in(reverse, rng):
    n = 100 * KB // 4
    data = rng.standard_normal(n).astype(np.float32)
    assert reverse.max_dynamic_shared_memory == 48 * KB - reverse.shared_size_bytes
    with pytest.raises(cuda.CudaError) as refused:
        _launch(reverse, data, 100 * KB)
    assert refused.value.name == "CUDA_ERROR_INVALID_VALUE"
    reverse.max_dynamic_shared_memory = 100 * KB
    assert reverse.max_dynamic_shared_memory == 100 * KB
    np.testing.assert_array_equal(_launch(reverse, data, 100 * KB), 2 * data[::-1])


def test_the_opt_in_stops_at_the_device_limit(reverse):
    optin = cuda.GPU(0).attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    limit = optin - reverse.shared_size_bytes
    reverse.max_dynamic_shared_memory = limit
    for bad in (limit + 1, -1):
        with pytest.raises(cuda.CudaError) as refused:
            reverse.max_dynamic_shared_memory = bad
        assert refused.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert reverse.max_dynamic_shared_memory == limit


def test_read_only_attributes_cannot_be_set(reverse):
    for name in ("NUM_REGS", "SHARED_SIZE_BYTES", "LOCAL_SIZE_BYTES", "MAX_THREADS_PER_BLOCK",
                 "PTX_VERSION", "BINARY_VERSION", "CONST_SIZE_BYTES"):
        with pytest.raises(cuda.CudaError) as refused:
            reverse.set_attribute(name, 1)
        assert refused.value.name == "CUDA_ERROR_INVALID_VALUE", name


def test_every_attribute_reads_back(reverse, driver):
    values = reverse.attributes
    assert set(values) <= {name.removeprefix("CU_FUNC_ATTRIBUTE_") for name in FUNCTION_ATTRIBUTE}
    assert {"NUM_REGS", "MAX_DYNAMIC_SHARED_SIZE_BYTES", "REQUIRED_CLUSTER_DEPTH",
            "CLUSTER_SCHEDULING_POLICY_PREFERENCE"} <= set(values)
    if driver.kind == "emu":
        assert len(values) == len(FUNCTION_ATTRIBUTE)
    assert 0 < values["NUM_REGS"] <= 255 and values["SHARED_SIZE_BYTES"] == 0
    assert values["PTX_VERSION"] >= 60 and values["BINARY_VERSION"] >= 60
    assert values["REQUIRED_CLUSTER_WIDTH"] == 0 and values["CLUSTER_SIZE_MUST_BE_SET"] == 0
    assert values["PREFERRED_SHARED_MEMORY_CARVEOUT"] == -1


@pytest.mark.parametrize("name, good, bad", [
    ("PREFERRED_SHARED_MEMORY_CARVEOUT", 50, 101),
    ("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1, 2),
    ("CLUSTER_SCHEDULING_POLICY_PREFERENCE", 1, 99),
    ("REQUIRED_CLUSTER_WIDTH", 2, -1),
])
def test_settable_attributes_take_good_values_and_refuse_bad_ones(reverse, name, good, bad):
    reverse.set_attribute(name, good)
    assert reverse.attribute(name) == good
    with pytest.raises(cuda.CudaError) as refused:
        reverse.set_attribute(name, bad)
    assert refused.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert reverse.attribute(name) == good


def test_a_value_beyond_a_c_int_is_refused_before_the_driver(reverse):
    with pytest.raises(ValueError, match="MAX_DYNAMIC_SHARED_SIZE_BYTES"):
        reverse.set_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES", 2**32)
    with pytest.raises(ValueError, match="unknown function attribute"):
        reverse.set_attribute("NO_SUCH_THING", 1)

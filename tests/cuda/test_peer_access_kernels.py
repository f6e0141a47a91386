"""Peer access in kernels: with cuCtxEnablePeerAccess a kernel on device 0 loads, stores and
atomically updates device 1's memory through its unified addresses; without it (never
enabled, or disabled again) the same kernel faults with CUDA_ERROR_ILLEGAL_ADDRESS. Two
devices: the checks run in a fresh interpreter (helpers/two_devices.py)."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.two_devices import main, run_checks

from lowlevel import cuda


def test_peer_access_in_kernels(driver):
    run_checks(__file__, driver.kind, [name for name in globals() if name.startswith("check_")])


# ---- the checks, run in the fresh interpreter -------------------------------------------------
SOURCE = r"""
extern "C" __global__ void through_peer(const float *remote_in, float *local_out, float *remote_out,
                                        int *remote_count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = remote_in[i];                 // a load from device 1
        local_out[i] = v * 2.0f + 1.0f;         // a store to device 0
        remote_out[i] = v - 3.0f;               // a store to device 1
        atomicAdd(remote_count, 1);             // an atomic on device 1
    }
}
"""
N, BLOCK = 200, 64


def on(device: int):
    cuda.GPU(device).set_current()


def device1_buffers(x: np.ndarray):
    """Device 1's input (x), output (poisoned) and counter (0), allocated on device 1."""
    on(1)
    count = upload(np.zeros(1, np.int32))
    return upload(x), device_poisoned(x.nbytes), count


def launch_on_device0(remote_in, remote_out, count):
    """The kernel on device 0, reading and writing device 1's buffers; its own output."""
    on(0)
    f = cuda.Module.from_cuda(SOURCE).get_function("through_peer")
    local_out = device_poisoned(4 * N)
    f.launch(grid=-(-N // BLOCK), block=BLOCK, args=(remote_in, local_out, remote_out, count, N))
    return local_out


def check_with_peer_access_a_kernel_reaches_the_other_device():
    assert cuda.can_access_peer(0, 1)
    x = np.random.default_rng(7).standard_normal(N).astype(np.float32)
    remote_in, remote_out, count = device1_buffers(x)
    on(0)
    cuda.enable_peer_access(1)
    local_out = launch_on_device0(remote_in, remote_out, count)
    cuda.synchronize()
    np.testing.assert_array_equal(download(local_out, N), x * np.float32(2) + np.float32(1))
    on(1)
    np.testing.assert_array_equal(download(remote_out, N), x - np.float32(3))
    assert download(count, 1, np.int32)[0] == N
    on(0)
    cuda.disable_peer_access(1)


def check_without_peer_access_the_kernel_faults():
    x = np.random.default_rng(8).standard_normal(N).astype(np.float32)
    remote_in, remote_out, count = device1_buffers(x)
    launch_on_device0(remote_in, remote_out, count)     # access was enabled, then disabled
    with pytest.raises(cuda.CudaError) as fault:
        cuda.synchronize()
    assert fault.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    cuda.reset_device()                                 # the fault is sticky on device 0
    on(1)
    assert download(count, 1, np.int32)[0] == 0         # device 1's memory was not touched
    assert np.isnan(download(remote_out, N)).all()


def check_device1_does_not_reach_device0_by_device0s_peer_access():
    # peer access is one way: device 0 enabling it gives device 1's kernels nothing
    on(0)
    cuda.enable_peer_access(1)
    x = np.random.default_rng(9).standard_normal(N).astype(np.float32)
    remote_in, remote_out, count = upload(x), device_poisoned(x.nbytes), upload(np.zeros(1, np.int32))
    on(1)
    f = cuda.Module.from_cuda(SOURCE).get_function("through_peer")
    local_out = device_poisoned(4 * N)
    f.launch(grid=-(-N // BLOCK), block=BLOCK, args=(remote_in, local_out, remote_out, count, N))
    with pytest.raises(cuda.CudaError) as fault:
        cuda.synchronize()
    assert fault.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    cuda.reset_device()


if __name__ == "__main__":
    main(globals())

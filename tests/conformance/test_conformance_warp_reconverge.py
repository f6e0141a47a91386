"""Conformance: __syncwarp and shuffles on lanes that reconverge (issue 20, item 1).

On sm_70 and later a lane at bar.warp.sync (or a *.sync shuffle/vote) waits until every
non-exited lane its member mask names has executed one with the same mask (PTX ISA), so
each side of a lane-divergent if/else may have its own __syncwarp(): a correct program,
which the emulated GPU used to refuse as if every named lane had to be at that very
instruction. Inputs are fresh random integers, references numpy, outputs poisoned.
"""
import numpy as np
import pytest

from conformance_support import download, poisoned_device, upload
from lowlevel import cuda

KERNELS = r"""
// Odd and even lanes each store, reach their own __syncwarp and read the partner's store.
extern "C" __global__ void split_sync(const int* x, int* out) {
    __shared__ int s[128];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int v = x[i];
    if (t & 1) { s[t] = v * 3; __syncwarp(); out[i] = s[t ^ 1] + 1; }
    else { s[t] = v - 7; __syncwarp(); out[i] = s[t ^ 1] * 5 - v; }
}
// A warp's tree sum in shared memory: the lanes that add and the lanes that idle each
// reach their own pair of __syncwarp() per step.
extern "C" __global__ void tree(const int* x, int* out, int steps) {
    __shared__ int s[128];
    int t = threadIdx.x, lane = t & 31;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncwarp();
    for (int off = 16; off > 0 && steps > 0; off >>= 1, --steps) {
        if (lane < off) { int a = s[t] + s[t + off]; __syncwarp(); s[t] = a; __syncwarp(); }
        else { __syncwarp(); __syncwarp(); }
    }
    if (lane == 0) out[blockIdx.x * (blockDim.x / 32) + t / 32] = s[t];
}
// Lanes 16..31 wait at __syncthreads for lanes 0..15, which wait at __syncwarp for them.
extern "C" __global__ void cross_wait(int* out) {
    if (threadIdx.x < 16) { __syncwarp(); out[threadIdx.x] = 1; }
    else { __syncthreads(); out[threadIdx.x] = 2; }
}
"""


def test_syncwarp_on_each_side_of_an_if_else(driver, build, rng):
    f = build.load(KERNELS, "warp_reconverge").get_function("split_sync")
    grid, block = 3, 128
    x = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    out = poisoned_device(grid * block, np.int32)
    f.launch(grid, block, (upload(x), out))
    got = download(out, grid * block, np.int32)
    xi = x.astype(np.int64)
    partner = xi.reshape(-1, 2)[:, ::-1].reshape(-1)           # x of lane ^ 1
    odd = np.arange(grid * block) % 2 == 1
    want = np.where(odd, (partner - 7) + 1, partner * 3 * 5 - xi)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("steps", [5, 3])
def test_tree_sum_with_syncwarp_in_both_branches(driver, build, rng, steps):
    f = build.load(KERNELS, "warp_reconverge").get_function("tree")
    grid, block = 2, 96
    x = rng.integers(-2**20, 2**20, grid * block).astype(np.int32)
    out = poisoned_device(grid * block // 32, np.int32)
    f.launch(grid, block, (upload(x), out, np.int32(steps)))
    got = download(out, grid * block // 32, np.int32)
    stride = 32 >> steps                # lane 0 holds the sum of lanes 0, stride, 2 stride ...
    want = x.astype(np.int64).reshape(-1, 32)[:, ::stride].sum(axis=1)
    np.testing.assert_array_equal(got, want)


def test_syncwarp_waiting_for_lanes_at_syncthreads_is_a_launch_failure(build):
    """On a GPU a hang; on the emulated GPU a launch fault naming instruction and mask."""
    cuda.use_driver("emu")
    f = build.load(KERNELS, "warp_reconverge").get_function("cross_wait")
    out = poisoned_device(32, np.int32)
    f.launch(1, 32, (out,))
    with pytest.raises(cuda.CudaError) as fault:
        cuda.synchronize()
    assert fault.value.name == "CUDA_ERROR_LAUNCH_FAILED"
    msg = str(fault.value)
    assert "cross_wait" in msg and "bar.warp.sync" in msg and "deadlock" in msg
    assert "0xffffffff" in msg and "PTX line" in msg and "bar.sync" in msg
    assert "waiting here" not in msg                 # only the lanes that never come
    cuda.reset_device()                                             # faults are sticky

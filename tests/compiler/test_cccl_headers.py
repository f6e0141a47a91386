"""Sources that include CCCL's headers (<cuda/barrier>, CUB's, <cooperative_groups.h>, which
includes <nv/target>) compile with no -I: NVRTC is given the CCCL wheel's include directory
by default, as CuPy does. Each kernel runs on each driver, checked against numpy.

<cub/cub.cuh> itself is found too, but CCCL refuses it under NVRTC with an #error of its own
(include the specific header, e.g. <cub/block/block_reduce.cuh>): that is CCCL's rule."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import compiler, cuda

pathfinder = pytest.importorskip("cuda.pathfinder")
if pathfinder.find_nvidia_header_directory("cccl") is None:
    pytest.skip("the CCCL headers are not installed (pip install nvidia-cuda-cccl)", allow_module_level=True)

BARRIER = r"""
#include <cuda/barrier>
// Each thread writes its slot, waits at a block-scoped cuda::barrier, then reads its neighbour's.
extern "C" __global__ void rotate(const int* in, int* out) {
    __shared__ int slots[64];
    #pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    slots[threadIdx.x] = in[threadIdx.x];
    bar.arrive_and_wait();
    out[threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}
"""

CUB = r"""
#include <cub/block/block_reduce.cuh>
// One block's sum with cub::BlockReduce.
extern "C" __global__ void block_sum(const int* in, int* out) {
    using Reduce = cub::BlockReduce<int, 64>;
    __shared__ typename Reduce::TempStorage temp;
    int total = Reduce(temp).Sum(in[threadIdx.x]);
    if (threadIdx.x == 0) out[0] = total;
}
"""

COOPERATIVE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// Each 32-thread tile's maximum, by shuffles on a cooperative-groups tile.
extern "C" __global__ void tile_max(const int* in, int* out) {
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cg::this_thread_block());
    int v = in[threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) v = max(v, tile.shfl_down(v, offset));
    if (tile.thread_rank() == 0) out[threadIdx.x / 32] = v;
}
"""


def _run(source, name, values, out_count):
    function = cuda.Module.from_cuda(source).get_function(name)       # no -I
    d_in, d_out = upload(values), device_poisoned(4 * out_count)
    function.launch(1, values.size, (d_in, d_out))
    cuda.synchronize()
    return download(d_out, out_count, np.int32)


def test_cuda_barrier_without_include_flags(driver, rng):
    values = rng.integers(-1000, 1000, 64, dtype=np.int32)
    np.testing.assert_array_equal(_run(BARRIER, "rotate", values, 64), np.roll(values, -1))


def test_cub_without_include_flags(driver, rng):
    values = rng.integers(-1000, 1000, 64, dtype=np.int32)
    np.testing.assert_array_equal(_run(CUB, "block_sum", values, 1), [values.sum()])


def test_cooperative_groups_without_include_flags(driver, rng):
    values = rng.integers(-1000, 1000, 64, dtype=np.int32)
    np.testing.assert_array_equal(_run(COOPERATIVE, "tile_max", values, 2), values.reshape(2, 32).max(axis=1))


def test_cub_umbrella_header_is_found_and_refused_by_cccl_itself():
    with pytest.raises(compiler.CompileError) as caught:
        compiler.compile("#include <cub/cub.cuh>\n", "ptx", "compute_80")
    assert "not supported when compiling with NVRTC" in caught.value.log
    assert "cannot open source file" not in caught.value.log

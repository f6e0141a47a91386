"""CUDA C++ kernels written with cooperative_groups (a cluster exchange, a grid-wide
reduction), in one source so that NVRTC compiles its large headers once per session
(the compile cache keys by source)."""
import pytest

from lowlevel import cuda

SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void __cluster_dims__(2, 1, 1) swap_halves(const float *in, float *out) {
    __shared__ float mine[128];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    unsigned i = blockIdx.x * 128 + threadIdx.x;
    mine[threadIdx.x] = in[i];
    cluster.sync();                                   // every CTA's `mine` is written
    float *other = cluster.map_shared_rank(mine, rank ^ 1);
    out[i] = other[127 - threadIdx.x] * 2.0f + (float)cluster.num_blocks();
    cluster.sync();                                   // keep `mine` alive until the peer has read it
}

// Two phases around grid.sync(): every thread sums a strided slice, then thread 0 adds the
// partial sums every other block wrote.
extern "C" __global__ void grid_sum(const int *in, int *partial, long long *out, int n) {
    cg::grid_group grid = cg::this_grid();
    int s = 0;
    for (long long i = grid.thread_rank(); i < n; i += grid.size()) s += in[i];
    partial[grid.thread_rank()] = s;
    grid.sync();
    if (grid.thread_rank() == 0) {
        long long t = 0;
        for (unsigned long long i = 0; i < grid.size(); i++) t += partial[i];
        out[0] = t;
    }
}
"""


def cooperative_module() -> cuda.Module:
    """The kernels above, compiled for the current device (skips without CCCL's headers)."""
    pathfinder = pytest.importorskip("cuda.pathfinder")
    if pathfinder.find_nvidia_header_directory("cccl") is None:
        pytest.skip("<nv/target> (CCCL) not found for cooperative_groups")
    return cuda.Module.from_cuda(SOURCE)      # NVRTC searches CCCL's headers by default

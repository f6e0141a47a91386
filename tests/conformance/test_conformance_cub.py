"""Conformance: CUB's warp and block reductions, compiled by nvcc and NVRTC in every build
(conformance_support.BUILDS) and checked against numpy on random inputs, outputs poisoned.

CUB's shuffle reductions are inline assembly that declares its registers inside `{ }`
scopes, `{ .reg .f32 r0; .reg .pred p; shfl.sync.down.b32 r0|p, ...; }`, a scope per
step and per type: a module that reduces float, int and double declares `r0` as .f32,
.s32 and .f64 in sibling scopes, and reads the shuffle's predicate output `r0|p`.
"""
import numpy as np

from conformance_support import download, poisoned_device, upload

CUB_REDUCE = r"""
#include <cub/warp/warp_reduce.cuh>
#include <cub/block/block_reduce.cuh>
template <class T> __device__ T warp_sum(T v) {
    using WR = cub::WarpReduce<T>;
    __shared__ typename WR::TempStorage tmp[4];
    return WR(tmp[threadIdx.x / 32]).Sum(v);
}
// one kernel reducing three types, so that the scopes of each redeclare r0 with another type
extern "C" __global__ void warp_sums(const float* x, const int* y, const double* z,
                                     float* fo, int* io, double* dout) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float a = warp_sum(x[t]);
    int b = warp_sum(y[t]);
    double c = warp_sum(z[t]);
    if (threadIdx.x % 32 == 0) { fo[t / 32] = a; io[t / 32] = b; dout[t / 32] = c; }
}
extern "C" __global__ void block_max_sum(const float* x, float* sums, float* maxes) {
    using BR = cub::BlockReduce<float, 128>;
    __shared__ typename BR::TempStorage tmp;
    float v = x[blockIdx.x * 128 + threadIdx.x];
    float s = BR(tmp).Sum(v);
    __syncthreads();
    float m = BR(tmp).Reduce(v, cuda::maximum<>{});
    if (threadIdx.x == 0) { sums[blockIdx.x] = s; maxes[blockIdx.x] = m; }
}
"""


def test_cub_warp_reduce_three_types(driver, build, rng):
    f = build.load(CUB_REDUCE, "cub_reduce").get_function("warp_sums")
    grid, block = 3, 128
    n, warps = grid * block, grid * block // 32
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.integers(-2**24, 2**24, n).astype(np.int32)
    z = rng.standard_normal(n) * 1e3
    outs = [poisoned_device(warps, t) for t in (np.float32, np.int32, np.float64)]
    f.launch(grid, block, (upload(x), upload(y), upload(z), *outs))
    fsum = download(outs[0], warps, np.float32)
    ref = x.astype(np.float64).reshape(warps, 32).sum(1)
    bound = 32 * np.finfo(np.float32).eps * np.abs(x.reshape(warps, 32)).sum(1)
    assert (np.abs(fsum - ref) <= bound).all(), (fsum, ref)
    np.testing.assert_array_equal(download(outs[1], warps, np.int32),
                                  y.astype(np.int64).reshape(warps, 32).sum(1).astype(np.int32))
    dref = z.reshape(warps, 32).sum(1)
    dbound = 32 * np.finfo(np.float64).eps * np.abs(z.reshape(warps, 32)).sum(1)
    assert (np.abs(download(outs[2], warps, np.float64) - dref) <= dbound).all()


def test_cub_block_reduce(driver, build, rng):
    f = build.load(CUB_REDUCE, "cub_reduce").get_function("block_max_sum")
    grid = 5
    x = rng.standard_normal(grid * 128).astype(np.float32)
    sums, maxes = poisoned_device(grid, np.float32), poisoned_device(grid, np.float32)
    f.launch(grid, 128, (upload(x), sums, maxes))
    rows = x.reshape(grid, 128)
    ref = rows.astype(np.float64).sum(1)
    bound = 128 * np.finfo(np.float32).eps * np.abs(rows).sum(1)
    assert (np.abs(download(sums, grid, np.float32) - ref) <= bound).all()
    np.testing.assert_array_equal(download(maxes, grid, np.float32), rows.max(1))

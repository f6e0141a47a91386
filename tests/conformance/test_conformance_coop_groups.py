"""Conformance: cooperative groups, compiled in every build (conformance_support.BUILDS,
and clang where installed), against numpy on random inputs with poisoned outputs:
thread_block_tile of 8, 16, 32 and 64 threads with cg::reduce (a tile of 64 keeps its
barrier and exchange slots in reserved shared memory), coalesced_threads in a divergent
branch, and cg::memcpy_async into shared memory.
"""
import numpy as np

from conformance_support import download, poisoned_device, upload

CG = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
template <unsigned N> __device__ int tile_sum(const cg::thread_block& block, int v) {
    return cg::reduce(cg::tiled_partition<N>(block), v, cg::plus<int>());
}
extern "C" __global__ void tiles(const int* in, int* out) {
    auto block = cg::this_thread_block();
    int i = blockIdx.x * blockDim.x + block.thread_rank();
    int v = in[i];
    auto t64 = cg::tiled_partition<64>(block);
    int* o = out + 6 * i;
    o[0] = tile_sum<8>(block, v);
    o[1] = tile_sum<16>(block, v);
    o[2] = tile_sum<32>(block, v);
    o[3] = tile_sum<64>(block, v);
    o[4] = cg::reduce(t64, v, cg::greater<int>());
    o[5] = t64.meta_group_rank() * 100 + t64.thread_rank();
}
extern "C" __global__ void coalesced(const int* in, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    if (v & 1) {
        auto active = cg::coalesced_threads();
        out[i] = cg::reduce(active, v, cg::plus<int>()) * 64 + active.thread_rank();
    } else {
        out[i] = -1;
    }
}
extern "C" __global__ void staged(const float* in, float* out) {
    __shared__ float tile[128];
    auto block = cg::this_thread_block();
    cg::memcpy_async(block, tile, in + blockIdx.x * 128, sizeof(float) * 128);
    cg::wait(block);
    out[blockIdx.x * 128 + threadIdx.x] = tile[127 - threadIdx.x] * 2.0f;
}
"""


def test_cooperative_groups(driver, any_build, rng):
    """Every kernel from one module load (decoding a -G build is most of the cost)."""
    mod = any_build.load(CG, "coop_groups")
    _tiles(mod, rng)
    _coalesced(mod, rng)
    _memcpy_async(mod, rng)


def _tiles(mod, rng):
    grid, block = 2, 128
    n = grid * block
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poisoned_device(6 * n, np.int32)
    mod.get_function("tiles").launch(grid, block, (upload(x), out))
    got = download(out, (n, 6), np.int32)
    for col, size in enumerate((8, 16, 32, 64)):
        np.testing.assert_array_equal(got[:, col], x.reshape(-1, size).sum(1).repeat(size))
    np.testing.assert_array_equal(got[:, 4], x.reshape(-1, 64).max(1).repeat(64))
    t = np.arange(n) % block
    np.testing.assert_array_equal(got[:, 5], t // 64 * 100 + t % 64)


def _coalesced(mod, rng):
    n = 64
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = poisoned_device(n, np.int32)
    mod.get_function("coalesced").launch(1, n, (upload(x), out))
    want = np.full(n, -1)
    for w in range(n // 32):
        lanes = np.arange(32 * w, 32 * w + 32)
        odd = lanes[(x[lanes] & 1) == 1]
        want[odd] = x[odd].sum() * 64 + np.arange(odd.size)
    np.testing.assert_array_equal(download(out, n, np.int32), want)


def _memcpy_async(mod, rng):
    grid = 3
    x = rng.standard_normal(grid * 128).astype(np.float32)
    out = poisoned_device(grid * 128, np.float32)
    mod.get_function("staged").launch(grid, 128, (upload(x), out))
    np.testing.assert_array_equal(download(out, grid * 128, np.float32),
                                  (x.reshape(grid, 128)[:, ::-1] * 2).ravel())

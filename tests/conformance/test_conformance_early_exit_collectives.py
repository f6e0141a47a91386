"""Conformance: warp-collective matrix instructions after early exits (issue 20, item 1).

Persistent-CTA GEMMs launch more CTAs than tiles and let the spare ones return at once;
kernels with more warps than tiles let the spare warps return. The .aligned rule of wmma
(and ldmatrix, mma.sync) is per warp: every lane of the warp that executes it must be there,
converged. Warps and CTAs that have left take no part. A warp of which only some lanes are
left is undefined on a GPU, and refused here with a launch fault naming the rule.
Each tile is D = A B (16x16x16, f16 in, f32 out) against numpy float64, outputs poisoned.
"""
import numpy as np
import pytest

from conformance_support import download, poisoned_device, upload
from lowlevel import cuda

TILES = r"""
#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
// One 16x16x16 tile t: A row-major, B column-major, D row-major, each 256 elements.
__device__ void tile(const half* a, const half* b, float* d, int t) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a + 256 * t, 16);
    wmma::load_matrix_sync(fb, b + 256 * t, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d + 256 * t, acc, 16, wmma::mem_row_major);
}
extern "C" __global__ void tiles(const half* a, const half* b, float* d, int tiles) {
    if (blockIdx.x >= tiles) return;          // CTA-uniform exit
    if (threadIdx.x >= 32) return;            // warp-uniform exit
    tile(a, b, d, blockIdx.x);
}
// Warp 0 of each CTA leaves; the last warp computes the CTA's tile.
extern "C" __global__ void last_warp(const half* a, const half* b, float* d, int tiles) {
    if (blockIdx.x >= tiles || threadIdx.x < blockDim.x - 32) return;
    tile(a, b, d, blockIdx.x);
}
// Half of warp 0 leaves: the other half cannot run a warp-collective instruction.
extern "C" __global__ void half_warp(const half* a, const half* b, float* d, int tiles) {
    if (threadIdx.x >= 16) return;
    tile(a, b, d, 0);
}
"""


def run_tiles(build, rng, name, grid, block, tiles):
    f = build.load(TILES, "early_exit_tiles").get_function(name)
    a = rng.standard_normal((grid, 16, 16)).astype(np.float16)       # row-major
    b = rng.standard_normal((grid, 16, 16)).astype(np.float16)       # column-major: b[t, n, k]
    out = poisoned_device((grid, 16, 16), np.float32)
    f.launch(grid, block, (upload(a), upload(b), out, np.int32(tiles)))
    got = download(out, (grid, 16, 16), np.float32).astype(np.float64)
    A, B = a.astype(np.float64), b.astype(np.float64).transpose(0, 2, 1)
    want = A[:tiles] @ B[:tiles]
    bound = 17 * 2.0 ** -23 * (np.abs(A[:tiles]) @ np.abs(B[:tiles]))
    assert (np.abs(got[:tiles] - want) <= bound).all()
    assert np.isnan(got[tiles:]).all()                                # spare CTAs wrote nothing


@pytest.mark.parametrize("grid, block, tiles", [(4, 32, 2), (4, 64, 2), (1, 64, 1), (3, 96, 3)])
def test_wmma_after_cta_and_warp_uniform_exits(driver, build, rng, grid, block, tiles):
    run_tiles(build, rng, "tiles", grid, block, tiles)


@pytest.mark.parametrize("grid, block, tiles", [(4, 64, 3), (2, 128, 2)])
def test_wmma_in_the_last_warp_after_the_first_left(driver, build, rng, grid, block, tiles):
    run_tiles(build, rng, "last_warp", grid, block, tiles)


def test_wmma_in_half_a_warp_is_refused(build):
    """The emulated GPU's rule (a GPU's result is undefined): a launch fault naming it."""
    cuda.use_driver("emu")
    f = build.load(TILES, "early_exit_tiles").get_function("half_warp")
    a, b = upload(np.zeros((16, 16), np.float16)), upload(np.zeros((16, 16), np.float16))
    f.launch(1, 32, (a, b, poisoned_device((16, 16), np.float32), np.int32(1)))
    with pytest.raises(cuda.CudaError) as fault:
        cuda.synchronize()
    assert fault.value.name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "warp-collective" in str(fault.value)
    cuda.reset_device()                                             # faults are sticky

"""ptx/hgemm_wgmma_tma.ptx, the handwritten Hopper GEMM (TMA, mbarrier pipeline, wgmma), run
through the driver on fresh random float16 matrices against numpy in float64, C poisoned
first: 512^3, and ragged shapes whose edges the tensor maps' zero fill and the guarded
stores handle. The bound: each product is exact and the sums are float32, so an element is
within (K + 2) * 2^-24 * sum_k |a_ik| |b_jk| of the exact dot product.

The kernel is sm_90a's (TMA, wgmma): on a real GPU other than compute capability 9.0 it
skips, saying so."""
import numpy as np
import pytest
from helpers.memory import download, upload

from lowlevel import cuda
from lowlevel.backends.ptx import ptx_source


def hgemm():
    """The kernel's function (sm_90a: compute capability 9.0 only, as the emulated GPU is)."""
    if cuda.GPU(0).compute_capability != (9, 0):
        pytest.skip("sm_90a kernels run on compute capability 9.0 only (H100, H200)")
    return cuda.Module.from_ptx(ptx_source("hgemm_wgmma_tma")).get_function("hgemm_wgmma_tma")


def run(rng, M, N, K):
    f = hgemm()
    a = rng.standard_normal((M, K)).astype(np.float16)
    bt = rng.standard_normal((N, K)).astype(np.float16)
    da, db = upload(a), upload(bt)
    tma = cuda.TensorMap.tiled(da, np.float16, (M, K), (64, 64), swizzle=128)
    tmb = cuda.TensorMap.tiled(db, np.float16, (N, K), (64, 64), swizzle=128)
    c = cuda.mem_alloc(4 * M * N)
    cuda.memset_d8(c, 0xFF, 4 * M * N)
    f.launch((-(-N // 64), -(-M // 64)), 128, (tma, tmb, c, M, N, K))
    got = download(c, (M, N), np.float32).astype(np.float64)
    a64, b64 = a.astype(np.float64), bt.astype(np.float64)
    bound = (K + 2) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64).T) + 1e-30
    err = np.abs(got - a64 @ b64.T)
    assert np.all(err <= bound), f"max error {np.nanmax(err / bound):.3g} x the bound"


def test_512_cubed(driver, rng):
    run(rng, 512, 512, 512)


@pytest.mark.parametrize("M, N, K", [(100, 72, 200), (64, 8, 8), (1, 64, 64)])
def test_ragged_shapes(driver, rng, M, N, K):
    run(rng, M, N, K)

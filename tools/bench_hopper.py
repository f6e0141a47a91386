"""The row of tools/bench_emu.py for Hopper's GEMM: ptx/hgemm_wgmma_tma.ptx (TMA loads into
128B-swizzled shared memory, a two-stage mbarrier pipeline, wgmma m64n64k16) at 512^3 float16
with float32 output, beside hgemm_mma's row (the same size on sm_80's mma.sync). The result
is checked against numpy in float64: each element within (K + 2) * 2^-24 * sum |a| |b|."""
import math

import numpy as np

from lowlevel import cuda, kernels


def setup(rng):
    M = N = K = 512
    f = kernels.module("hgemm_wgmma_tma").get_function("hgemm_wgmma_tma")
    A = rng.standard_normal((M, K)).astype(np.float16)
    Bt = rng.standard_normal((N, K)).astype(np.float16)      # B stored transposed: K-major
    dA, dB, dC = cuda.mem_alloc(A.nbytes), cuda.mem_alloc(Bt.nbytes), cuda.mem_alloc(4 * M * N)
    cuda.memcpy_htod(dA, A)
    cuda.memcpy_htod(dB, Bt)
    tma = cuda.TensorMap.tiled(dA, np.float16, (M, K), (64, 64), swizzle=128)
    tmb = cuda.TensorMap.tiled(dB, np.float16, (N, K), (64, 64), swizzle=128)

    def launch():
        cuda.memset_d8(dC, 0xFF, 4 * M * N)
        return lambda: f.launch((N // 64, M // 64), 128, (tma, tmb, dC, M, N, K))

    a, b = A.astype(np.float64), Bt.astype(np.float64)
    ref = a @ b.T                                  # once, as bench_emu's other GEMMs
    bound = (K + 2) * 2.0 ** -24 * (np.abs(a) @ np.abs(b).T)

    def check():
        got = np.full((M, N), np.nan, np.float32)
        cuda.memcpy_dtoh(got, dC)
        worst = float(np.nanmax(np.abs(got - ref) / bound)) if not np.isnan(got).any() else math.inf
        return worst <= 1.0, f"err <= {worst:.3f} x bound"
    return "hgemm_wgmma_tma 512^3", "hgemm_wgmma_tma", launch, check, M * N


def setups(rng):
    """[(setup, (label, key))] for bench_emu.py."""
    return [(lambda: setup(rng), ("hgemm_wgmma_tma 512^3", "hgemm_wgmma_tma"))]

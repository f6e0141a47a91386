"""mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 from NVRTC-compiled
inline assembly: each lane loads its fragments of A (16xK), B (Kx8) and C (16x8) at the
positions the PTX ISA gives (groupID g = lane/4, t = lane%4), two warps with matrices of
their own, against a float64 matmul with a bound proportionate to K (the tensor core's
accumulation keeps fewer bits than float64). Inputs random, outputs poisoned.
"""
import numpy as np
import pytest

from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, poisoned, upload

SOURCE = r"""
#define MMA(TYPE) \
    "mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
#define MMA8(TYPE) \
    "mma.sync.aligned.m16n8k8.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
template <int BF, int K>
__device__ void run(const unsigned short* A, const unsigned short* B, const float* Cin, float* D) {
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    A += warp * 16 * K; B += warp * K * 8; Cin += warp * 128; D += warp * 128;
    unsigned a[4], b[2];
    for (int r = 0; r < K / 4; ++r) {                 // halves i = 2r, 2r+1
        unsigned h[2];
        for (int k = 0; k < 2; ++k) {
            int i = 2 * r + k, row = g + 8 * ((i / 2) % 2), col = 2 * t + i % 2 + 8 * (i / 4);
            h[k] = A[row * K + col];
        }
        a[r] = h[0] | (h[1] << 16);
    }
    for (int r = 0; r < K / 8; ++r) {
        unsigned h[2];
        for (int k = 0; k < 2; ++k) {
            int i = 2 * r + k, row = 2 * t + i % 2 + 8 * (i / 2);
            h[k] = B[row * 8 + g];                    // B is K x N, row-major here
        }
        b[r] = h[0] | (h[1] << 16);
    }
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = Cin[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    if (K == 8 && BF)
        asm volatile(MMA8("bf16") : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    else if (K == 8)
        asm volatile(MMA8("f16") : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    else if (BF)
        asm volatile(MMA("bf16") : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    else
        asm volatile(MMA("f16") : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                       "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
#define KERNEL(NAME, BF, K) extern "C" __global__ void NAME(const unsigned short* A, const unsigned short* B, \
                                                     const float* C, float* D) { run<BF, K>(A, B, C, D); }
KERNEL(mma_f16_k16, 0, 16) KERNEL(mma_bf16_k16, 1, 16) KERNEL(mma_f16_k8, 0, 8) KERNEL(mma_bf16_k8, 1, 8)
"""
WARPS = 2


def bf16_round(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("K", [16, 8])
@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mma_m16n8(driver, rng, kind, K):
    f = load_compiled(nvrtc_ptx(SOURCE)).get_function(f"mma_{kind}_k{K}")
    a64 = rng.standard_normal((WARPS, 16, K))
    b64 = rng.standard_normal((WARPS, K, 8))
    c = rng.standard_normal((WARPS, 16, 8)).astype(np.float32)
    if kind == "f16":
        abits, bbits = a64.astype(np.float16).view(np.uint16), b64.astype(np.float16).view(np.uint16)
        av, bv = abits.view(np.float16).astype(np.float64), bbits.view(np.float16).astype(np.float64)
    else:
        abits, bbits = bf16_round(a64), bf16_round(b64)
        av = (abits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        bv = (bbits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    out = upload(poisoned((WARPS, 16, 8), np.float32))
    f.launch(1, 32 * WARPS, (upload(abits), upload(bbits), upload(c), out))
    got = download(out, (WARPS, 16, 8), np.float32).astype(np.float64)
    want = av @ bv + c
    bound = (K + 1) * np.finfo(np.float32).eps * (np.abs(av) @ np.abs(bv) + np.abs(c))
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()

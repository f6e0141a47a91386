"""Conformance: tensor cores as CUDA C++ uses them, in every build (conformance_support.BUILDS),
against numpy float64 / int64 on random inputs, outputs poisoned.

- nvcuda::wmma: m16n16k16 f16 (f32 and f16 accumulators), bf16, and m16n16k8 tf32; row-
  and column-major operands with a padded stride, two k steps per tile, two warps with
  tiles of their own, an accumulator stored through shared memory.
- inline mma.sync for each type: f16 fed by ldmatrix (x4, and x2.trans for B), tf32
  m16n8k8, f64 m8n8k4, s8 m16n8k32 (.satfinite), s4 m16n8k64, b1 m16n8k256 .and.popc;
  the kernels pack their fragments from row-major matrices by the ISA's layout.
- nvcuda::wmma's other shapes and types (WMMA_MORE, one module): m32n8k16 and m8n32k16
  with f16 (f32 and f16 accumulators) and bf16, s8/u8 with int accumulators (m16n16k16,
  m32n8k16, m8n32k16), f64 m8n8k4; two k steps, two warps.
- nvcuda::wmma::experimental (WMMA_SUB_BYTE): s4 and u4 m8n8k32 (with and without
  satf) and b1 m8n8k128 bmma_sync (XOR and AND), two warps, strides padded.
- sparse mma (in INLINE): mma.sp m16n8k32 f16 with a 2:4 A pruned in the kernel, which
  builds the metadata of its thread pair (the other pair's is zeros, not read).
- the 8-bit floats (FP8, sm_90 builds: the same six, for sm_90 / compute_90): cuda_fp8.h's
  conversions (cvt.rn.satfinite.e4m3x2.f32 / .e5m2x2, cvt.rn.f16x2.e4m3x2) quantize A and
  B in the kernel, then mma m16n8k32 .e4m3.e5m2 with f32 accumulators.
Float bounds are proportionate to K: a tensor core's sums keep fewer bits than float64.
"""
import functools

import numpy as np
import pytest

from conformance_support import BUILDS, download, poisoned_device, upload
from helpers.cuda_c import load_compiled, nvcc_ptx, nvrtc_ptx
from helpers.fp8 import code_values, encode_reference
from lowlevel import cuda

WMMA = r"""
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;
// D = A B + C for a 16 x 16 tile per warp, K = 2 * KS, A row-major (lda), B col-major (ldb),
// C read row-major, D written column-major, both with ldc.
template <class T, int KS, class P>
__device__ void tile(const T* a, const T* b, const float* c, float* d, int lda, int ldb, int ldc) {
    int w = threadIdx.x / 32;
    a += w * 16 * lda; b += w * 16 * ldb; c += w * 16 * ldc; d += w * 16 * ldc;
    wmma::fragment<wmma::matrix_a, 16, 16, KS, P, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, KS, P, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, KS, float> acc;
    wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
    for (int k = 0; k < 2 * KS; k += KS) {
        wmma::load_matrix_sync(fa, a + k, lda);
        wmma::load_matrix_sync(fb, b + k, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(d, acc, ldc, wmma::mem_col_major);
}
extern "C" __global__ void wmma_f16(const half* a, const half* b, const float* c, float* d, int lda, int ldb, int ldc) {
    tile<half, 16, half>(a, b, c, d, lda, ldb, ldc);
}
extern "C" __global__ void wmma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, float* d,
                                     int lda, int ldb, int ldc) {
    tile<__nv_bfloat16, 16, __nv_bfloat16>(a, b, c, d, lda, ldb, ldc);
}
extern "C" __global__ void wmma_tf32(const float* a, const float* b, const float* c, float* d, int lda, int ldb, int ldc) {
    int w = threadIdx.x / 32;
    a += w * 16 * lda; b += w * 16 * ldb; c += w * 16 * ldc; d += w * 16 * ldc;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
    for (int k = 0; k < 16; k += 8) {
        wmma::load_matrix_sync(fa, a + k, lda);
        wmma::load_matrix_sync(fb, b + k, ldb);
        for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
        for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(d, acc, ldc, wmma::mem_col_major);
}
// f16 accumulators, column-major A, row-major B, the result through shared memory
extern "C" __global__ void wmma_f16_acc(const half* a, const half* b, half* d) {
    __shared__ __align__(32) half s[2][16 * 16];
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;
    wmma::fill_fragment(acc, __float2half(0.5f));
    wmma::load_matrix_sync(fa, a + w * 256, 16);
    wmma::load_matrix_sync(fb, b + w * 256, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(s[w], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < 256; i += 32) d[w * 256 + i] = s[w][i];
}
"""

WMMA_MORE = r"""
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
using namespace nvcuda;
// one M x N tile per warp: D = A B + C, A row-major (lda), B col-major (ldb), C/D row-major (ldc)
template <int M, int N, int K, int STEPS, class T, class Acc, class AL, class BL>
__device__ void tile(const T* a, const T* b, const Acc* c, Acc* d, int lda, int ldb, int ldc) {
    int w = threadIdx.x / 32;
    a += w * M * lda; b += w * N * ldb; c += w * M * ldc; d += w * M * ldc;
    wmma::fragment<wmma::matrix_a, M, N, K, T, AL> fa;
    wmma::fragment<wmma::matrix_b, M, N, K, T, BL> fb;
    wmma::fragment<wmma::accumulator, M, N, K, Acc> acc;
    wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
    for (int k = 0; k < STEPS * K; k += K) {
        wmma::load_matrix_sync(fa, a + k, lda);
        wmma::load_matrix_sync(fb, b + k, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(d, acc, ldc, wmma::mem_row_major);
}
// STEPS k steps: 1 for the 8-bit types, whose a + 16 would not be 256-bit aligned
#define TILE(NAME, M, N, K, STEPS, T, ACC) \
extern "C" __global__ void NAME(const T* a, const T* b, const ACC* c, ACC* d, int lda, int ldb, int ldc) { \
    tile<M, N, K, STEPS, T, ACC, wmma::row_major, wmma::col_major>(a, b, c, d, lda, ldb, ldc); }
TILE(f16_m32n8, 32, 8, 16, 2, half, float)
TILE(f16_m8n32, 8, 32, 16, 2, half, half)
TILE(bf16_m32n8, 32, 8, 16, 2, __nv_bfloat16, float)
TILE(bf16_m8n32, 8, 32, 16, 2, __nv_bfloat16, float)
TILE(s8_m16n16, 16, 16, 16, 1, signed char, int)
TILE(u8_m32n8, 32, 8, 16, 1, unsigned char, int)
TILE(s8_m8n32, 8, 32, 16, 1, signed char, int)
TILE(f64_m8n8, 8, 8, 4, 2, double, double)
"""

WMMA_SUB_BYTE = r"""
#include <mma.h>
using namespace nvcuda;
namespace wx = nvcuda::wmma::experimental;
// one 8 x 8 tile per warp: A row-major (lda elements of BITS bits), B col-major (ldb),
// C read row-major, D written column-major (ldc)
template <class P, int K, int BITS>
struct Tile {
    wmma::fragment<wmma::matrix_a, 8, 8, K, P, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 8, 8, K, P, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 8, 8, K, int> acc;
    __device__ Tile(const unsigned char* pa, const unsigned char* pb, const int* c, int lda, int ldb, int ldc) {
        int w = threadIdx.x / 32;
        wmma::load_matrix_sync(a, pa + w * 8 * lda * BITS / 8, lda);
        wmma::load_matrix_sync(b, pb + w * 8 * ldb * BITS / 8, ldb);
        wmma::load_matrix_sync(acc, c + w * 8 * ldc, ldc, wmma::mem_row_major);
    }
    __device__ void store(int* d, int ldc) {
        wmma::store_matrix_sync(d + threadIdx.x / 32 * 8 * ldc, acc, ldc, wmma::mem_col_major);
    }
};
#define ARGS const unsigned char* pa, const unsigned char* pb, const int* c, int* d, int lda, int ldb, int ldc, int sat
extern "C" __global__ void sub_s4(ARGS) {
    Tile<wx::precision::s4, 32, 4> t(pa, pb, c, lda, ldb, ldc);
    wmma::mma_sync(t.acc, t.a, t.b, t.acc, sat != 0);
    t.store(d, ldc);
}
extern "C" __global__ void sub_u4(ARGS) {
    Tile<wx::precision::u4, 32, 4> t(pa, pb, c, lda, ldb, ldc);
    wmma::mma_sync(t.acc, t.a, t.b, t.acc, sat != 0);
    t.store(d, ldc);
}
extern "C" __global__ void sub_b1_xor(ARGS) {
    Tile<wx::precision::b1, 128, 1> t(pa, pb, c, lda, ldb, ldc);
    wmma::bmma_sync(t.acc, t.a, t.b, t.acc, wx::bmmaBitOpXOR);
    t.store(d, ldc);
}
extern "C" __global__ void sub_b1_and(ARGS) {
    Tile<wx::precision::b1, 128, 1> t(pa, pb, c, lda, ldb, ldc);
    wmma::bmma_sync(t.acc, t.a, t.b, t.acc, wx::bmmaBitOpAND);
    t.store(d, ldc);
}
"""

INLINE = r"""
#include <cuda_fp16.h>
// A (16 x 16, row-major) and B (16 x 8, row-major, k by n) through shared memory and ldmatrix
extern "C" __global__ void mma_f16_ldmatrix(const half* A, const half* B, const float* C, float* D) {
    __shared__ __align__(16) half sa[16 * 16], sb[16 * 8];
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    for (int i = lane; i < 256; i += 32) sa[i] = A[i];
    for (int i = lane; i < 128; i += 32) sb[i] = B[i];
    __syncwarp();
    unsigned a[4], b[2];
    unsigned pa = (unsigned)__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]);
    unsigned pb = (unsigned)__cvta_generic_to_shared(&sb[(lane % 16) * 8]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
// the m16n8 fragments by the ISA's layout: E elements of BITS bits per 32-bit register
template <int E, int BITS> __device__ unsigned pack_a(const int* A, int K, int r, int g, int t) {
    unsigned w = 0;
    for (int j = 0; j < E; ++j)
        w |= ((unsigned)A[(g + 8 * (r % 2)) * K + E * t + j + 4 * E * (r / 2)] & ((1u << BITS) - 1)) << (BITS * j);
    return w;
}
template <int E, int BITS> __device__ unsigned pack_b(const int* B, int r, int g, int t) {
    unsigned w = 0;
    for (int j = 0; j < E; ++j)
        w |= ((unsigned)B[(E * t + j + 4 * E * r) * 8 + g] & ((1u << BITS) - 1)) << (BITS * j);
    return w;
}
#define MMA_INT(NAME, SHAPE, TYPES, E, BITS, K)                                                    \
extern "C" __global__ void NAME(const int* A, const int* B, const int* C, int* D) {                \
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;                                            \
    unsigned a[4], b[2];                                                                           \
    for (int r = 0; r < 4; ++r) a[r] = pack_a<E, BITS>(A, K, r, g, t);                             \
    for (int r = 0; r < 2; ++r) b[r] = pack_b<E, BITS>(B, r, g, t);                                \
    int c[4], d[4];                                                                                \
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];                   \
    asm volatile("mma.sync.aligned." SHAPE ".row.col" TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};" \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),               \
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));                                    \
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];                   \
}
MMA_INT(mma_s8, "m16n8k32", ".satfinite.s32.s8.s8.s32", 4, 8, 32)
MMA_INT(mma_s4, "m16n8k64", ".s32.s4.s4.s32", 8, 4, 64)
MMA_INT(mma_b1, "m16n8k256", ".s32.b1.b1.s32.and.popc", 32, 1, 256)
extern "C" __global__ void mma_tf32(const float* A, const float* B, const float* C, float* D) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    unsigned a[4], b[2];
    for (int i = 0; i < 4; ++i) {                       // A 16 x 8: rows g (+8 for odd i), cols t (+4 for i >= 2)
        unsigned x;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(x) : "f"(A[(g + 8 * (i % 2)) * 8 + t + 4 * (i / 2)]));
        a[i] = x;
    }
    for (int i = 0; i < 2; ++i) b[i] = __float_as_uint(B[(t + 4 * i) * 8 + g]);
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
extern "C" __global__ void mma_f64(const double* A, const double* B, const double* C, double* D) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    double d0, d1;
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};"
                 : "=d"(d0), "=d"(d1) : "d"(A[g * 4 + t]), "d"(B[t * 8 + g]), "d"(C[g * 8 + 2 * t]), "d"(C[g * 8 + 2 * t + 1]));
    D[g * 8 + 2 * t] = d0; D[g * 8 + 2 * t + 1] = d1;
}
// the two nonzeros of chunk c (4 columns) of row r of a 2:4-sparse A (16 x 32, row-major)
__device__ void kept(const half* A, int r, int c, int* i0, int* i1) {
    int n = 0;
    for (int j = 0; j < 4; ++j)
        if (__half2float(A[r * 32 + 4 * c + j]) != 0.0f) { if (n == 0) *i0 = j; else *i1 = j; ++n; }
}
extern "C" __global__ void mma_sp_f16(const half* A, const half* B, const float* C, float* D) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4, i0, i1;
    unsigned a[4], b[4], e = 0;
    for (int r = 0; r < 4; ++r) {         // compressed A, rows g / g+8, chunk t (r < 2) or t + 4
        int row = g + 8 * (r % 2), c = t + 4 * (r / 2);
        kept(A, row, c, &i0, &i1);
        a[r] = (unsigned)__half_as_ushort(A[row * 32 + 4 * c + i0]) |
               ((unsigned)__half_as_ushort(A[row * 32 + 4 * c + i1]) << 16);
    }
    if (t < 2) {                           // selector 0: T0 has chunks 0-3, T1 chunks 4-7
        for (int h = 0; h < 2; ++h)
            for (int c = 0; c < 4; ++c) {
                kept(A, g + 8 * h, 4 * t + c, &i0, &i1);
                e |= (unsigned)(i0 | (i1 << 2)) << (16 * h + 4 * c);
            }
    }
    for (int r = 0; r < 4; ++r)            // B 32 x 8 (row-major): rows 2t, 2t+1 (+8 r), column g
        b[r] = (unsigned)__half_as_ushort(B[(2 * t + 8 * r) * 8 + g]) |
               ((unsigned)__half_as_ushort(B[(2 * t + 1 + 8 * r) * 8 + g]) << 16);
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    asm volatile("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9,%10,%11}, {%12,%13,%14,%15}, %16, 0x0;"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]), "r"(e));
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
"""
EPS32, EPS16 = np.finfo(np.float32).eps, np.finfo(np.float16).eps


def bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def tf32_value(x):
    """cvt.rna.tf32.f32, in numpy: to nearest, ties away from zero, 10 fraction bits."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def within(got, want, k, terms, eps=EPS32):
    bound = (k + 1) * eps * terms
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


@pytest.mark.parametrize("kind", ["f16", "bf16", "tf32"])
def test_wmma_tiles(driver, build, rng, kind):
    f = build.load(WMMA, "wmma").get_function(f"wmma_{kind}")
    lda, ldb, ldc, k = 40, 48, 24, 32 if kind != "tf32" else 16      # strides padded, in elements
    a = rng.standard_normal((2 * 16, lda))
    b = rng.standard_normal((2 * 16, ldb))                           # column-major: b[w*16 + n, k]
    c = rng.standard_normal((2 * 16, ldc)).astype(np.float32)
    if kind == "f16":
        ah, bh = a.astype(np.float16), b.astype(np.float16)
        av, bv = ah.astype(np.float64), bh.astype(np.float64)
    elif kind == "bf16":
        ah, bh = bf16(a), bf16(b)
        av, bv = bf16_value(ah), bf16_value(bh)
    else:
        ah, bh = a.astype(np.float32), b.astype(np.float32)
        av, bv = tf32_value(ah), tf32_value(bh)
    out = poisoned_device((2 * 16, ldc), np.float32)
    f.launch(1, 64, (upload(ah), upload(bh), upload(c), out, np.int32(lda), np.int32(ldb), np.int32(ldc)))
    got = download(out, (2 * 16, ldc), np.float32).astype(np.float64)
    for w in range(2):
        A, B = av[16 * w:16 * w + 16, :k], bv[16 * w:16 * w + 16, :k].T
        C = c[16 * w:16 * w + 16, :16].astype(np.float64)
        D = got[16 * w:16 * w + 16, :16].T                           # stored column-major
        within(D, A @ B + C, k, np.abs(A) @ np.abs(B) + np.abs(C))
        # the padding between columns is never written
        assert np.isnan(got[16 * w:16 * w + 16, 16:]).all()


def test_wmma_f16_accumulators(driver, build, rng):
    f = build.load(WMMA, "wmma").get_function("wmma_f16_acc")
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)           # column-major per warp
    b = rng.standard_normal((2, 16, 16)).astype(np.float16)           # row-major per warp
    out = poisoned_device((2, 16, 16), np.float16)
    f.launch(1, 64, (upload(a), upload(b), out))
    got = download(out, (2, 16, 16), np.float16).astype(np.float64)
    A = a.astype(np.float64).transpose(0, 2, 1)
    B = b.astype(np.float64)
    within(got, A @ B + 0.5, 16, np.abs(A) @ np.abs(B) + 0.5, EPS16)


def test_mma_f16_through_ldmatrix(driver, build, rng):
    f = build.load(INLINE, "mma_inline").get_function("mma_f16_ldmatrix")
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    out = poisoned_device((16, 8), np.float32)
    f.launch(1, 32, (upload(a), upload(b), upload(c), out))
    A, B = a.astype(np.float64), b.astype(np.float64)
    within(download(out, (16, 8), np.float32), A @ B + c, 16, np.abs(A) @ np.abs(B) + np.abs(c))


@pytest.mark.parametrize("name, k, lo, hi", [("mma_s8", 32, -128, 128), ("mma_s4", 64, -8, 8),
                                             ("mma_b1", 256, 0, 2)])
def test_mma_integer(driver, build, rng, name, k, lo, hi):
    f = build.load(INLINE, "mma_inline").get_function(name)
    a = rng.integers(lo, hi, (16, k)).astype(np.int32)
    b = rng.integers(lo, hi, (k, 8)).astype(np.int32)
    c = rng.integers(-2**20, 2**20, (16, 8)).astype(np.int32)
    if name == "mma_s8":                   # .satfinite: some sums leave the int32 range
        c[::3] = 2**31 - 1000
        c[1::3] = -2**31 + 1000
    out = poisoned_device((16, 8), np.int32)
    f.launch(1, 32, (upload(a), upload(b), upload(c), out))
    want = np.clip(a.astype(np.int64) @ b + c, -2**31, 2**31 - 1)
    np.testing.assert_array_equal(download(out, (16, 8), np.int32), want)


def test_mma_tf32_and_f64(driver, build, rng):
    m = build.load(INLINE, "mma_inline")
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = tf32_value(rng.standard_normal((8, 8))).astype(np.float32)   # already tf32 values
    c = rng.standard_normal((16, 8)).astype(np.float32)
    out = poisoned_device((16, 8), np.float32)
    m.get_function("mma_tf32").launch(1, 32, (upload(a), upload(b), upload(c), out))
    A, B = tf32_value(a), b.astype(np.float64)
    within(download(out, (16, 8), np.float32), A @ B + c, 8, np.abs(A) @ np.abs(B) + np.abs(c))
    a64, b64, c64 = rng.standard_normal((8, 4)), rng.standard_normal((4, 8)), rng.standard_normal((8, 8))
    out = poisoned_device((8, 8), np.float64)
    m.get_function("mma_f64").launch(1, 32, (upload(a64), upload(b64), upload(c64), out))
    within(download(out, (8, 8), np.float64), a64 @ b64 + c64, 4,
           np.abs(a64) @ np.abs(b64) + np.abs(c64), np.finfo(np.float64).eps)


MORE = {  # kernel: (M, N, K, element, accumulator)
    "f16_m32n8": (32, 8, 16, "f16", np.float32), "f16_m8n32": (8, 32, 16, "f16", np.float16),
    "bf16_m32n8": (32, 8, 16, "bf16", np.float32), "bf16_m8n32": (8, 32, 16, "bf16", np.float32),
    "s8_m16n16": (16, 16, 16, "s8", np.int32), "u8_m32n8": (32, 8, 16, "u8", np.int32),
    "s8_m8n32": (8, 32, 16, "s8", np.int32), "f64_m8n8": (8, 8, 4, "f64", np.float64),
}


def operand(rng, kind, shape):
    """(device array, float64 / int64 values) of a random operand of `kind`."""
    if kind == "f16":
        h = rng.standard_normal(shape).astype(np.float16)
        return h, h.astype(np.float64)
    if kind == "bf16":
        h = bf16(rng.standard_normal(shape))
        return h, bf16_value(h)
    if kind == "f64":
        v = rng.standard_normal(shape)
        return v, v
    v = rng.integers(-128, 128, shape) if kind == "s8" else rng.integers(0, 256, shape)
    return v.astype(np.int8 if kind == "s8" else np.uint8), v.astype(np.int64)


@pytest.mark.parametrize("name", list(MORE))
def test_wmma_more_shapes(driver, build, rng, name):
    """One M x N tile per warp (two warps), two k steps (one for the 8-bit types); A
    row-major, B column-major, C and D row-major, strides padded (a multiple of 32 bytes, so
    that every tile stays 256-bit aligned)."""
    m, n, k, kind, acc = MORE[name]
    steps = 1 if acc == np.int32 else 2
    f = build.load(WMMA_MORE, "wmma_more").get_function(name)
    lda, ldb, ldc = steps * k + 32, steps * k + 32, n + 16
    a, av = operand(rng, kind, (2 * m, lda))
    b, bv = operand(rng, kind, (2 * n, ldb))                          # column-major: b[w*n + j, k]
    if acc == np.int32:
        c = rng.integers(-2**20, 2**20, (2 * m, ldc)).astype(np.int32)
    else:
        c = rng.standard_normal((2 * m, ldc)).astype(acc)
    out = poisoned_device((2 * m, ldc), acc)
    f.launch(1, 64, (upload(a), upload(b), upload(c), out, np.int32(lda), np.int32(ldb), np.int32(ldc)))
    got = download(out, (2 * m, ldc), acc)
    for w in range(2):
        A, B = av[m * w:m * w + m, :steps * k], bv[n * w:n * w + n, :steps * k].T
        C = c[m * w:m * w + m, :n]
        D = got[m * w:m * w + m, :n]
        if acc == np.int32:
            np.testing.assert_array_equal(D, A @ B + C)
        else:
            eps = np.finfo(acc).eps if acc != np.float16 else EPS16
            within(D.astype(np.float64), A @ B + C, steps * k, np.abs(A) @ np.abs(B) + np.abs(C), eps)
        pad = got[m * w:m * w + m, n:]                                # never written: still poison
        assert (pad == -1).all() if acc == np.int32 else np.isnan(pad.astype(np.float64)).all()


def pack_sub_byte(elements, bits):
    """Rows of 4-bit or 1-bit elements as bytes, lowest bits first (element e in byte e*bits/8)."""
    if bits == 1:
        return np.packbits(elements.astype(np.uint8), axis=-1, bitorder="little")
    return (elements[:, 0::2] | (elements[:, 1::2] << 4)).astype(np.uint8)


@pytest.mark.parametrize("name, sat", [("sub_s4", 0), ("sub_s4", 1), ("sub_u4", 0), ("sub_b1_xor", 0),
                                       ("sub_b1_and", 0)])
def test_wmma_sub_byte(driver, build, rng, name, sat):
    """s4/u4 and b1 through nvcuda::wmma::experimental, against int64; with satf, C near
    the int32 limits, so that the sums clamp."""
    bits, k = (1, 128) if "b1" in name else (4, 32)
    f = build.load(WMMA_SUB_BYTE, "wmma_sub_byte").get_function(name)
    lda, ldb, ldc = 2 * k, 3 * k, 12                   # in elements, padded
    A = rng.integers(0, 1 << bits, (16, lda))
    B = rng.integers(0, 1 << bits, (16, ldb))         # column-major: B[w*8 + j, k]
    c = rng.integers(-2**20, 2**20, (16, ldc)).astype(np.int32)
    if sat:
        c[:, :8] = np.where(rng.integers(0, 2, (16, 8)) == 1, 2**31 - 40, -2**31 + 40)
    out = poisoned_device((16, ldc), np.int32)
    f.launch(1, 64, (upload(pack_sub_byte(A, bits)), upload(pack_sub_byte(B, bits)), upload(c), out,
                     np.int32(lda), np.int32(ldb), np.int32(ldc), np.int32(sat)))
    got = download(out, (16, ldc), np.int32)
    val = (lambda x: np.where(x >= 8, x - 16, x)) if name == "sub_s4" else (lambda x: x)
    for w in range(2):
        a, b = val(A[8 * w:8 * w + 8, :k]), val(B[8 * w:8 * w + 8, :k]).T
        C = c[8 * w:8 * w + 8, :8].astype(np.int64)
        if "xor" in name:
            want = C + (a[:, :, None] ^ b[None]).sum(axis=1)
        elif "and" in name:
            want = C + (a[:, :, None] & b[None]).sum(axis=1)
        else:
            want = C + a @ b
        want = np.clip(want, -2**31, 2**31 - 1) if sat else (want + 2**31) % 2**32 - 2**31
        np.testing.assert_array_equal(got[8 * w:8 * w + 8, :8].T, want)        # stored column-major
        assert (got[8 * w:8 * w + 8, 8:] == -1).all()                             # never written


def test_mma_sparse_f16(driver, build, rng):
    """A 2:4-sparse A (two random nonzeros in every 4 columns) times a dense B."""
    f = build.load(INLINE, "mma_inline").get_function("mma_sp_f16")
    a = np.zeros((16, 32), np.float16)
    for r in range(16):
        for c in range(8):
            keep = rng.choice(4, 2, replace=False)
            a[r, 4 * c + keep] = rng.uniform(0.5, 2, 2) * rng.choice([-1, 1], 2)
    b = rng.standard_normal((32, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    out = poisoned_device((16, 8), np.float32)
    f.launch(1, 32, (upload(a), upload(b), upload(c), out))
    A, B = a.astype(np.float64), b.astype(np.float64)
    within(download(out, (16, 8), np.float32), A @ B + c, 16, np.abs(A) @ np.abs(B) + np.abs(c))


FP8 = r"""
#include <cuda_fp8.h>
#include <cuda_fp16.h>
// A (16 x 32) to e4m3 and B (32 x 8) to e5m2 by cuda_fp8.h, in the m16n8k32 layouts: register
// r of A holds A[g + 8 (r % 2)][4t + j + 16 (r / 2)], of B B[4t + j + 16 r][g], j = 0..3 from
// the low byte; the bytes are written back (Aq, Bq), A's first pair widened back to half (Ah)
__device__ unsigned quantize4(float x0, float x1, float x2, float x3, __nv_fp8_interpretation_t kind) {
    unsigned lo = __nv_cvt_float2_to_fp8x2(make_float2(x0, x1), __NV_SATFINITE, kind);
    unsigned hi = __nv_cvt_float2_to_fp8x2(make_float2(x2, x3), __NV_SATFINITE, kind);
    return lo | (hi << 16);
}
extern "C" __global__ void mma_fp8(const float* A, const float* B, const float* C, float* D,
                                   unsigned char* Aq, unsigned char* Bq, unsigned short* Ah) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    unsigned a[4], b[2];
    for (int r = 0; r < 4; ++r) {
        int at = (g + 8 * (r % 2)) * 32 + 4 * t + 16 * (r / 2);
        a[r] = quantize4(A[at], A[at + 1], A[at + 2], A[at + 3], __NV_E4M3);
        for (int j = 0; j < 4; ++j) Aq[at + j] = (a[r] >> (8 * j)) & 0xFF;
    }
    for (int r = 0; r < 2; ++r) {
        int k = 4 * t + 16 * r;
        b[r] = quantize4(B[k * 8 + g], B[(k + 1) * 8 + g], B[(k + 2) * 8 + g], B[(k + 3) * 8 + g], __NV_E5M2);
        for (int j = 0; j < 4; ++j) Bq[(k + j) * 8 + g] = (b[r] >> (8 * j)) & 0xFF;
    }
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(a[0] & 0xFFFF), __NV_E4M3);
    Ah[2 * lane] = h.x; Ah[2 * lane + 1] = h.y;
    float c[4], d[4];
    for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
"""


@functools.cache
def sm90_ptx(build_name: str, source: str) -> str:
    """`source` in one of the builds of conformance_support, for sm_90 / compute_90 (the
    8-bit floats need sm_89), compiled once per session."""
    tool, options = BUILDS[build_name]
    if tool == "nvcc":
        return nvcc_ptx(source, "sm_90", options)
    return nvrtc_ptx(source, "compute_90", options)


@pytest.mark.parametrize("build_name", sorted(BUILDS))
def test_mma_fp8(driver, rng, build_name):
    """cuda_fp8.h's conversions and mma .e4m3.e5m2 against the references of helpers/fp8.py:
    the bytes exactly (values that saturate, subnormals), the widened half exactly, D
    within a bound proportionate to K of float64's."""
    if driver.runs_sass and cuda.GPU(0).compute_capability < (8, 9):
        pytest.skip("the 8-bit floats need an sm_89 GPU")
    f = load_compiled(sm90_ptx(build_name, FP8)).get_function("mma_fp8")
    a = (rng.standard_normal((16, 32)) * 8).astype(np.float32)
    a[0, :4] = [1000.0, -500.0, 2.0 ** -8, -(2.0 ** -10)]      # saturate to +-448; e4m3 subnormals
    b = rng.standard_normal((32, 8)).astype(np.float32)
    b[0, 0], b[1, 0] = 70000.0, 3e-6                           # saturates to 57344; below e5m2's least
    c = rng.standard_normal((16, 8)).astype(np.float32)
    out = poisoned_device((16, 8), np.float32)
    aq, bq = poisoned_device((16, 32), np.uint8), poisoned_device((32, 8), np.uint8)
    ah = poisoned_device((64,), np.uint16)
    f.launch(1, 32, (upload(a), upload(b), upload(c), out, aq, bq, ah))
    want_aq, want_bq = encode_reference(a, "e4m3", False), encode_reference(b, "e5m2", False)
    np.testing.assert_array_equal(download(aq, (16, 32), np.uint8), want_aq)
    np.testing.assert_array_equal(download(bq, (32, 8), np.uint8), want_bq)
    A, B = code_values("e4m3")[want_aq], code_values("e5m2")[want_bq]
    first = np.array([A[g, 4 * t + j] for g in range(8) for t in range(4) for j in (0, 1)])
    np.testing.assert_array_equal(download(ah, (64,), np.uint16), first.astype(np.float16).view(np.uint16))
    within(download(out, (16, 8), np.float32), A @ B + c, 32, np.abs(A) @ np.abs(B) + np.abs(c))

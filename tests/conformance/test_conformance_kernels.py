"""Conformance: CUDA C kernels written for this suite, compiled at test time by nvcc and
NVRTC in three builds each (see conformance_support.BUILDS), loaded with Module.from_ptx,
launched through the driver API on every driver present, and checked against numpy (or
plain Python) on fresh random inputs of awkward sizes, with every output poisoned first.

Each kernel lives in its own source so that one refused instruction fails only the kernels
that use it. Test ids read  test_<kernel>[<driver>-<build>].

Kernels 1-12 are the issue's list (histogram, block scan, padded transpose, bitonic sort,
shuffles + ballot + popc, float atomic max by CAS, __noinline__ with local arrays and div/mod,
half precision, dynamic shared memory, warp softmax, register-blocked sgemm, bit
manipulation); after them come a few more: match.any / activemask / shfl widths, redux.sync,
every atomic on global and shared memory, and bfloat16.
"""
import numpy as np

from lowlevel import cuda
from conformance_support import download, poisoned_device, upload

F32_EPS = float(np.finfo(np.float32).eps)          # 2^-23: one ulp at 1.0
F32_TINY = float(np.finfo(np.float32).tiny)


# ---- 1. histogram: shared-memory atomics, then global atomics ------------------------------
HISTOGRAM = r"""
extern "C" __global__ void histogram(const unsigned int* data, int n, unsigned int* bins, int nbins) {
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0u;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i] % (unsigned int)nbins], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x)
        if (local[b] != 0u) atomicAdd(&bins[b], local[b]);
}
"""


def test_histogram(driver, build, rng):
    f = build.load(HISTOGRAM, "histogram").get_function("histogram")
    n = int(rng.integers(20_000, 40_000))
    nbins = int(rng.integers(100, 257))
    data = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    data[rng.random(n) < 0.4] = int(rng.integers(0, 2**32))     # a hot bin: heavy conflicts
    bins = cuda.mem_alloc(4 * nbins)
    cuda.memset_d8(bins, 0, 4 * nbins)                          # the kernel accumulates
    f.launch(int(rng.integers(3, 9)), int(rng.choice([96, 128, 256])), (upload(data), n, bins, nbins))
    expect = np.bincount((data % nbins).astype(np.int64), minlength=nbins).astype(np.uint32)
    np.testing.assert_array_equal(download(bins, nbins, np.uint32), expect)


# ---- 2. block scan: Hillis-Steele inclusive prefix sum in shared memory ----------------------
BLOCK_SCAN = r"""
extern "C" __global__ void block_scan(const int* in, int* out, int* block_sums, int n) {
    __shared__ int buf[2][1024];                       // double buffer: read one, write the other
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    int cur = 0;
    buf[0][tid] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        int v = buf[cur][tid];
        if (tid >= offset) v += buf[cur][tid - offset];
        buf[1 - cur][tid] = v;
        cur = 1 - cur;
        __syncthreads();
    }
    if (i < n) out[i] = buf[cur][tid];
    if (tid == blockDim.x - 1) block_sums[blockIdx.x] = buf[cur][tid];
}
"""


def test_block_scan(driver, build, rng):
    f = build.load(BLOCK_SCAN, "block_scan").get_function("block_scan")
    block = int(rng.choice([96, 160, 256, 1000]))            # not only powers of two
    n = int(rng.integers(3000, 12_000))
    grid = -(-n // block)
    x = rng.integers(-(2**20), 2**20, size=n).astype(np.int32)
    out, sums = poisoned_device(n, np.int32), poisoned_device(grid, np.int32)
    f.launch(grid, block, (upload(x), out, sums, n))
    padded = np.zeros(grid * block, np.int64)
    padded[:n] = x
    scan = np.cumsum(padded.reshape(grid, block), axis=1)
    np.testing.assert_array_equal(download(out, n, np.int32), scan.reshape(-1)[:n].astype(np.int32))
    np.testing.assert_array_equal(download(sums, grid, np.int32), scan[:, -1].astype(np.int32))


# ---- 3. transpose through a padded 32x33 shared tile ----------------------------------------
TRANSPOSE = r"""
#define TILE 32
extern "C" __global__ void transpose_padded(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];             // +1: column reads hit 32 different banks
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y)
        if (x < rows && y + j < cols)
            out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""


def test_transpose_padded(driver, build, rng):
    f = build.load(TRANSPOSE, "transpose").get_function("transpose_padded")
    rows, cols = (int(v) for v in rng.integers(33, 150, size=2))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poisoned_device((cols, rows), np.float32)
    f.launch((-(-cols // 32), -(-rows // 32)), (32, 8), (upload(x), out, rows, cols))
    np.testing.assert_array_equal(download(out, (cols, rows), np.float32), x.T)


# ---- 4. bitonic sort of a power-of-two segment per block, in shared memory ---------------------
BITONIC = r"""
extern "C" __global__ void bitonic_sort(float* data, int len) {
    __shared__ float s[1024];
    float* seg = data + (size_t)blockIdx.x * len;
    for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = seg[i];
    __syncthreads();
    for (int k = 2; k <= len; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < len; i += blockDim.x) {
                int partner = i ^ j;
                if (partner > i) {
                    float a = s[i], b = s[partner];
                    bool ascending = (i & k) == 0;
                    if ((a > b) == ascending) { s[i] = b; s[partner] = a; }
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < len; i += blockDim.x) seg[i] = s[i];
}
"""


def test_bitonic_sort(driver, build, rng):
    f = build.load(BITONIC, "bitonic").get_function("bitonic_sort")
    length = int(rng.choice([64, 256, 512, 1024]))
    segments = int(rng.integers(2, 6))
    block = int(rng.choice([32, 64, 128])) if length > 64 else 32
    # Duplicates on purpose (integers as floats), and no zeros, so -0.0 vs 0.0 cannot matter.
    x = rng.integers(-500, 500, size=(segments, length)).astype(np.float32)
    x[x == 0] = 0.5
    d = upload(x)
    f.launch(segments, block, (d, length))
    np.testing.assert_array_equal(download(d, (segments, length), np.float32), np.sort(x, axis=1))


# ---- 5. warp shuffles, votes, ballot and popc ------------------------------------------------
WARP_VOTE = r"""
extern "C" __global__ void warp_vote(const float* x, const int* ix, float threshold, int n,
                                     float* warp_sum, unsigned int* ballot, int* count, int* any_all,
                                     int* scan, int* bcast8, unsigned int* odd_ballot) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int w = i >> 5;
    bool in = i < n;
    float v = in ? x[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned int b = __ballot_sync(0xffffffffu, in && x[i] > threshold);
    int any = __any_sync(0xffffffffu, in && ix[i] < 0);
    int all = __all_sync(0xffffffffu, !in || ix[i] > -900);
    int s = in ? ix[i] : 0;                            // inclusive warp scan by shfl_up
    for (int off = 1; off < 32; off <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, s, off);
        if (lane >= off) s += t;
    }
    int bc = __shfl_sync(0xffffffffu, in ? ix[i] : -1, 3, 8);     // lane 3 of each 8-lane group
    unsigned int ob = 0u;
    if (lane & 1) ob = __ballot_sync(0xaaaaaaaau, in && ix[i] > 0);  // only the odd lanes vote
    if (in) { scan[i] = s; bcast8[i] = bc; odd_ballot[i] = ob; }
    if (lane == 0) { warp_sum[w] = v; ballot[w] = b; count[w] = __popc(b); any_all[w] = any | (all << 1); }
}
"""


def test_warp_shuffle_ballot_popc(driver, build, rng):
    f = build.load(WARP_VOTE, "warp_vote").get_function("warp_vote")
    n = int(rng.integers(1000, 4000))
    block = int(rng.choice([64, 96, 256]))
    grid = -(-n // block)
    warps = grid * block // 32
    x = rng.standard_normal(n).astype(np.float32)
    ix = rng.integers(-1000, 1000, size=n).astype(np.int32)
    ix[: 32 * (n // 64)] = np.abs(ix[: 32 * (n // 64)])     # the first warps: none negative
    threshold = np.float32(rng.standard_normal() * 0.5)
    outs = [poisoned_device(warps, np.float32), poisoned_device(warps, np.uint32),
            poisoned_device(warps, np.int32), poisoned_device(warps, np.int32),
            poisoned_device(n, np.int32), poisoned_device(n, np.int32), poisoned_device(n, np.uint32)]
    f.launch(grid, block, (upload(x), upload(ix), threshold, n, *outs))

    lanes = warps * 32
    xp = np.zeros(lanes, np.float32); xp[:n] = x
    valid = np.zeros(lanes, bool); valid[:n] = True
    ixp = np.zeros(lanes, np.int64); ixp[:n] = ix
    # shfl_down tree, exactly as the kernel adds (float32, same order): lane 0 ends with it.
    t = xp.reshape(warps, 32)
    for off in (16, 8, 4, 2, 1):
        t = t[:, :off] + t[:, off:2 * off]
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
    pred = (valid & (xp > threshold)).reshape(warps, 32)
    ballot = (pred * weights).sum(axis=1).astype(np.uint32)
    anyneg = (valid & (ixp < 0)).reshape(warps, 32).any(axis=1)
    allok = (~valid | (ixp > -900)).reshape(warps, 32).all(axis=1)
    scan = np.cumsum(np.where(valid, ixp, 0).reshape(warps, 32), axis=1).reshape(-1)[:n]
    src = np.where(valid, ixp, -1).reshape(warps, 4, 8)[:, :, 3:4]
    bcast = np.broadcast_to(src, (warps, 4, 8)).reshape(-1)[:n]
    odd = np.zeros(32, bool); odd[1::2] = True
    opred = (valid & (ixp > 0)).reshape(warps, 32) & odd
    oball = (opred * weights).sum(axis=1).astype(np.uint32)
    oball_lanes = np.where(odd, oball[:, None], 0).reshape(-1)[:n].astype(np.uint32)

    np.testing.assert_array_equal(download(outs[0], warps, np.float32), t[:, 0])
    np.testing.assert_array_equal(download(outs[1], warps, np.uint32), ballot)
    np.testing.assert_array_equal(download(outs[2], warps, np.int32),
                                  np.array([bin(int(b)).count("1") for b in ballot], np.int32))
    np.testing.assert_array_equal(download(outs[3], warps, np.int32), (anyneg | (allok << 1)).astype(np.int32))
    np.testing.assert_array_equal(download(outs[4], n, np.int32), scan.astype(np.int32))
    np.testing.assert_array_equal(download(outs[5], n, np.int32), bcast.astype(np.int32))
    np.testing.assert_array_equal(download(outs[6], n, np.uint32), oball_lanes)


# ---- 6. float atomic max through an atomicCAS loop; atomic tickets ---------------------------
ATOMIC_MAX = r"""
__device__ float atomic_max_f32(float* address, float val) {
    int* p = (int*)address;
    int old = *p;
    while (__int_as_float(old) < val) {
        int assumed = old;
        old = atomicCAS(p, assumed, __float_as_int(val));
        if (old == assumed) break;                      // our value went in
    }
    return __int_as_float(old);
}

extern "C" __global__ void atomic_max(const float* x, int n, float* out, int nout,
                                      float* previous, unsigned int* counter, unsigned int* ticket) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        previous[i] = atomic_max_f32(&out[i % nout], x[i]);
        ticket[i] = atomicAdd(counter, 1u);
    }
}
"""


def test_float_atomic_max_cas_loop(driver, build, rng):
    f = build.load(ATOMIC_MAX, "atomic_max").get_function("atomic_max")
    n = int(rng.integers(3000, 9000))
    nout = int(rng.integers(1, 8))                       # few slots: heavy contention
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    out = upload(np.full(nout, -np.inf, np.float32))
    previous, ticket = poisoned_device(n, np.float32), poisoned_device(n, np.uint32)
    counter = upload(np.zeros(1, np.uint32))
    f.launch(int(rng.integers(2, 7)), 128, (upload(x), n, out, nout, previous, counter, ticket))
    slots = np.arange(n) % nout
    expect = np.full(nout, -np.inf, np.float32)
    np.maximum.at(expect, slots, x)
    np.testing.assert_array_equal(download(out, nout, np.float32), expect)
    prev = download(previous, n, np.float32)
    # What each thread saw before its update: -inf, or some value of its own slot, never above the end.
    for s in range(nout):
        seen = prev[slots == s]
        assert np.isin(seen, np.append(x[slots == s], -np.inf)).all()
        assert (seen <= expect[s]).all()
    np.testing.assert_array_equal(download(counter, 1, np.uint32), [n])
    np.testing.assert_array_equal(np.sort(download(ticket, n, np.uint32)), np.arange(n, dtype=np.uint32))


# ---- 7. __noinline__ device functions, dynamically indexed local arrays, div/mod -------------
LOCAL_ARRAYS = r"""
__device__ __noinline__ unsigned int digit_mix(unsigned int v, unsigned int base, unsigned int* ndigits) {
    unsigned int d[32];                                // indexed by a loop counter: lives in .local
    unsigned int counts[16];                           // indexed by data: lives in .local
    for (int k = 0; k < 16; ++k) counts[k] = 0u;
    unsigned int nd = 0;
    do {
        d[nd] = v % base;
        counts[d[nd] & 15u] += 1u;
        v /= base;
        ++nd;
    } while (v != 0u);
    unsigned int acc = 0u;
    for (unsigned int k = 0; k < nd; ++k) acc = (acc * base + d[k]) % 1000003u;   // digits reversed
    for (int k = 0; k < 16; ++k) acc = acc * 31u + counts[k];
    *ndigits = nd;                                     // through a pointer to the caller's local
    return acc;
}

__device__ __noinline__ int signed_divmod(int a, int b, int* rem) {
    *rem = a % b;
    return a / b;
}

extern "C" __global__ void local_arrays(const unsigned int* v, const unsigned int* base,
                                        const int* a, const int* b, unsigned int* mix,
                                        unsigned int* nd, int* q, int* r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int c;
    mix[i] = digit_mix(v[i], base[i], &c);
    nd[i] = c;
    int rem;
    q[i] = signed_divmod(a[i], b[i], &rem);
    r[i] = rem;
}
"""


def _digit_mix(v: int, base: int) -> tuple[int, int]:
    digits = []
    while True:
        digits.append(v % base)
        v //= base
        if v == 0:
            break
    counts = [0] * 16
    for d in digits:
        counts[d & 15] += 1
    acc = 0
    for d in digits:
        acc = (acc * base + d) % 1000003
    for c in counts:
        acc = (acc * 31 + c) & 0xFFFFFFFF
    return acc, len(digits)


def test_noinline_local_arrays_divmod(driver, build, rng):
    f = build.load(LOCAL_ARRAYS, "local_arrays").get_function("local_arrays")
    n = int(rng.integers(300, 1200))
    v = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    v[:3] = [0, 1, 0xFFFFFFFF]
    base = rng.integers(2, 40, size=n).astype(np.uint32)
    a = rng.integers(-2**31, 2**31, size=n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-70_000, 70_000, size=n).astype(np.int32)
    b[b == 0] = -3
    a[3], b[3] = -2**31, 1                              # (INT_MIN / -1 is undefined: not asked)
    outs = [poisoned_device(n, np.uint32), poisoned_device(n, np.uint32),
            poisoned_device(n, np.int32), poisoned_device(n, np.int32)]
    f.launch(-(-n // 64), 64, (upload(v), upload(base), upload(a), upload(b), *outs, n))
    ref = [_digit_mix(int(vi), int(bi)) for vi, bi in zip(v, base)]
    np.testing.assert_array_equal(download(outs[0], n, np.uint32), np.array([m for m, _ in ref], np.uint32))
    np.testing.assert_array_equal(download(outs[1], n, np.uint32), np.array([d for _, d in ref], np.uint32))
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64))    # C truncates toward zero
    np.testing.assert_array_equal(download(outs[2], n, np.int32), q.astype(np.int32))
    np.testing.assert_array_equal(download(outs[3], n, np.int32), (a64 - q * b64).astype(np.int32))


# ---- 8. half precision (cuda_fp16.h) -------------------------------------------------------------
HALF_MATH = r"""
#include <cuda_fp16.h>

extern "C" __global__ void half_math(const __half* a, const __half* b, const __half* c, const float* f,
                                     __half* out, float* widened, int* compare, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half x = a[i], y = b[i], z = c[i];
    __half* o = out + (size_t)i * 8;
    o[0] = __hadd(x, y);
    o[1] = __hsub(x, y);
    o[2] = __hmul(x, y);
    o[3] = __hfma(x, y, z);
    o[4] = __hneg(x);
    o[5] = __float2half_rn(f[i]);                      // float -> half, round to nearest even
    o[6] = __hdiv(x, y);
    o[7] = hsqrt(__habs(x));
    widened[i] = __half2float(x) * 4.0f;               // half -> float is exact
    compare[i] = (__hlt(x, y) ? 1 : 0) | (__hgt(x, z) ? 2 : 0) | (__heq(x, x) ? 4 : 0);
}

// The same on pairs: __half2 lanes.
extern "C" __global__ void half2_math(const __half2* a, const __half2* b, const __half2* c,
                                      __half2* out, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n2) return;
    __half2 x = a[i], y = b[i], z = c[i];
    out[4 * i + 0] = __hadd2(x, y);
    out[4 * i + 1] = __hmul2(x, y);
    out[4 * i + 2] = __hfma2(x, y, z);
    out[4 * i + 3] = __halves2half2(__high2half(x), __low2half(y));   // swap lanes across
}
"""


def _exact_f16(values64):
    return np.asarray(values64, np.float64).astype(np.float16)


def _assert_f16_close(got, ref64, ulps, what):
    """Within `ulps` float16 ulps of the exact value (ref64), measured at the result."""
    ref16 = _exact_f16(ref64)
    spacing = np.spacing(np.abs(ref16)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref64)
    bad = ~(err <= ulps * spacing)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} beyond {ulps} ulp, e.g. got "
                           f"{got[bad][:5]} expected {ref16[bad][:5]}")


def test_half_precision(driver, build, rng):
    mod = build.load(HALF_MATH, "half_math")
    n = 2 * int(rng.integers(400, 1500)) + 1              # odd: the pair kernel takes n // 2
    # Magnitudes in [0.5, 8): sums, products and fmas stay normal and finite in float16.
    def draw():
        return (rng.uniform(0.5, 8.0, n) * rng.choice([-1.0, 1.0], n)).astype(np.float16)
    a, b, c = draw(), draw(), draw()
    a[:2] = b[:2]                                          # some equal pairs for __hlt
    fl = (rng.standard_normal(n) * 1000).astype(np.float32)
    fl[:4] = [70000.0, -65520.0, 65519.0, 1e-8]            # overflow to inf, ties, tiny
    out, wid, cmp_ = poisoned_device((n, 8), np.float16), poisoned_device(n, np.float32), poisoned_device(n, np.int32)
    mod.get_function("half_math").launch(-(-n // 128), 128, (upload(a), upload(b), upload(c), upload(fl),
                                                              out, wid, cmp_, n))
    got = download(out, (n, 8), np.float16)
    a64, b64, c64 = a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)
    # add, sub, mul of float16 values are exact in float64, so one rounding gives the IEEE result.
    np.testing.assert_array_equal(got[:, 0], _exact_f16(a64 + b64))
    np.testing.assert_array_equal(got[:, 1], _exact_f16(a64 - b64))
    np.testing.assert_array_equal(got[:, 2], _exact_f16(a64 * b64))
    # fma: a*b+c is exact in float64 for these magnitudes (a 22-bit product; all bits within 2^-22..2^7).
    np.testing.assert_array_equal(got[:, 3], _exact_f16(a64 * b64 + c64))
    np.testing.assert_array_equal(got[:, 4], -a)
    with np.errstate(over="ignore"):                      # 70000 and -65520 overflow to +-inf
        np.testing.assert_array_equal(got[:, 5], fl.astype(np.float16))   # numpy: nearest even
    # __hdiv and hsqrt go through float32 approximations: within one float16 ulp.
    _assert_f16_close(got[:, 6], a64 / b64, 1, "__hdiv")
    _assert_f16_close(got[:, 7], np.sqrt(np.abs(a64)), 1, "hsqrt")
    np.testing.assert_array_equal(download(wid, n, np.float32), a.astype(np.float32) * 4)
    np.testing.assert_array_equal(download(cmp_, n, np.int32),
                                  ((a < b) * 1 | (a > c) * 2 | 4).astype(np.int32))

    n2 = n // 2
    out2 = poisoned_device((n2, 4, 2), np.float16)
    mod.get_function("half2_math").launch(-(-n2 // 64), 64, (upload(a), upload(b), upload(c), out2, n2))
    got2 = download(out2, (n2, 4, 2), np.float16)
    pa, pb, pc = (v[: 2 * n2].reshape(n2, 2).astype(np.float64) for v in (a, b, c))
    np.testing.assert_array_equal(got2[:, 0], _exact_f16(pa + pb))
    np.testing.assert_array_equal(got2[:, 1], _exact_f16(pa * pb))
    np.testing.assert_array_equal(got2[:, 2], _exact_f16(pa * pb + pc))
    np.testing.assert_array_equal(got2[:, 3], np.stack([a[: 2 * n2].reshape(n2, 2)[:, 1],
                                                       b[: 2 * n2].reshape(n2, 2)[:, 0]], axis=1))


# ---- 9. dynamic shared memory --------------------------------------------------------------------
DYN_SHARED = r"""
extern "C" __global__ void dyn_shared(const float* in, float* out, int* positives, int n, int chunk) {
    extern __shared__ float buf[];                     // chunk floats, then one int counter
    int* count = (int*)(buf + chunk);
    long long start = (long long)blockIdx.x * chunk;
    int len = (int)min((long long)chunk, (long long)n - start);
    if (threadIdx.x == 0) *count = 0;
    for (int j = threadIdx.x; j < len; j += blockDim.x) buf[j] = in[start + j];
    __syncthreads();
    for (int j = threadIdx.x; j < len; j += blockDim.x) {
        float v = buf[len - 1 - j];                    // the chunk reversed
        out[start + j] = 2.0f * v + buf[j];
        if (v > 0.0f) atomicAdd(count, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) positives[blockIdx.x] = *count;
}
"""


def test_dynamic_shared_memory(driver, build, rng):
    f = build.load(DYN_SHARED, "dyn_shared").get_function("dyn_shared")
    chunk = int(rng.integers(700, 5000))
    n = int(chunk * rng.uniform(2.2, 4.8))                 # the last chunk is short
    grid = -(-n // chunk)
    x = rng.standard_normal(n).astype(np.float32)
    out, pos = poisoned_device(n, np.float32), poisoned_device(grid, np.int32)
    f.launch(grid, int(rng.choice([64, 128, 256])), (upload(x), out, pos, n, chunk), shared_mem=4 * chunk + 4)
    expect, positives = np.empty(n, np.float32), np.empty(grid, np.int32)
    for g in range(grid):
        seg = x[g * chunk:(g + 1) * chunk]
        expect[g * chunk:(g + 1) * chunk] = 2 * seg[::-1] + seg           # 2*v is exact: one rounding
        positives[g] = (seg > 0).sum()
    np.testing.assert_array_equal(download(out, n, np.float32), expect)
    np.testing.assert_array_equal(download(pos, grid, np.int32), positives)


# ---- 10. warp softmax with expf ------------------------------------------------------------------
WARP_SOFTMAX = r"""
extern "C" __global__ void warp_softmax(const float* x, float* y, int rows, int cols) {
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;    // one warp per row
    int lane = threadIdx.x & 31;
    if (row >= rows) return;                                   // whole warps leave together
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float m = __int_as_float(0xff800000);               // -inf
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) / s;
}
"""


def test_warp_softmax(driver, build, rng):
    f = build.load(WARP_SOFTMAX, "warp_softmax").get_function("warp_softmax")
    rows = int(rng.integers(20, 90))
    cols = int(rng.choice([int(rng.integers(1, 32)), int(rng.integers(33, 400))]))
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    y = poisoned_device((rows, cols), np.float32)
    f.launch(-(-rows // 4), 128, (upload(x), y, rows, cols))
    got = download(y, (rows, cols), np.float32).astype(np.float64)
    # Reference: the kernel's own float32 steps where they are exact or IEEE (max, x - m),
    # the rest in float64.
    d = (x - x.max(axis=1, keepdims=True)).astype(np.float64)     # float32 subtraction, as the kernel
    e = np.exp(d)
    ref = e / e.sum(axis=1, keepdims=True)
    # Error budget in float32 ulps, relative to each output:
    #   accurate expf (CUDA: <= 2 ulp) twice (numerator and each term of the sum), the sum's
    #   rounding (at most cols/32 + 5 additions per lane and in the tree), the division (div.rn:
    #   0.5 ulp) and a margin: 8 + cols/32 ulp.
    # --use_fast_math turns expf into ex2.approx.ftz(x * log2 e): the product's rounding
    #   is an absolute error of |d| log2(e) 2^-24 in the exponent, i.e. about 1.2 |d| ulp
    #   relative in the result, on top of ex2.approx's own 2 ulp; and x / s becomes
    #   div.approx (2 ulp). So add 2 * (2 + 1.2 |d|) + 2 ulp. Results that flush to zero
    #   (.ftz) are allowed an absolute error of a couple of FLT_MIN.
    ulps = 8 + cols / 32
    if build.fast_math:
        ulps = ulps + 2 * (2 + 1.2 * np.abs(d)) + 2 + 1.2 * np.abs(d).max(axis=1, keepdims=True)
    tol = ulps * F32_EPS * np.abs(ref) + 2 * F32_TINY
    err = np.abs(got - ref)
    bad = ~(err <= tol)
    assert not bad.any(), (f"{bad.sum()} of {bad.size} outside tolerance; worst "
                           f"{np.nanmax(err / (F32_EPS * np.abs(ref) + F32_TINY)):.1f} ulp")


# ---- 11. register-blocked sgemm with shared tiles -------------------------------------------------
SGEMM = r"""
#define BM 32
#define BN 32
#define BK 8
#define TM 2
#define TN 4
// block (BN / TN, BM / TM) = (8, 16): each thread owns a TM x TN tile of C in registers
extern "C" __global__ void sgemm_reg(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[BK][BM + 1];                   // A tile, stored transposed (k-major)
    __shared__ float Bs[BK][BN];
    int tx = threadIdx.x, ty = threadIdx.y;
    int tid = ty * blockDim.x + tx, nthreads = blockDim.x * blockDim.y;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    for (int r = 0; r < TM; ++r)
        for (int c = 0; c < TN; ++c) acc[r][c] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += nthreads) {
            int m = e / BK, k = e % BK, gr = row0 + m, gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
        }
        for (int e = tid; e < BK * BN; e += nthreads) {
            int k = e / BN, c = e % BN, gk = k0 + k, gc = col0 + c;
            Bs[k][c] = (gk < K && gc < N) ? B[(size_t)gk * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            for (int r = 0; r < TM; ++r) a[r] = As[k][ty * TM + r];
            for (int c = 0; c < TN; ++c) b[c] = Bs[k][tx * TN + c];
            for (int r = 0; r < TM; ++r)
                for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
        }
        __syncthreads();
    }
    for (int r = 0; r < TM; ++r)
        for (int c = 0; c < TN; ++c) {
            int gr = row0 + ty * TM + r, gc = col0 + tx * TN + c;
            if (gr < M && gc < N) C[(size_t)gr * N + gc] = acc[r][c];
        }
}
"""


def test_sgemm_register_blocked(driver, build, rng):
    f = build.load(SGEMM, "sgemm_reg").get_function("sgemm_reg")
    M, N, K = (int(v) for v in rng.integers(33, 100, size=3))     # not multiples of 32 or 8
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    C = poisoned_device((M, N), np.float32)
    f.launch((-(-N // 32), -(-M // 32)), (8, 16), (upload(A), upload(B), C, M, N, K))
    got = download(C, (M, N), np.float32).astype(np.float64)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    # K sequential roundings (fma or mul+add: at most 2 per step): |err| <= 2 K u sum|a||b|.
    bound = 2 * K * (F32_EPS / 2) * (np.abs(A).astype(np.float64) @ np.abs(B).astype(np.float64))
    err = np.abs(got - ref)
    assert (err <= bound).all(), f"worst error {np.nanmax(err / bound):.2f} x the bound (NaN: unwritten)"


# ---- 12. bit manipulation ----------------------------------------------------------------------------
BIT_OPS = r"""
#define NF 20
extern "C" __global__ void bit_ops(const unsigned int* a, const unsigned int* b, const unsigned int* c,
                                   unsigned long long* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int x = a[i], y = b[i], z = c[i];
    unsigned long long xy = ((unsigned long long)y << 32) | x;
    unsigned int pos = z & 31u, len = (z >> 5) & 31u;
    if (pos + len > 32u) len = 32u - pos;
    unsigned long long* o = out + (size_t)i * NF;
    o[0] = __brev(x);
    o[1] = (unsigned int)__clz((int)x);
    o[2] = (unsigned int)__popc(x);
    o[3] = (unsigned int)__ffs((int)x);
    o[4] = __byte_perm(x, y, z & 0x7777u);
    o[5] = __funnelshift_l(x, y, z);                   // high word of (y:x) << (z & 31)
    o[6] = __funnelshift_r(x, y, z);                   // low word of (y:x) >> (z & 31)
    o[7] = __funnelshift_lc(x, y, (z >> 8) & 63u);     // shift clamped to 32
    o[8] = __funnelshift_rc(x, y, (z >> 8) & 63u);
    o[9] = len ? (x >> pos) & ((1u << len) - 1u) : 0u;                            // bfe.u32
    o[10] = (unsigned int)(len ? ((int)(x << (32u - pos - len)) >> (32u - len)) : 0);  // bfe.s32
    unsigned int mask = len ? (((1u << len) - 1u) << pos) : 0u;
    o[11] = (x & ~mask) | ((y << pos) & mask);                                    // bfi
    o[12] = __brevll(xy);
    o[13] = (unsigned int)__clzll((long long)xy);
    o[14] = (unsigned int)__popcll(xy);
    o[15] = (unsigned int)__ffsll((long long)xy);
    o[16] = __umulhi(x, y);
    o[17] = (unsigned int)__mulhi((int)x, (int)y);
    o[18] = __umul64hi(xy, (unsigned long long)z * 0x9E3779B97F4A7C15ull);
    unsigned int rot = z & 31u;
    o[19] = (x << rot) | (x >> ((32u - rot) & 31u));   // rotate left
}
"""
M32, M64 = (1 << 32) - 1, (1 << 64) - 1


def _bit_ref(x: int, y: int, z: int) -> list[int]:
    def s32(v):
        return v - (1 << 32) if v & (1 << 31) else v
    xy = (y << 32) | x
    pos, length = z & 31, (z >> 5) & 31
    length = min(length, 32 - pos)
    sel = z & 0x7777
    src = [(xy >> (8 * k)) & 0xFF for k in range(8)]
    perm = sum(src[(sel >> (4 * k)) & 7] << (8 * k) for k in range(4))
    sl, sr = z & 31, z & 31
    slc = min((z >> 8) & 63, 32)
    field = (x >> pos) & ((1 << length) - 1)
    sfield = (field - (1 << length) if length and field >> (length - 1) else field) & M32
    mask = ((1 << length) - 1) << pos
    return [
        int(f"{x:032b}"[::-1], 2),
        32 - x.bit_length(),
        bin(x).count("1"),
        (x & -x).bit_length(),
        perm,
        ((xy << sl) >> 32) & M32,
        (xy >> sr) & M32,
        ((xy << slc) >> 32) & M32,
        (xy >> slc) & M32,
        field,
        sfield,
        (x & ~mask & M32) | ((y << pos) & mask),
        int(f"{xy:064b}"[::-1], 2),
        64 - xy.bit_length(),
        bin(xy).count("1"),
        (xy & -xy).bit_length(),
        (x * y) >> 32,
        ((s32(x) * s32(y)) >> 32) & M32,
        (xy * ((z * 0x9E3779B97F4A7C15) & M64)) >> 64,
        ((x << sl) | (x >> (32 - sl))) & M32 if sl else x,
    ]


def test_bit_manipulation(driver, build, rng):
    f = build.load(BIT_OPS, "bit_ops").get_function("bit_ops")
    n = int(rng.integers(500, 1500))
    a, b, c = (rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    specials = np.array([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 1 << 13, 0x00010000], np.uint32)
    a[: len(specials)] = specials
    b[len(specials): 2 * len(specials)] = specials
    a[len(specials): 2 * len(specials)] = 0                # xy with an empty low word
    a[::17] = rng.integers(0, 2**32, size=a[::17].size, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, size=a[::17].size)
    out = poisoned_device((n, 20), np.uint64)
    f.launch(-(-n // 128), 128, (upload(a), upload(b), upload(c), out, n))
    got = download(out, (n, 20), np.uint64)
    ref = np.array([_bit_ref(int(x), int(y), int(z)) for x, y, z in zip(a, b, c)], np.uint64)
    names = ["brev", "clz", "popc", "ffs", "byte_perm", "funnelshift_l", "funnelshift_r",
             "funnelshift_lc", "funnelshift_rc", "bfe.u32", "bfe.s32", "bfi", "brevll", "clzll",
             "popcll", "ffsll", "umulhi", "mulhi", "umul64hi", "rotate"]
    bad = [name for k, name in enumerate(names) if not np.array_equal(got[:, k], ref[:, k])]
    assert not bad, "wrong: " + ", ".join(
        f"{name} (e.g. inputs {a[i]:#x} {b[i]:#x} {c[i]:#x}: got {got[i, k]:#x}, expected {ref[i, k]:#x})"
        for name in bad for k in [names.index(name)] for i in [int(np.argmax(got[:, k] != ref[:, k]))])


# ---- beyond the list: more warp intrinsics (match.any, activemask, shfl width) -----------------------
WARP_EXTRAS = r"""
extern "C" __global__ void warp_extras(const int* x, int n, unsigned int* match, unsigned int* active,
                                       int* xor_bfly) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = i < n ? x[i] : 0;
    unsigned int same = __match_any_sync(0xffffffffu, v & 3);     // lanes holding the same v & 3
    __syncwarp();
    unsigned int act = 0u;
    // The lanes that took the branch. (Independent thread scheduling would allow a subset;
    // a simple branch like this one stays converged on every GPU, as the emulator must.)
    if (lane < 20) act = __activemask();
    int w = v;
    for (int off = 1; off < 8; off <<= 1) w += __shfl_xor_sync(0xffffffffu, w, off, 8);  // 8-lane sums
    if (i < n) { match[i] = same; active[i] = act; xor_bfly[i] = w; }
}
"""


def test_warp_match_activemask(driver, build, rng):
    f = build.load(WARP_EXTRAS, "warp_extras").get_function("warp_extras")
    n = int(rng.integers(500, 3000))
    block = 128
    grid = -(-n // block)
    lanes = grid * block
    x = rng.integers(-100_000, 100_000, size=n).astype(np.int32)
    outs = [poisoned_device(n, t) for t in (np.uint32, np.uint32, np.int32)]
    f.launch(grid, block, (upload(x), n, *outs))
    v = np.zeros(lanes, np.int64)
    v[:n] = x
    key = v.reshape(-1, 32) & 3
    weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
    match = np.array([[(weights * (row == row[l])).sum() for l in range(32)] for row in key],
                     np.uint64).reshape(-1)[:n]
    lane = np.arange(lanes) % 32
    active = np.where(lane < 20, (1 << 20) - 1, 0)[:n]
    eight = np.repeat(v.reshape(-1, 8).sum(axis=1), 8)[:n]
    np.testing.assert_array_equal(download(outs[0], n, np.uint32), match.astype(np.uint32))
    np.testing.assert_array_equal(download(outs[1], n, np.uint32), active.astype(np.uint32))
    np.testing.assert_array_equal(download(outs[2], n, np.int32), eight.astype(np.int32))


# ---- beyond the list: sm_80 warp reductions (redux.sync) ---------------------------------------------
WARP_REDUX = r"""
extern "C" __global__ void warp_redux(const int* x, int n, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? x[i] : 0;
    int* o = out + (size_t)i * 6;
    int s = __reduce_add_sync(0xffffffffu, v);
    int mx = __reduce_max_sync(0xffffffffu, v);
    int mn = __reduce_min_sync(0xffffffffu, v);
    unsigned int a = __reduce_and_sync(0xffffffffu, (unsigned int)v);
    unsigned int b = __reduce_or_sync(0xffffffffu, (unsigned int)v);
    unsigned int c = __reduce_xor_sync(0xffffffffu, (unsigned int)v);
    if (i < n) { o[0] = s; o[1] = mx; o[2] = mn; o[3] = (int)a; o[4] = (int)b; o[5] = (int)c; }
}
"""


def test_warp_redux(driver, build, rng):
    f = build.load(WARP_REDUX, "warp_redux").get_function("warp_redux")
    n = int(rng.integers(500, 3000))
    block = 96
    grid = -(-n // block)
    x = rng.integers(-2**31, 2**31, size=n, dtype=np.int64).astype(np.int32)
    x[rng.random(n) < 0.3] |= 0x00F0000F                 # some common bits for and
    out = poisoned_device((n, 6), np.int32)
    f.launch(grid, block, (upload(x), n, out))
    v = np.zeros(grid * block, np.int32)
    v[:n] = x
    w = v.reshape(-1, 32)
    expect = np.stack([w.astype(np.int64).sum(axis=1).astype(np.uint64).astype(np.uint32).view(np.int32),
                       w.max(axis=1), w.min(axis=1), np.bitwise_and.reduce(w, axis=1),
                       np.bitwise_or.reduce(w, axis=1), np.bitwise_xor.reduce(w, axis=1)], axis=1)
    np.testing.assert_array_equal(download(out, (n, 6), np.int32), np.repeat(expect, 32, axis=0)[:n])


# ---- beyond the list: every atomic, on global and shared memory -------------------------------------
ATOMIC_ZOO = r"""
// g: 12 global slots, zeroed by the host except where noted; the same ops on shared slots,
// copied out to s_out at the end.
extern "C" __global__ void atomic_zoo(const int* x, int n, unsigned int limit, int* g, unsigned long long* g64,
                                      double* gd, int* exch_old, int* s_out) {
    __shared__ int s[8];
    if (threadIdx.x < 8) s[threadIdx.x] = threadIdx.x == 2 ? 0x7fffffff : (threadIdx.x == 5 ? -1 : 0);
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int v = x[i];
        atomicAdd(&g[0], v);
        atomicMax(&g[1], v);
        atomicMin(&g[2], v);
        atomicAnd(&g[3], v | 0x0f0f0000);
        atomicOr(&g[4], v & 0x00ff00ff);
        atomicXor(&g[5], v);
        atomicInc((unsigned int*)&g[6], limit);
        atomicDec((unsigned int*)&g[7], limit);
        atomicMax((unsigned int*)&g[8], (unsigned int)v);
        exch_old[i] = atomicExch(&g[9], v);
        atomicAdd(&g64[0], (unsigned long long)(unsigned int)v * 4096ull);
        atomicMax((long long*)&g64[1], (long long)v);
        atomicAdd(&gd[0], (double)v);                  // integers: exact in any order
        atomicAdd(&s[0], v);
        atomicMax(&s[1], v);
        atomicMin(&s[2], v);
        atomicXor(&s[3], v);
        atomicInc((unsigned int*)&s[4], limit);
        atomicAnd(&s[5], v | 0x0f0f0000);
        atomicOr(&s[6], v & 0x00ff00ff);
        atomicCAS(&s[7], i & 1, (i & 1) ^ 1);          // flips between 0 and 1 when it matches
    }
    __syncthreads();
    if (threadIdx.x < 8) atomicAdd(&s_out[blockIdx.x * 8 + threadIdx.x], s[threadIdx.x]);
}
"""


def test_atomic_zoo_global_and_shared(driver, build, rng):
    f = build.load(ATOMIC_ZOO, "atomic_zoo").get_function("atomic_zoo")
    grid, block = int(rng.integers(2, 5)), 128
    n = int(rng.integers(2000, 6000))
    limit = int(rng.integers(5, 1000))
    x = rng.integers(-2**30, 2**30, size=n).astype(np.int32)
    g0 = np.zeros(12, np.int32)
    g0[2], g0[3], g0[7], g0[9] = 0x7FFFFFFF, -1, limit // 2, int(rng.integers(0, 100))
    g = upload(g0)
    g64 = upload(np.array([0, np.iinfo(np.int64).min], np.int64).view(np.uint64))
    gd = upload(np.zeros(1))
    exch_old = poisoned_device(n, np.int32)
    s_out = upload(np.zeros(grid * 8, np.int32))
    f.launch(grid, block, (upload(x), n, limit, g, g64, gd, exch_old, s_out))

    x64 = x.astype(np.int64)
    def wrap32(v):
        return np.array([v & 0xFFFFFFFF], np.uint32).view(np.int32)[0]
    inc = 0
    for _ in range(n):
        inc = 0 if inc >= limit else inc + 1
    dec = limit // 2
    for _ in range(n):
        dec = limit if dec == 0 or dec > limit else dec - 1
    expect = np.array([wrap32(int(x64.sum())), max(x.max(), 0), min(x.min(), 0x7FFFFFFF),
                       np.bitwise_and.reduce(x | 0x0F0F0000), np.bitwise_or.reduce(x & 0x00FF00FF),
                       np.bitwise_xor.reduce(x), inc, dec, x.view(np.uint32).max().view(np.int32)], np.int32)
    got = download(g, 12, np.int32)
    names = ["add", "max", "min", "and", "or", "xor", "inc", "dec", "max.u32"]
    bad = [f"{nm}: got {got[k]} expected {expect[k]}" for k, nm in enumerate(names) if got[k] != expect[k]]
    assert not bad, "global atomics wrong: " + "; ".join(bad)
    # atomicExch: the values returned, plus the one left, are the initial value and every x.
    olds = download(exch_old, n, np.int32)
    np.testing.assert_array_equal(np.sort(np.append(olds, got[9])), np.sort(np.append(x, g0[9])))
    got64 = download(g64, 2, np.uint64)
    assert int(got64[0]) == int((x.view(np.uint32).astype(np.uint64) * 4096).sum()) % 2**64
    assert int(got64[1].view(np.int64)) == int(x.max())
    assert download(gd, 1, np.float64)[0] == float(x64.sum())
    # Shared: each block saw its own grid-stride share of x.
    shared = download(s_out, (grid, 8), np.int32)
    threads = grid * block
    for bidx in range(grid):
        idx = np.concatenate([np.arange(bidx * block + t, n, threads) for t in range(block)])
        xs = x[idx].astype(np.int64)
        sinc = 0
        for _ in range(idx.size):
            sinc = 0 if sinc >= limit else sinc + 1
        exp = [wrap32(int(xs.sum())), max(int(xs.max()), 0), min(int(xs.min()), 0x7FFFFFFF),
               int(np.bitwise_xor.reduce(x[idx])), sinc, int(np.bitwise_and.reduce(x[idx] | 0x0F0F0000)),
               int(np.bitwise_or.reduce(x[idx] & 0x00FF00FF))]
        assert shared[bidx, :7].tolist() == [int(e) for e in exp], f"block {bidx}"
        assert shared[bidx, 7] in (0, 1)


# ---- beyond the list: bfloat16 (cuda_bf16.h) --------------------------------------------------------
BF16_MATH = r"""
#include <cuda_bf16.h>

extern "C" __global__ void bf16_math(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                                     const float* f, __nv_bfloat16* out, float* widened, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i], y = b[i], z = c[i];
    __nv_bfloat16* o = out + (size_t)i * 5;
    o[0] = __hadd(x, y);
    o[1] = __hmul(x, y);
    o[2] = __hfma(x, y, z);
    o[3] = __float2bfloat16_rn(f[i]);                  // float -> bfloat16, round to nearest even
    o[4] = __hmax(x, y);
    widened[i] = __bfloat162float(x);                  // exact
}
"""


def bf16_round(v64) -> np.ndarray:
    """float64 -> nearest bfloat16 (ties to even), as uint16 bits; normal range only."""
    v = np.asarray(v64, np.float64)
    m, e = np.frexp(v)                                 # v = m 2^e, 0.5 <= |m| < 1
    r = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)       # 8 significant bits, rint: ties to even
    return (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_to_f32(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def test_bfloat16(driver, build, rng):
    f = build.load(BF16_MATH, "bf16_math").get_function("bf16_math")
    n = int(rng.integers(500, 2000))
    def draw():                                        # magnitudes in [0.5, 8): all results normal
        return bf16_round(rng.uniform(0.5, 8.0, n) * rng.choice([-1.0, 1.0], n))
    a, b, c = draw(), draw(), draw()
    fl = (rng.standard_normal(n) * 100).astype(np.float32)
    out, wid = poisoned_device((n, 5), np.uint16), poisoned_device(n, np.float32)
    f.launch(-(-n // 128), 128, (upload(a), upload(b), upload(c), upload(fl), out, wid, n))
    got = download(out, (n, 5), np.uint16)
    a64, b64, c64 = (bf16_to_f32(v).astype(np.float64) for v in (a, b, c))
    # Sums, products and fmas of these bfloat16 values are exact in float64: one rounding.
    np.testing.assert_array_equal(got[:, 0], bf16_round(a64 + b64))
    np.testing.assert_array_equal(got[:, 1], bf16_round(a64 * b64))
    np.testing.assert_array_equal(got[:, 2], bf16_round(a64 * b64 + c64))
    np.testing.assert_array_equal(got[:, 3], bf16_round(fl.astype(np.float64)))
    np.testing.assert_array_equal(got[:, 4], np.where(a64 >= b64, a, b))
    np.testing.assert_array_equal(download(wid, n, np.float32), bf16_to_f32(a))


# ---- beyond the list: barrier reductions (bar.red), __ldg vectors, 64-bit shuffles ---------------
BAR_RED = r"""
extern "C" __global__ void bar_red(const int* x, int n, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? x[i] : 0;
    int count = __syncthreads_count(v > 0);            // bar.red.popc
    int all = __syncthreads_and(v > -900);             // bar.red.and
    int any = __syncthreads_or(v > 990);               // bar.red.or
    if (threadIdx.x == 0) { out[3 * blockIdx.x] = count; out[3 * blockIdx.x + 1] = all; out[3 * blockIdx.x + 2] = any; }
}
"""


def test_syncthreads_count_and_or(driver, build, rng):
    f = build.load(BAR_RED, "bar_red").get_function("bar_red")
    block = int(rng.choice([64, 96, 200]))
    n = int(rng.integers(2000, 6000))
    grid = -(-n // block)
    x = rng.integers(-1000, 1000, size=n).astype(np.int32)
    x[: block * (grid // 2)] = np.abs(x[: block * (grid // 2)]) // 2    # first blocks: all > -900, none > 990
    out = poisoned_device((grid, 3), np.int32)
    f.launch(grid, block, (upload(x), n, out))
    v = np.zeros(grid * block, np.int64)
    v[:n] = x
    w = v.reshape(grid, block)
    expect = np.stack([(w > 0).sum(axis=1), (w > -900).all(axis=1), (w > 990).any(axis=1)], axis=1)
    np.testing.assert_array_equal(download(out, (grid, 3), np.int32), expect.astype(np.int32))


LDG_SHFL64 = r"""
extern "C" __global__ void ldg_shfl64(const float4* __restrict__ in, const double* __restrict__ d,
                                      float* out, double* dout, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    float4 v = i < n4 ? __ldg(&in[i]) : make_float4(0.f, 0.f, 0.f, 0.f);   // ld.global.nc.v4.f32
    double w = i < n4 ? __ldg(&d[i]) : 0.0;
    double from = __shfl_sync(0xffffffffu, w, (lane + 5) & 31);       // a double: two 32-bit shuffles
    long long bits = __shfl_xor_sync(0xffffffffu, (long long)i * 0x100000001ll, 1);
    __threadfence();                                                    // membar.gl
    if (i < n4) {
        out[i] = v.x + v.y + v.z + v.w;
        dout[2 * i] = from;
        dout[2 * i + 1] = (double)(bits >> 32);
    }
}
"""


def test_ldg_vectors_and_64bit_shuffles(driver, build, rng):
    f = build.load(LDG_SHFL64, "ldg_shfl64").get_function("ldg_shfl64")
    n4 = int(rng.integers(300, 2000))
    block = 64
    grid = -(-n4 // block)
    x = rng.integers(-1000, 1000, size=(n4, 4)).astype(np.float32)    # integers: the sum is exact
    d = rng.standard_normal(n4)
    out, dout = poisoned_device(n4, np.float32), poisoned_device((n4, 2), np.float64)
    f.launch(grid, block, (upload(x), upload(d), out, dout, n4))
    np.testing.assert_array_equal(download(out, n4, np.float32), x.sum(axis=1))
    lanes = grid * block
    dp = np.zeros(lanes)
    dp[:n4] = d
    idx = np.arange(lanes)
    src = (idx // 32) * 32 + ((idx % 32 + 5) & 31)
    got = download(dout, (n4, 2), np.float64)
    np.testing.assert_array_equal(got[:, 0], dp[src][:n4])
    np.testing.assert_array_equal(got[:, 1], (idx ^ 1)[:n4].astype(np.float64))


CP_ASYNC = r"""
#include <cuda_pipeline.h>

// Stage a tile of floats into shared memory with sm_80 asynchronous copies (cp.async), then
// write it back reversed.
extern "C" __global__ void cp_async_reverse(const float* in, float* out, int n) {
    __shared__ __align__(16) float tile[256];
    int base = blockIdx.x * 256;
    for (int k = threadIdx.x * 4; k < 256; k += blockDim.x * 4)
        if (base + k + 3 < n) __pipeline_memcpy_async(&tile[k], &in[base + k], 16);
        else for (int j = 0; j < 4; ++j) tile[k + j] = base + k + j < n ? in[base + k + j] : 0.0f;
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int k = threadIdx.x; k < 256; k += blockDim.x)
        if (base + k < n) out[base + k] = tile[255 - k];
}
"""


def test_cp_async_pipeline(driver, build, rng):
    f = build.load(CP_ASYNC, "cp_async").get_function("cp_async_reverse")
    n = int(rng.integers(1000, 4000))
    grid = -(-n // 256)
    x = rng.standard_normal(grid * 256).astype(np.float32)
    x[n:] = 0
    out = poisoned_device(n, np.float32)
    f.launch(grid, 64, (upload(x[:n]), out, n))
    expect = x.reshape(grid, 256)[:, ::-1].reshape(-1)[:n]
    np.testing.assert_array_equal(download(out, n, np.float32), expect)

"""Conformance: what a kernel sees beyond its arguments: printf, %clock64, module-scope
`__device__` variables with initializers and `__constant__` memory written from the host
through Module.get_global. Same builds and drivers as test_conformance_kernels.py."""
import ctypes

import numpy as np

from lowlevel import cuda
from conformance_support import download, poisoned_device, upload

# ---- printf -----------------------------------------------------------------------------------
PRINTF = r"""
extern "C" __global__ void say(int tag, float value, int every, unsigned int u, long long wide,
                               unsigned int bits, char letter) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t == 0) {
        for (int k = 0; k < 3; ++k) printf("tag %d: line %d of thread 0\n", tag, k);
        printf("tag %d: mixed %u %lld %x %.3f %s|%c\n", tag, u, wide, bits, value, "text", letter);
    }
    if (t % every == 5) printf("tag %d: thread %d of block %d\n", tag, t, (int)blockIdx.x);
}
"""


def test_printf(driver, build, rng, capfd):
    f = build.load(PRINTF, "printf").get_function("say")
    capfd.readouterr()                                   # drop anything printed before
    grid, block, every = 3, 64, int(rng.integers(20, 60))
    tags = [int(v) for v in rng.choice(np.arange(1, 1000), size=2, replace=False)]
    launches = []
    for tag in tags:                                     # two launches, queued back to back
        args = (tag, np.float32(rng.uniform(-100, 100)), every, int(rng.integers(2**31, 2**32)),
                np.int64(-rng.integers(2**40, 2**62)), int(rng.integers(0, 2**32)), int(rng.integers(65, 91)))
        f.launch(grid, block, args)
        launches.append(args)
    cuda.synchronize()                                   # the output is there by now
    # A real driver writes device printf through C's stdout, which buffers fully into a
    # file: flush it (a no-op for the emulated GPU, which writes through Python's).
    ctypes.CDLL(None).fflush(None)
    lines = capfd.readouterr().out.splitlines()
    for tag, value, _, u, wide, bits, letter in launches:
        mine = [ln for ln in lines if ln.startswith(f"tag {tag}: ")]
        own = [f"tag {tag}: line {k} of thread 0" for k in range(3)]
        own.append(f"tag {tag}: mixed {u} {wide} {bits:x} {float(value):.3f} text|{chr(letter)}")
        others = sorted(f"tag {tag}: thread {t} of block {t // block}"
                        for t in range(grid * block) if t % every == 5)
        assert [ln for ln in mine if ": line " in ln or ": mixed " in ln] == own    # one thread: in order
        assert sorted(ln for ln in mine if " of block " in ln) == others
        assert len(mine) == len(own) + len(others)
    # The first launch's lines all come before the second's.
    pos = [[k for k, ln in enumerate(lines) if ln.startswith(f"tag {tag}: ")] for tag in tags]
    assert max(pos[0]) < min(pos[1])


# ---- %clock64 ---------------------------------------------------------------------------------
CLOCK64 = r"""
extern "C" __global__ void clocks(long long* t, const unsigned int* x, unsigned int* y, int reps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int acc = x[i];
    for (int r = 0; r < reps; ++r) {
        t[(size_t)i * reps + r] = clock64();
        for (int k = 0; k <= (int)(acc & 3u); ++k) acc = acc * 3u + 1u;   // some work between reads
    }
    y[i] = acc;
}
"""


def test_clock64_monotonic_within_a_thread(driver, build, rng):
    f = build.load(CLOCK64, "clock64").get_function("clocks")
    grid, block, reps = 3, 64, int(rng.integers(4, 9))
    n = grid * block
    x = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    t, y = poisoned_device((n, reps), np.int64), poisoned_device(n, np.uint32)
    f.launch(grid, block, (t, upload(x), y, reps))
    clocks = download(t, (n, reps), np.int64)
    assert (np.diff(clocks, axis=1) >= 0).all(), "clock64 went backwards within a thread"
    assert (clocks[:, -1] > clocks[:, 0]).all(), "clock64 did not advance across a thread's work"
    expect = []
    for v in x.tolist():
        for _ in range(reps):
            k = 0
            while k <= (v & 3):                          # the bound is re-read as acc changes
                v = (v * 3 + 1) & 0xFFFFFFFF
                k += 1
        expect.append(v)
    np.testing.assert_array_equal(download(y, n, np.uint32), np.array(expect, np.uint32))


# ---- __device__ globals with initializers, __constant__ memory -------------------------------------
TABLE = [3, -1, 4, 1, -5, 9, 2, -6]
SCALE = 2.5


def globals_source() -> str:
    return r"""
__device__ int table[8] = {%s};
__device__ float scale = %ff;
__device__ unsigned int hits;                          // zero-initialised
__constant__ float coeffs[8];

extern "C" __global__ void use_globals(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * coeffs[i %% 8] + table[(i * 5) %% 8] * scale;
        atomicAdd(&hits, 1u);
    }
}
""" % (", ".join(map(str, TABLE)), SCALE)


def test_device_and_constant_globals(driver, build, rng):
    mod = build.load(globals_source(), "globals")
    f = mod.get_function("use_globals")
    table_ptr, table_size = mod.get_global("table")
    scale_ptr, scale_size = mod.get_global("scale")
    hits_ptr, hits_size = mod.get_global("hits")
    coeffs_ptr, coeffs_size = mod.get_global("coeffs")
    assert (table_size, scale_size, hits_size, coeffs_size) == (32, 4, 4, 32)
    np.testing.assert_array_equal(download(table_ptr, 8, np.int32), np.array(TABLE, np.int32))
    np.testing.assert_array_equal(download(scale_ptr, 1, np.float32), [np.float32(SCALE)])
    np.testing.assert_array_equal(download(hits_ptr, 1, np.uint32), [0])

    # Powers of two times small integers keep every product exact: any contraction gives the same.
    coeffs = (rng.choice([-1.0, 1.0], 8) * 2.0 ** rng.integers(-4, 5, 8)).astype(np.float32)
    cuda.memcpy_htod(coeffs_ptr, coeffs)
    n = int(rng.integers(300, 3000))
    x = rng.standard_normal(n).astype(np.float32)
    dx, y = upload(x), poisoned_device(n, np.float32)
    f.launch(-(-n // 128), 128, (dx, y, n))
    i = np.arange(n)
    table = np.array(TABLE, np.float32)
    expect = x * coeffs[i % 8] + table[(i * 5) % 8] * np.float32(SCALE)
    np.testing.assert_array_equal(download(y, n, np.float32), expect)
    np.testing.assert_array_equal(download(hits_ptr, 1, np.uint32), [n])

    # Writes from the host reach the next launch: a new scale, new coefficients.
    new_scale = np.float32(rng.choice([0.25, -4.0, 8.0]))
    coeffs2 = coeffs[::-1].copy()
    cuda.memcpy_htod(scale_ptr, np.array([new_scale]))
    cuda.memcpy_htod(coeffs_ptr, coeffs2)
    f.launch(-(-n // 128), 128, (dx, y, n))
    expect2 = x * coeffs2[i % 8] + table[(i * 5) % 8] * new_scale
    np.testing.assert_array_equal(download(y, n, np.float32), expect2)
    np.testing.assert_array_equal(download(hits_ptr, 1, np.uint32), [2 * n])


# ---- special registers -------------------------------------------------------------------------
SPECIAL_REGS = r"""
__device__ __forceinline__ unsigned int sreg_laneid() { unsigned int r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned int sreg_lanemask_lt() { unsigned int r; asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned int sreg_lanemask_ge() { unsigned int r; asm volatile("mov.u32 %0, %%lanemask_ge;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned int sreg_smid() { unsigned int r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned int sreg_nsmid() { unsigned int r; asm volatile("mov.u32 %0, %%nsmid;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned int sreg_dynsmem() { unsigned int r; asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r)); return r; }
__device__ __forceinline__ unsigned long long sreg_globaltimer() { unsigned long long r; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(r)); return r; }

extern "C" __global__ void special_regs(unsigned int* out, unsigned long long* timer) {
    extern __shared__ float unused[];
    unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int g = b * blockDim.x * blockDim.y * blockDim.z + t;
    unsigned int* o = out + (size_t)g * 8;
    o[0] = t;
    o[1] = b;
    o[2] = sreg_laneid();
    o[3] = sreg_lanemask_lt();
    o[4] = sreg_lanemask_ge();
    o[5] = sreg_smid() < sreg_nsmid() ? 1u : 0u;
    o[6] = sreg_dynsmem();
    o[7] = blockDim.x * blockDim.y * blockDim.z;
    unsigned long long t0 = sreg_globaltimer();
    unsigned int spin = t;
    for (int k = 0; k < 64; ++k) spin = spin * 1664525u + 1013904223u;
    unsigned long long t1 = sreg_globaltimer();
    timer[2 * g] = t0;
    timer[2 * g + 1] = t1 + (spin & 0u);               // keep the spin loop
}
"""


def test_special_registers(driver, build, rng):
    f = build.load(SPECIAL_REGS, "special_regs").get_function("special_regs")
    block = (int(rng.integers(5, 13)), int(rng.integers(2, 5)), 2)      # warps span rows of x
    grid = (2, int(rng.integers(1, 4)), 1)
    per_block = block[0] * block[1] * block[2]
    total = per_block * grid[0] * grid[1] * grid[2]
    dyn = 4 * int(rng.integers(1, 200))
    out, timer = poisoned_device((total, 8), np.uint32), poisoned_device((total, 2), np.uint64)
    f.launch(grid, block, (out, timer), shared_mem=dyn)
    got = download(out, (total, 8), np.uint32)
    t = np.tile(np.arange(per_block), total // per_block)
    b = np.repeat(np.arange(total // per_block), per_block)
    lane = t % 32                                       # lanes follow the linear thread index
    np.testing.assert_array_equal(got[:, 0], t)
    np.testing.assert_array_equal(got[:, 1], b)
    np.testing.assert_array_equal(got[:, 2], lane)
    np.testing.assert_array_equal(got[:, 3], (1 << lane) - 1)
    np.testing.assert_array_equal(got[:, 4], (0xFFFFFFFF << lane) & 0xFFFFFFFF)
    np.testing.assert_array_equal(got[:, 5], 1)
    np.testing.assert_array_equal(got[:, 6], dyn)
    np.testing.assert_array_equal(got[:, 7], per_block)
    times = download(timer, (total, 2), np.uint64).astype(np.int64)
    assert (times[:, 1] >= times[:, 0]).all(), "%globaltimer went backwards within a thread"
    assert (times > 0).all()


WARP_SIZE = r"""
extern "C" __global__ void warp_size(int* out) {
    out[threadIdx.x] = warpSize * 1000 + (int)(threadIdx.x % warpSize);    // PTX's WARP_SZ constant
}
"""


def test_warp_size_constant(driver, build, rng):
    f = build.load(WARP_SIZE, "warp_size").get_function("warp_size")
    block = int(rng.integers(33, 200))
    out = poisoned_device(block, np.int32)
    f.launch(1, block, (out,))
    np.testing.assert_array_equal(download(out, block, np.int32), 32000 + np.arange(block) % 32)

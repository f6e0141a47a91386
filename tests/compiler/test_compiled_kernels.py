"""CUDA C kernels written for these tests, compiled by NVRTC and by nvcc -O3 for sm_80,
loaded with Module.from_ptx and run through mem_alloc / memcpy / launch on each driver."""
import numpy as np
import pytest
from helpers.cuda_c import COMPILERS, load_compiled
from helpers.memory import device_poisoned, download, upload

SOURCE = r"""
extern "C" __global__ void saxpy_grid_stride(float a, const float* x, float* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

// Steps for each n to reach 1: a while loop whose trip count differs per thread.
extern "C" __global__ void collatz_steps(unsigned long long first, unsigned int* steps, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    unsigned long long v = first + (unsigned long long)i;
    unsigned int s = 0;
    while (v != 1ull) {
        v = (v & 1ull) ? 3ull * v + 1ull : v >> 1;
        ++s;
    }
    steps[i] = s;
}

extern "C" __global__ void index_3d(float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz)
        out[((long long)z * ny + y) * nx + x] = x + 1000.0f * y + 1000000.0f * z;
}

extern "C" __global__ void scale_float4(const float4* in, float4* out, float s, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = in[i];
        out[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
    }
}

extern "C" __global__ void divmod(const int* a, const int* b, int* q, int* r, long long* wide, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
        wide[i] = (long long)a[i] * (long long)b[i];
    }
}

extern "C" __global__ void branchy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v > 0.5f) y[i] = v * v;
    else if (v < -0.5f) y[i] = -v;
    else { float acc = 0.0f; for (int k = 0; k < (i % 7); ++k) acc += v; y[i] = acc; }
}
"""


@pytest.fixture(scope="module", params=sorted(COMPILERS))
def ptx(request):
    return COMPILERS[request.param](SOURCE)


@pytest.fixture
def module(driver, ptx):
    return load_compiled(ptx)


def test_saxpy_grid_stride(module, rng):
    n = int(rng.integers(10_000, 50_000))
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.standard_normal())
    dx, dy = upload(x), upload(y)
    # Fewer threads than elements: each thread loops.
    module.get_function("saxpy_grid_stride").launch(grid=7, block=128, args=(a, dx, dy, n))
    expect = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)
    np.testing.assert_allclose(download(dy, n, np.float32), expect, rtol=1e-6, atol=1e-6)


def collatz_reference(first, count):
    out = np.zeros(count, np.uint32)
    for i in range(count):
        v, s = first + i, 0
        while v != 1:
            v = 3 * v + 1 if v & 1 else v >> 1
            s += 1
        out[i] = s
    return out


def test_divergent_while_loop_with_64_bit_values(module, rng):
    count = int(rng.integers(300, 700))
    first = int(rng.integers(2**33, 2**34))          # values past 32 bits
    steps = device_poisoned(4 * count)
    module.get_function("collatz_steps").launch(grid=(count + 127) // 128, block=128,
                                                args=(np.uint64(first), steps, count))
    np.testing.assert_array_equal(download(steps, count, np.uint32), collatz_reference(first, count))


def test_3d_grid_and_block(module, rng):
    nx, ny, nz = (int(v) for v in rng.integers(5, 40, size=3))
    block = (8, 4, 2)
    grid = tuple(-(-n // b) for n, b in zip((nx, ny, nz), block))
    out = device_poisoned(4 * nx * ny * nz)
    module.get_function("index_3d").launch(grid, block, (out, nx, ny, nz))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    expect = (x + 1000.0 * y + 1000000.0 * z).astype(np.float32)
    np.testing.assert_array_equal(download(out, (nz, ny, nx), np.float32), expect)


def test_float4_loads_and_stores(module, rng):
    n4 = int(rng.integers(100, 3000))
    x = rng.standard_normal(4 * n4).astype(np.float32)
    s = np.float32(rng.standard_normal())
    dx, dy = upload(x), device_poisoned(x.nbytes)
    module.get_function("scale_float4").launch((n4 + 63) // 64, 64, (dx, dy, s, n4))
    np.testing.assert_array_equal(download(dy, 4 * n4, np.float32), x * s)


def test_integer_division_and_widening(module, rng):
    n = int(rng.integers(500, 2000))
    a = rng.integers(-2**31, 2**31, size=n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-50000, 50000, size=n).astype(np.int32)
    b[b == 0] = 7
    da, db = upload(a), upload(b)
    q, r, w = device_poisoned(4 * n), device_poisoned(4 * n), device_poisoned(8 * n)
    module.get_function("divmod").launch((n + 255) // 256, 256, (da, db, q, r, w, n))
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q_ref = (np.abs(a64) // np.abs(b64)) * np.sign(a64) * np.sign(b64)      # C truncates toward zero
    np.testing.assert_array_equal(download(q, n, np.int32), q_ref.astype(np.int32))
    np.testing.assert_array_equal(download(r, n, np.int32), (a64 - q_ref * b64).astype(np.int32))
    np.testing.assert_array_equal(download(w, n, np.int64), a64 * b64)


def test_if_else_divergence_and_early_return(module, rng):
    n = int(rng.integers(1000, 3000))
    x = rng.uniform(-1, 1, n).astype(np.float32)
    dx, dy = upload(x), device_poisoned(x.nbytes)
    module.get_function("branchy").launch((n + 127) // 128, 128, (dx, dy, n))
    expect = np.empty(n, np.float32)
    for i, v in enumerate(x):
        if v > 0.5:
            expect[i] = v * v
        elif v < -0.5:
            expect[i] = -v
        else:
            acc = np.float32(0)
            for _ in range(i % 7):
                acc = np.float32(acc + v)
            expect[i] = acc
    np.testing.assert_array_equal(download(dy, n, np.float32), expect)

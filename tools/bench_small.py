"""Rows of tools/bench_emu.py for two per-instruction costs: `.ftz` flushes (a
`--use_fast_math` build of an elementwise kernel, where every add, mul and fma flushes its
inputs and result, beside the same source built without it), and small grids (that
kernel on one block of 64 threads beside the same work on 64 blocks of 256, where the
fixed cost of each numpy call is spread over 256x fewer lanes: compare the G thr-instr/s
column). Every result is checked against a float64 numpy reference within the fast-math
functions' documented error."""
import numpy as np

from lowlevel import compiler, cuda

SOURCE = r"""
extern "C" __global__ void gelu_scale(const float* x, float* y, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i] * a;
        float t = tanhf(0.7978845608f * (v + 0.044715f * v * v * v));
        y[i] = 0.5f * v * (1.0f + t) + __fdividef(v, 1.0f + v * v);
    }
}
"""
N = 1 << 16
SMALL_N = 1 << 12                 # the 64-thread launch: 64 elements a thread
SCALE = 1.7


def reference(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64) * np.float32(SCALE)
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3))) + v / (1 + v * v)


def module(fast: bool) -> cuda.Module:
    opts = ("--use_fast_math",) if fast else ()
    return cuda.Module.from_ptx(compiler.compile(SOURCE, "ptx", "compute_80", opts))


def setup(rng, key: str):
    """One row: key "fast_math" (ftz build, N), "precise_math" (its twin), "small_grid_64"
    (precise build, 1 block of 64 over SMALL_N) or "large_grid_64" (the same over 64
    blocks of 256 threads, N elements)."""
    fast = key == "fast_math"
    n = SMALL_N if key == "small_grid_64" else N
    grid, block = {"small_grid_64": (1, 64), "large_grid_64": (64, 256)}.get(key, (n // 256, 256))
    x = rng.uniform(-4, 4, n).astype(np.float32)
    din = cuda.mem_alloc(x.nbytes)
    cuda.memcpy_htod(din, x)
    dout = cuda.mem_alloc(x.nbytes)
    f = module(fast).get_function("gelu_scale")
    want = reference(x)

    def launch():
        cuda.memset_d8(dout, 0xFF, x.nbytes)
        return lambda: f.launch(grid, block, (din, dout, np.float32(SCALE), np.int32(n)))

    def check():
        got = np.full_like(x, np.nan)
        cuda.memcpy_dtoh(got, dout)
        err = float(np.max(np.abs(got - want) / (1 + np.abs(want))))
        ok = err <= (2e-5 if fast else 2e-6)    # the fast-math tanh/divide are approximations
        return ok, f"rel err {err:.1e}" if ok else f"MISMATCH rel err {err:.1e}"
    label = {"fast_math": "fast-math (.ftz) 2^16", "precise_math": "same, no fast-math 2^16",
             "small_grid_64": "small grid: 64 threads", "large_grid_64": "its large grid: 16k thr"}[key]
    return label, key, launch, check, n


KEYS = ("fast_math", "precise_math", "small_grid_64", "large_grid_64")


def setups(rng):
    """[(setup, (label, key))] for bench_emu.py."""
    return [(lambda k=k: setup(rng, k), (k, k)) for k in KEYS]

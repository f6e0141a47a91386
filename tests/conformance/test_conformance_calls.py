"""Conformance: device function calls, compiled in every build (conformance_support.BUILDS,
and clang where installed), against numpy on random inputs with poisoned outputs: a table
of device function pointers, pointers chosen per thread, C++ virtual calls, and recursion.

On the emulated GPU recursive calls are real calls with a per-thread stack (a build may
also have turned the recursion into a loop); depths here stay far below any stack limit.
"""
import numpy as np

from conformance_support import download, poisoned_device, upload
from helpers.function_pointers import FUNCTION_POINTERS as POINTERS

RECURSION = r"""
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ long long fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
extern "C" __global__ void recursive(const int* n, long long* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = fact(n[t]) * 1000 + fib(n[t]);
}
"""


def test_function_pointers_and_virtual_calls(driver, any_build, rng):
    mod = any_build.load(POINTERS, "function_pointers")
    n = 64
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    which = rng.integers(0, 3, n).astype(np.int32)
    want = np.where(which == 0, a + b, np.where(which == 1, a * b, a - b))
    for name in ("from_table", "chosen"):
        out = poisoned_device(n, np.float32)
        mod.get_function(name).launch(1, n, (upload(a), upload(b), upload(which), out))
        np.testing.assert_array_equal(download(out, n, np.float32), want)
    out = poisoned_device(n, np.float32)
    mod.get_function("virtual_call").launch(1, n, (upload(a), upload(which), out))
    np.testing.assert_array_equal(download(out, n, np.float32),
                                  np.where(which & 1, a * a, np.float32(0.5) * a * a))


def test_recursion(driver, any_build, rng):
    mod = any_build.load(RECURSION, "recursion")
    n = 32
    k = rng.integers(0, 10, n).astype(np.int32)
    out = poisoned_device(n, np.int64)
    mod.get_function("recursive").launch(1, n, (upload(k), out))
    fib = [0, 1]
    while len(fib) < 16:
        fib.append(fib[-1] + fib[-2])
    fact = [1, 1]
    while len(fact) < 16:
        fact.append(fact[-1] * len(fact))
    np.testing.assert_array_equal(download(out, n, np.int64),
                                  [fact[v] * 1000 + fib[v] for v in k])

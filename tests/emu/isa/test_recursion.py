"""Recursive device functions on the emulated GPU, through the engine: real calls with a
per-thread stack (isa/recursion.py). Direct and mutual recursion as NVRTC compiles them
(plain and -G), threads recursing to different depths, and a recursion too deep for the
stack faulting as a stack overflow.
"""
import math

import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.isa.recursion import CALL_STACK_BYTES
from lowlevel.emu.ptx.errors import PtxError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

RECURSIVE = r"""
__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__device__ __noinline__ long long fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__device__ __noinline__ bool is_odd(int n);
__device__ __noinline__ bool is_even(int n) { return n == 0 ? true : is_odd(n - 1); }
__device__ __noinline__ bool is_odd(int n) { return n == 0 ? false : is_even(n - 1); }
// not a loop in disguise: each level needs the deeper result before its own step
__device__ __noinline__ int depth(int n) { return n == 0 ? 0 : (depth(n - 1) * 3 + n) % 1000003; }
extern "C" __global__ void recursive(const int* n, long long* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int k = n[t];
    out[t] = (fact(k) * 1000 + fib(k)) * 10 + (is_even(k) ? 1 : 2);
}
extern "C" __global__ void deep(const int* n, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = depth(n[t]);
}
"""

FIB = [0, 1]
while len(FIB) < 20:
    FIB.append(FIB[-1] + FIB[-2])


@pytest.mark.parametrize("options", [(), ("-G",)], ids=["nvrtc", "nvrtc-G"])
def test_direct_and_mutual_recursion(mem, rng, options):
    mod = load_ptx(nvrtc_ptx(RECURSIVE, options=list(options)))
    n = 64
    k = rng.integers(0, 10, n).astype(np.int32)          # every thread its own depth
    out = Buf(mem, n=n, dtype=np.int64)
    launch(mod, "recursive", 2, n // 2, Buf(mem, k), out, mem=mem)
    want = [(math.factorial(v) * 1000 + FIB[v]) * 10 + (1 if v % 2 == 0 else 2) for v in k]
    np.testing.assert_array_equal(out.read(), want)


def test_too_deep_a_recursion_overflows_the_stack(mem):
    mod = load_ptx(nvrtc_ptx(RECURSIVE))
    ok = Buf(mem, n=32, dtype=np.int32)
    launch(mod, "deep", 1, 32, Buf(mem, np.arange(32, dtype=np.int32)), ok, mem=mem)
    want = [0]
    for v in range(1, 32):
        want.append((want[-1] * 3 + v) % 1000003)
    np.testing.assert_array_equal(ok.read(), want)
    k = np.zeros(32, np.int32)
    k[5] = CALL_STACK_BYTES                               # one thread: a frame per byte
    with pytest.raises(KernelFault) as info:
        launch(mod, "deep", 1, 32, Buf(mem, k), Buf(mem, n=32, dtype=np.int32), mem=mem)
    assert info.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    message = info.value.message
    assert "stack overflow" in message and "thread (5,0,0)" in message and "depth" in message
    assert f"{CALL_STACK_BYTES}-byte per-thread stack" in message


def test_recursion_with_local_variables_is_refused_by_name():
    text = HEADER + """
.func f(.param .b32 a)
{
  .local .align 4 .b8 frame[16];
  {
  .param .b32 param0;
  call.uni f, (param0);
  }
  ret;
}
.visible .entry k() { { .param .b32 param0; call.uni f, (param0); } ret; }
"""
    with pytest.raises(PtxError, match="recursion of 'f', which keeps .local variables"):
        load_ptx(text)

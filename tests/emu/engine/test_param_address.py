"""A kernel parameter's address: LLVM's NVPTX backend passes a struct by value as one
.param and, when the kernel indexes it at run time, takes its address with
`mov.b64 %rd, param` and loads through the register (`ld.param.u32 %r, [%rd]`).

The reference is the struct's bytes as numpy reads them; inputs random, output poisoned.
"""
import numpy as np
import pytest

from helpers.memory import download, poisoned
from lowlevel import cuda

PTX = """.version 7.0
.target sm_80
.address_size 64
.visible .entry pick(.param .align 8 .b8 pick_param_0[48], .param .u64 pick_param_1)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<12>;
  mov.b64 %rd1, pick_param_0;            // the struct's address in the parameter space
  ld.param.u64 %rd2, [pick_param_1];
  cvta.to.global.u64 %rd3, %rd2;
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, 10;                  // a run-time index into the struct's int[10]
  mul.wide.u32 %rd4, %r2, 4;
  add.s64 %rd5, %rd1, %rd4;
  ld.param.u32 %r3, [%rd5+8];            // after the struct's leading u64
  ld.param.u64 %rd6, [%rd1];
  cvt.u32.u64 %r4, %rd6;
  add.s32 %r5, %r3, %r4;
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd8, %rd3, %rd7;
  st.global.u32 [%rd8], %r5;
  ret;
}
"""


def test_load_through_a_parameters_address(driver, rng):
    head = rng.integers(0, 2**32, dtype=np.uint64)
    ints = rng.integers(-2**31, 2**31, 10).astype(np.int32)
    struct = head.tobytes() + ints.tobytes()
    struct += b"\0" * (48 - len(struct))
    n = 45
    out = cuda.mem_alloc(n * 4)
    cuda.memcpy_htod(out, poisoned(n, np.int32))
    cuda.Module.from_ptx(PTX).get_function("pick").launch(1, n, (struct, out))
    cuda.synchronize()
    want = (ints[np.arange(n) % 10].astype(np.int64) + int(head & 0xFFFFFFFF)).astype(np.int32)
    np.testing.assert_array_equal(download(out, n, np.int32), want)
    out.free()


def test_misaligned_load_through_a_parameters_address_faults(driver):
    ptx = PTX.replace("[%rd5+8]", "[%rd5+9]")
    out = cuda.mem_alloc(4 * 32)
    cuda.Module.from_ptx(ptx).get_function("pick").launch(1, 32, (bytes(48), out))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS"

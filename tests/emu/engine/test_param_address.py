"""A kernel parameter's address: LLVM's NVPTX backend passes a struct by value as one
.param and, when the kernel indexes it at run time, takes its address with
`mov.b64 %rd, param` and loads through the register (`ld.param.u32 %r, [%rd]`); with
PTX 7.7 it can make that a generic address (`cvta.param`), which generic loads read and
which stores must not write (kernel parameters are read-only).

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


# --- the generic address of a kernel parameter (cvta.param, PTX 7.7, sm_70+) ---------------
# The struct of 12 ints is read through its generic address at a run-time index (as LLVM
# emits for a __grid_constant__ struct whose address escapes), and the generic address goes
# back with cvta.to.param for an ld.param; isspacep tells the windows apart.
GENERIC_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry pick(.param .align 8 .b8 pick_param_0[48], .param .u64 pick_param_1)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<16>;
  mov.b64 %rd1, pick_param_0;
  cvta.param.u64 %rd2, %rd1;             // the struct's generic address
  ld.param.u64 %rd3, [pick_param_1];
  cvta.to.global.u64 %rd4, %rd3;
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, 12;
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd6, %rd2, %rd5;
  ld.u32 %r3, [%rd6];                    // a generic load of the parameter
  cvta.param.u64 %rd7, pick_param_0;     // the same address, from the name
  cvta.to.param.u64 %rd8, %rd7;
  ld.param.u32 %r4, [%rd8+44];
  add.s32 %r5, %r3, %r4;
  isspacep.param %p1, %rd7;
  isspacep.param %p2, %rd4;
  isspacep.global %p3, %rd7;
  selp.u32 %r6, 1, 0, %p1;
  selp.u32 %r7, 2, 0, %p2;
  selp.u32 %r8, 4, 0, %p3;
  or.b32 %r6, %r6, %r7;
  or.b32 %r6, %r6, %r8;
  mul.wide.u32 %rd9, %r1, 8;
  add.s64 %rd10, %rd4, %rd9;
  st.global.v2.u32 [%rd10], {%r5, %r6};
  WRITE
  ret;
}
"""


def _generic(write=""):
    from helpers.ptxas import assemble_sm90
    text = GENERIC_PTX.replace("WRITE", write)
    assemble_sm90(text)
    return cuda.Module.from_ptx(text).get_function("pick")


def test_generic_load_through_cvta_param(driver, rng):
    ints = rng.integers(-2**31, 2**31, 12).astype(np.int32)
    n = 40
    out = cuda.mem_alloc(n * 8)
    cuda.memcpy_htod(out, poisoned(2 * n, np.int32))
    _generic().launch(1, n, (ints.tobytes(), out))
    cuda.synchronize()
    got = download(out, (n, 2), np.int32)
    want = (ints[np.arange(n) % 12].astype(np.int64) + int(ints[11])).astype(np.int32)
    np.testing.assert_array_equal(got[:, 0], want)
    # isspacep: .param for the parameter, not for the buffer; .global holds for both
    np.testing.assert_array_equal(got[:, 1], 1 | 4)
    out.free()


@pytest.mark.parametrize("write", ["st.u32 [%rd2], %r1;", "atom.add.u32 %r9, [%rd6], 1;"],
                         ids=["st", "atom"])
def test_writing_a_kernel_parameter_through_its_generic_address_faults(driver, write):
    if driver.kind != "emu":
        pytest.skip("undefined behaviour on a GPU, a fault on the emulated one")
    out = cuda.mem_alloc(32 * 8)
    _generic(write).launch(1, 32, (bytes(48), out))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_the_fault_says_parameters_are_read_only(mem):
    from helpers.emu_engine import Buf, launch
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.engine.faults import KernelFault
    mod = load_ptx(GENERIC_PTX.replace("WRITE", "st.u32 [%rd2], %r1;"))
    with pytest.raises(KernelFault, match="read-only") as fault:
        launch(mod, "pick", 1, 32, bytes(48), Buf(mem, n=64, dtype=np.uint32), mem=mem)
    assert fault.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS" and "PTX line" in str(fault.value)


def test_misaligned_generic_parameter_load_faults(driver):
    out = cuda.mem_alloc(32 * 8)
    _generic("ld.u32 %r9, [%rd2+2];").launch(1, 32, (bytes(48), out))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS"


def test_ld_param_of_a_generic_address_faults(driver):
    """ld.param through the generic address itself (no cvta.to.param): an address outside
    the parameter space, not the 0xFF that reads past the last parameter give."""
    if driver.kind != "emu":
        pytest.skip("undefined behaviour on a GPU, a fault on the emulated one")
    f = _generic("ld.param.u32 %r9, [%rd2];")
    f.launch(1, 32, (bytes(48), cuda.mem_alloc(32 * 8)))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS"

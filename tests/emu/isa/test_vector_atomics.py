"""Vector atomics on global memory (sm_90, PTX 8.1): every thread adds its vector into one
slot with atom.global.v4.f32.add (returning the old vector) and with
red.global.add.noftz.v8.f16 and .v2.bf16x2. Values are small integers, so every sum is
exact in any order (a GPU's order is not lane order); on the emulated GPU the old values
are the exclusive prefix sums in lane order, the order its atomics serialize in. Assembled
by ptxas for sm_90; references numpy; outputs poisoned."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

N = 64
PTX = r"""
.version 8.1
.target sm_90
.address_size 64
.visible .entry vec(.param .u64 x_p, .param .u64 h_p, .param .u64 b_p, .param .u64 slot_p,
                    .param .u64 old_p)
{
    .reg .b16 %rs<9>;
    .reg .b32 %r<8>;
    .reg .f32 %f<9>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [x_p];
    ld.param.u64 %rd2, [h_p];
    ld.param.u64 %rd3, [slot_p];
    ld.param.u64 %rd4, [old_p];
    ld.param.u64 %rd9, [b_p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 16;
    add.u64 %rd6, %rd1, %rd5;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd6];
    atom.global.v4.f32.add {%f5, %f6, %f7, %f8}, [%rd3OFFSET], {%f1, %f2, %f3, %f4};
    add.u64 %rd7, %rd4, %rd5;
    st.global.v4.f32 [%rd7], {%f5, %f6, %f7, %f8};
    add.u64 %rd8, %rd2, %rd5;
    ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd8];
    mov.b32 {%rs1, %rs2}, %r2;
    mov.b32 {%rs3, %rs4}, %r3;
    mov.b32 {%rs5, %rs6}, %r4;
    mov.b32 {%rs7, %rs8}, %r5;
    red.global.add.noftz.v8.f16 [%rd3+16], {%rs1, %rs2, %rs3, %rs4, %rs5, %rs6, %rs7, %rs8};
    mul.wide.u32 %rd10, %r1, 8;
    add.u64 %rd11, %rd9, %rd10;
    ld.global.v2.b32 {%r6, %r7}, [%rd11];
    red.global.add.noftz.v2.bf16x2 [%rd3+32], {%r6, %r7};
    ret;
}
"""


def _function(offset=""):
    text = PTX.replace("OFFSET", offset)
    assemble_sm90(text)
    return cuda.Module.from_ptx(text).get_function("vec")


def test_vector_atomics_add_every_element(driver, rng):
    x = rng.integers(-8, 9, (N, 4)).astype(np.float32)
    h = rng.integers(0, 8, (N, 8)).astype(np.float16)
    slot = np.zeros(12, np.float32)        # 16 bytes of f32, 16 of f16, 8 of bf16x2 (+ pad)
    slot[4:8].view(np.float16)[:] = [1, 2, 3, 4, 5, 6, 7, 8]
    b = rng.integers(0, 4, (N, 4)).astype(np.float32)     # exact in bf16 (sums <= 256)
    b_bits = (b.view(np.uint32) >> 16).astype(np.uint16)
    slot_d, old = upload(slot), device_poisoned(x.nbytes)
    _function().launch(1, N, (upload(x), upload(h), upload(b_bits), slot_d, old))
    got = download(slot_d, slot.shape, np.float32)
    np.testing.assert_array_equal(got[:4], x.sum(axis=0))
    np.testing.assert_array_equal(got[4:8].view(np.float16),
                                  (h.astype(np.float64).sum(axis=0) + np.arange(1, 9)).astype(np.float16))
    got_bf = (got[8:10].view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got_bf, b.sum(axis=0))         # the slot's bf16 start at 0
    if driver.kind == "emu":
        prefix = np.cumsum(np.vstack([np.zeros((1, 4), np.float32), x[:-1]]), axis=0)
        np.testing.assert_array_equal(download(old, x.shape, np.float32), prefix)


def test_a_misaligned_vector_atomic_faults(driver):
    f = _function("+8")
    f.launch(1, N, (upload(np.zeros((N, 4), np.float32)), upload(np.zeros((N, 8), np.float16)),
                    upload(np.zeros((N, 4), np.uint16)), upload(np.zeros(12, np.float32)),
                    device_poisoned(N * 16)))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS"

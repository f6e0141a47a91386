"""Vector atomic min/max on the half types (sm_90, PTX 8.1; sm_90 has no scalar form):
every thread takes atom.global.max.noftz.v8.f16 of its 8 values into one slot (returning
the old vector) and red.global.min.noftz.v2.bf16x2 of its 4 values into another. Random
finite values with subnormals among them (.noftz keeps them); the result is the element-
wise max/min over every thread and the slot's start, whatever the order; on the emulated
GPU the old vectors are the running maxima in lane order. Assembled by ptxas for sm_90;
references numpy; outputs poisoned."""
import numpy as np
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

N = 64
PTX = r"""
.version 8.1
.target sm_90
.address_size 64
.visible .entry mm(.param .u64 h_p, .param .u64 b_p, .param .u64 slot_p, .param .u64 old_p)
{
    .reg .b16 %rs<17>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [h_p];
    ld.param.u64 %rd2, [b_p];
    ld.param.u64 %rd3, [slot_p];
    ld.param.u64 %rd4, [old_p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 16;
    add.u64 %rd6, %rd1, %rd5;
    ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd6];
    mov.b32 {%rs1, %rs2}, %r2;
    mov.b32 {%rs3, %rs4}, %r3;
    mov.b32 {%rs5, %rs6}, %r4;
    mov.b32 {%rs7, %rs8}, %r5;
    atom.global.max.noftz.v8.f16 {%rs9, %rs10, %rs11, %rs12, %rs13, %rs14, %rs15, %rs16}, [%rd3],
        {%rs1, %rs2, %rs3, %rs4, %rs5, %rs6, %rs7, %rs8};
    add.u64 %rd7, %rd4, %rd5;
    mov.b32 %r2, {%rs9, %rs10};
    mov.b32 %r3, {%rs11, %rs12};
    mov.b32 %r4, {%rs13, %rs14};
    mov.b32 %r5, {%rs15, %rs16};
    st.global.v4.b32 [%rd7], {%r2, %r3, %r4, %r5};
    mul.wide.u32 %rd8, %r1, 8;
    add.u64 %rd9, %rd2, %rd8;
    ld.global.v2.b32 {%r6, %r7}, [%rd9];
    red.global.min.noftz.v2.bf16x2 [%rd3+16], {%r6, %r7};
    ret;
}
"""


def random_halves(rng, shape):
    """Finite f16 values of every magnitude, subnormals included, either sign."""
    bits = rng.integers(0, 0x7C00, shape).astype(np.uint16) | (rng.integers(0, 2, shape) << 15).astype(np.uint16)
    return bits.view(np.float16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_vector_half_min_max(driver, rng):
    h = random_halves(rng, (N, 8))
    b_bits = rng.integers(0, 0x7F80, (N, 4)).astype(np.uint16) | (rng.integers(0, 2, (N, 4)) << 15).astype(np.uint16)
    start_h = random_halves(rng, 8)
    start_b = np.array([0x3F80, 0xBF80, 0x7F7F, 0x0001], np.uint16)   # 1, -1, max, subnormal
    slot = np.zeros(12, np.uint16)
    slot[:8] = start_h.view(np.uint16)
    slot[8:12] = start_b
    text = PTX
    assemble_sm90(text)
    slot_d, old = upload(slot), device_poisoned(h.nbytes)
    cuda.Module.from_ptx(text).get_function("mm").launch(1, N, (upload(h), upload(b_bits), slot_d, old))
    got = download(slot_d, slot.shape, np.uint16)
    ref_h = np.max(np.vstack([start_h[None, :], h]).astype(np.float64), axis=0)
    np.testing.assert_array_equal(got[:8].view(np.float16).astype(np.float64), ref_h)
    ref_b = np.min(np.vstack([bf16_to_f32(start_b)[None, :], bf16_to_f32(b_bits)]), axis=0)
    np.testing.assert_array_equal(bf16_to_f32(got[8:12]), ref_b)
    if driver.kind == "emu":
        running = np.maximum.accumulate(np.vstack([start_h[None, :], h[:-1]]).astype(np.float64), axis=0)
        np.testing.assert_array_equal(download(old, h.shape, np.float16).astype(np.float64), running)

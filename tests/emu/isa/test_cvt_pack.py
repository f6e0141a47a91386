"""cvt.pack.sat (sm_72+) against a numpy reference written from the PTX ISA's pseudo-code:
random s32 operands (many outside every narrow range), random c, poisoned output,
each kernel assembled by ptxas for sm_90 first."""
import numpy as np
import pytest
from helpers.emu_engine import Buf, launch
from helpers.ptxas import assemble_sm90

from lowlevel.emu.engine.decode import load_ptx

SM90 = ".version 8.0\n.target sm_90\n.address_size 64\n"

KERNEL = SM90 + """
.visible .entry k(.param .u64 a_p, .param .u64 b_p, .param .u64 c_p, .param .u64 d_p)
{
  .reg .b32 %r<6>; .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [a_p];
  ld.param.u64 %rd2, [b_p];
  ld.param.u64 %rd3, [c_p];
  ld.param.u64 %rd4, [d_p];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
  add.u64 %rd6, %rd1, %rd5;
  ld.global.u32 %r2, [%rd6];
  add.u64 %rd7, %rd2, %rd5;
  ld.global.u32 %r3, [%rd7];
  add.u64 %rd8, %rd3, %rd5;
  ld.global.u32 %r4, [%rd8];
  INSTRUCTION
  add.u64 %rd9, %rd4, %rd5;
  st.global.u32 [%rd9], %r5;
  ret;
}
"""


def reference(t, a, b, c):
    width, signed = int(t[1:]), t[0] == "s"
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        sx = min(max(x, lo), hi) & ((1 << width) - 1)
        sy = min(max(y, lo), hi) & ((1 << width) - 1)
        word = sx << width | sy
        if width < 16:
            word |= z << 2 * width
        out.append(word & 0xFFFFFFFF)
    return np.array(out, np.uint32)


def operands(rng, n):
    """s32 values: small ones (inside the narrow ranges), edges, and any."""
    small = rng.integers(-300, 300, n // 2)
    edges = np.array([0, 1, -1, 2, -2, 3, 7, 8, -8, -9, 15, 16, 127, 128, -128, -129, 255, 256,
                      32767, 32768, -32768, -32769, 65535, 65536, 2**31 - 1, -2**31])
    rest = rng.integers(-2**31, 2**31, n - n // 2 - edges.size)
    return rng.permutation(np.concatenate([small, edges, rest])).astype(np.int32)


@pytest.mark.parametrize("t", ["u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2"])
def test_cvt_pack_sat_against_the_isa(mem, rng, t):
    n = 256
    a, b = operands(rng, n), operands(rng, n)
    c = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    ins = (f"cvt.pack.sat.{t}.s32 %r5, %r2, %r3;" if t in ("u16", "s16")
           else f"cvt.pack.sat.{t}.s32.b32 %r5, %r2, %r3, %r4;")
    text = KERNEL.replace("INSTRUCTION", ins)
    assemble_sm90(text)
    bufs = [Buf(mem, a), Buf(mem, b), Buf(mem, c), Buf(mem, n=n, dtype=np.uint32)]
    try:
        launch(load_ptx(text), "k", 1, n, *bufs, mem=mem)
        np.testing.assert_array_equal(bufs[3].read(), reference(t, a, b, c))
    finally:
        for buf in bufs:
            buf.free()


def test_four_bytes_packed_in_two_steps_keep_their_order(mem, rng):
    # what CUTLASS and TensorRT do: pack (v3, v2), then (v1, v0) with it as c: bytes v0..v3
    v = rng.integers(-1000, 1000, (4, 64)).astype(np.int32)
    text = KERNEL.replace("INSTRUCTION", "cvt.pack.sat.s8.s32.b32 %r5, %r2, %r3, 0;\n"
                          "  cvt.pack.sat.s8.s32.b32 %r5, %r4, %r1, %r5;").replace(
        "mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd5, %r1, 4;",
        "mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd5, %r1, 4;\n  add.u64 %rd9, %rd4, %rd5;\n"
        "  ld.global.u32 %r1, [%rd9];")
    assemble_sm90(text)
    d_init = v[0].copy()                                    # v0 comes in through the output
    bufs = [Buf(mem, v[3]), Buf(mem, v[2]), Buf(mem, v[1]), Buf(mem, d_init)]
    try:
        launch(load_ptx(text), "k", 1, 64, *bufs, mem=mem)
        got = bufs[3].read().view(np.int8).reshape(64, 4)
        np.testing.assert_array_equal(got, np.clip(v.T, -128, 127).astype(np.int8))
    finally:
        for buf in bufs:
            buf.free()

"""elect.sync (sm_90) and szext (sm_70+), each against a numpy reference written from the
PTX ISA's description: random masks and operands, poisoned outputs, every kernel
assembled by ptxas for sm_90 first."""
import numpy as np
import pytest
from helpers.emu_engine import POISON, Buf, launch
from helpers.ptxas import assemble_sm90

from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

SM90 = ".version 8.0\n.target sm_90\n.address_size 64\n"


def elect_kernel(dest="%r3|%p2", exit_below=0):
    """Lanes named in `mask` run elect.sync with it (others skip to the end, storing
    nothing); lanes below `exit_below` exit first. Each participant stores d and p."""
    return SM90 + f"""
.visible .entry e(.param .u64 out, .param .u32 mask)
{{
  .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r2, [mask];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, {exit_below};
  @%p1 exit;
  and.b32 %r4, %r1, 31;
  shr.b32 %r5, %r2, %r4;
  and.b32 %r5, %r5, 1;
  setp.eq.u32 %p1, %r5, 0;
  @%p1 bra DONE;
  mov.u32 %r3, 99;
  elect.sync {dest}, %r2;
  selp.u32 %r6, 1, 0, %p2;
  mul.wide.u32 %rd2, %r1, 8;
  add.u64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {{%r3, %r6}};
DONE:
  ret;
}}
"""


def run_elect(mem, text, mask, block=64):
    out = Buf(mem, n=2 * block, dtype=np.uint32)
    try:
        launch(load_ptx(text), "e", 1, block, out, mask, mem=mem)
        return out.read().reshape(block, 2)
    finally:
        out.free()


def elect_reference(mask, block, exit_below=0, sink=False):
    ref = np.full((block, 2), POISON, np.uint32)
    for warp in range(0, block, 32):
        members = [w for w in range(warp, warp + 32)
                   if mask >> (w % 32) & 1 and w >= exit_below]
        for w in members:
            leader = members[0] % 32
            ref[w] = (99 if sink else leader, int(w % 32 == leader))
    return ref


@pytest.mark.parametrize("trial", range(3))
def test_elect_picks_the_least_lane_of_the_mask(mem, rng, trial):
    mask = int(rng.integers(1, 1 << 32)) | (1 << int(rng.integers(0, 32)))
    text = elect_kernel()
    assemble_sm90(text)
    np.testing.assert_array_equal(run_elect(mem, text, mask), elect_reference(mask, 64))


def test_elect_skips_lanes_that_exited(mem):
    text = elect_kernel(exit_below=5)
    assemble_sm90(text)
    np.testing.assert_array_equal(run_elect(mem, text, 0xFFFFFFFF),
                                  elect_reference(0xFFFFFFFF, 64, exit_below=5))


def test_elect_with_the_sink_destination_sets_only_the_predicate(mem, rng):
    mask = int(rng.integers(1, 1 << 32))
    text = elect_kernel(dest="_|%p2")
    assemble_sm90(text)
    np.testing.assert_array_equal(run_elect(mem, text, mask),
                                  elect_reference(mask, 64, sink=True))


def test_elect_by_a_lane_missing_from_its_mask_faults(mem):
    text = elect_kernel().replace("elect.sync %r3|%p2, %r2;", "elect.sync %r3|%p2, 1;")
    assemble_sm90(text)
    with pytest.raises(KernelFault, match="elect.sync"):
        run_elect(mem, text, 0x3)          # lanes 0 and 1 run it; lane 1 is not in mask 1


SZEXT = SM90 + """
.visible .entry z(.param .u64 a_p, .param .u64 b_p, .param .u64 d_p)
{
  .reg .b32 %r<6>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [a_p];
  ld.param.u64 %rd2, [b_p];
  ld.param.u64 %rd3, [d_p];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.u64 %rd5, %rd1, %rd4;
  ld.global.u32 %r2, [%rd5];
  add.u64 %rd6, %rd2, %rd4;
  ld.global.u32 %r3, [%rd6];
  szext.MODE.TYPE %r4, %r2, %r3;
  add.u64 %rd7, %rd3, %rd4;
  st.global.u32 [%rd7], %r4;
  ret;
}
"""


def szext_reference(mode, signed, a, b):
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        n = y % 32 if mode == "wrap" else min(y, 32)
        if n == 0:
            out.append(0)
        elif n >= 32:
            out.append(x)
        else:
            low = x & ((1 << n) - 1)
            if signed and low >> (n - 1) & 1:
                low |= 0xFFFFFFFF ^ ((1 << n) - 1)
            out.append(low)
    return np.array(out, np.uint32)


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
@pytest.mark.parametrize("t", ["u32", "s32"])
def test_szext_against_the_isa(mem, rng, mode, t):
    n = 256
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    b = np.concatenate([np.arange(0, 70), rng.integers(0, 1 << 32, n - 70, dtype=np.uint64)]).astype(np.uint32)
    text = SZEXT.replace("MODE", mode).replace("TYPE", t)
    assemble_sm90(text)
    bufs = [Buf(mem, a), Buf(mem, b), Buf(mem, n=n, dtype=np.uint32)]
    try:
        launch(load_ptx(text), "z", 1, n, *bufs, mem=mem)
        np.testing.assert_array_equal(bufs[2].read(), szext_reference(mode, t == "s32", a, b))
    finally:
        for buf in bufs:
            buf.free()

"""The member mask of warp instructions (shfl/vote/match/redux.sync, bar.warp.sync) as the
PTX ISA states the rule: a lane missing from its own mask, a named lane whose guard is
false, and lanes naming each other with different masks fault; exited lanes may be named;
a named lane that is elsewhere is waited for on sm_70+ (test_warp_wait.py) and faults for
.target sm_6x.
"""

import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

# --- the warp member mask ------------------------------------------------------------------

WARP_OPS = {
    "shfl": "shfl.sync.idx.b32 %r3, %r1, 0, 31, {mask};",
    "vote": "vote.sync.ballot.b32 %r3, %p2, {mask};",
    "match": "match.any.sync.b32 %r3, %r1, {mask};",
    "redux": "redux.sync.add.u32 %r3, %r1, {mask};",
    "bar.warp": "bar.warp.sync {mask}; mov.u32 %r3, 7;",
}


def warp_kernel(op, mask="0xffffffff", split=32, guard="", after_split="ret;"):
    """Lanes below `split` run `op` (lane ids in %r1, %p2 = lane is odd); the others go to
    `after_split` (exit, or elsewhere and back)."""
    return HEADER + f"""
.visible .entry w(.param .u64 out) {{
  .reg .u32 %r<6>; .reg .u64 %rd<4>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r4, %r1, 1;
  setp.ne.u32 %p2, %r4, 0;
  setp.lt.u32 %p3, %r1, 8;
  mov.u32 %r3, 0;
  setp.ge.u32 %p1, %r1, {split};
  @%p1 bra OTHER;
  {guard}{WARP_OPS[op].format(mask=mask)}
  bra STORE;
OTHER:
  {after_split}
STORE:
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}}
"""


def run_warp(mem, text, block=32, grid=1):
    out = Buf(mem, n=block * grid, dtype=np.uint32)
    try:
        launch(load_ptx(text), "w", grid, block, out, mem=mem)
        return out.read()
    finally:
        out.free()


@pytest.mark.parametrize("op", WARP_OPS)
def test_converged_full_warp_with_the_full_mask_runs(mem, op):
    run_warp(mem, warp_kernel(op))


@pytest.mark.parametrize("op", WARP_OPS)
def test_lanes_that_exited_may_be_named_in_the_mask(mem, op):
    run_warp(mem, warp_kernel(op, split=16))                          # lanes 16..31 exit
    run_warp(mem, warp_kernel(op, split=32), block=20)                # a partial warp


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_mask_naming_only_the_lanes_that_run_is_fine(mem, op):
    run_warp(mem, warp_kernel(op, mask="0x0000ffff", split=16, after_split="mov.u32 %r3, 1;"))


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_lane_missing_from_its_own_mask_faults(mem, op):
    with pytest.raises(KernelFault) as info:
        run_warp(mem, warp_kernel(op, mask="0x0000ffff"))
    msg = str(info.value)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "w:" in msg and "block (0,0,0)" in msg and "warp 0, lane 16" in msg
    assert "PTX line" in msg and "0x0000ffff" in msg and "own bit" in msg


@pytest.mark.parametrize("op", ["shfl", "vote", "bar.warp"])
def test_for_sm_6x_a_named_lane_that_is_elsewhere_faults(mem, op):
    # lanes 16..31 have not exited: they run `mov` at OTHER and come back to STORE
    text = warp_kernel(op, split=16, after_split="mov.u32 %r3, 1;").replace("sm_80", "sm_60")
    with pytest.raises(KernelFault) as info:
        run_warp(mem, text, block=64)
    msg = str(info.value)
    assert "block (0,0,0), warp 0, lane 0" in msg and "0xffffffff" in msg
    assert "lanes [16, 17," in msg and "31]" in msg and "sm_60" in msg


@pytest.mark.parametrize("op", WARP_OPS)
def test_on_sm_80_lanes_wait_for_a_named_lane_that_is_elsewhere(mem, op):
    # lanes 0..15 wait at the op; 16..31 store 1 at STORE and exit, which releases them
    out = run_warp(mem, warp_kernel(op, split=16, after_split="mov.u32 %r3, 1;"), block=64)
    assert (out.reshape(2, 32)[:, 16:] == 1).all()
    assert (out.reshape(2, 32)[:, :16] != 0xDEADBEEF).all()


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_named_lane_whose_guard_is_false_faults(mem, op):
    with pytest.raises(KernelFault) as info:
        run_warp(mem, warp_kernel(op, guard="@%p3 "))           # lanes 8..31: guard false
    assert "lanes [8, 9," in str(info.value)


def test_lanes_naming_each_other_with_different_masks_fault(mem):
    text = warp_kernel("shfl", mask="%r5").replace(
        "mov.u32 %r3, 0;", "mov.u32 %r3, 0;\n  selp.u32 %r5, 0xffffffff, 0xffff0000, %p3;")
    # lanes 0..7 name every lane with 0xffffffff; lanes 8..31 use 0xffff0000
    with pytest.raises(KernelFault) as info:
        run_warp(mem, text)
    assert "another mask" in str(info.value)
    consistent = warp_kernel("shfl", mask="%r5").replace(
        "mov.u32 %r3, 0;", "mov.u32 %r3, 0;\n  selp.u32 %r5, 0xff, 0xffffff00, %p3;")
    run_warp(mem, consistent)                       # two groups, each with its own mask

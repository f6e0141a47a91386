"""Warp instructions on lanes that reach them at different times (sm_70 and later, PTX
ISA: an executing lane waits until every non-exited lane of its member mask has executed
the instruction with the same mask). The scheduler runs lowest PC first, so lanes whose
path runs through a block placed after the instruction (as compilers place cold blocks)
come to it later; they must meet the lanes that wait there. For .target sm_6x the lanes
must be converged, and the emulated GPU still refuses them.
"""
import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

LATE = {   # each op reads %r3 (the lane's value) and %p2 (%r3 odd), writes %r5
    "shfl": "shfl.sync.bfly.b32 %r5, %r3, 16, 31, 0xffffffff;",
    "vote": "vote.sync.ballot.b32 %r5, %p2, 0xffffffff;",
    "match": "match.any.sync.b32 %r5, %r3, 0xffffffff;",
    "redux": "redux.sync.add.u32 %r5, %r3, 0xffffffff;",
}


def late_kernel(op, target="sm_80"):
    """Lanes 16..31 first go through COLD (after the op in the code: they arrive last),
    multiplying their value by 3, then every lane runs `op` and stores %r5."""
    return HEADER.replace("sm_80", target) + f"""
.visible .entry w(.param .u64 x, .param .u64 out) {{
  .reg .u32 %r<8>; .reg .u64 %rd<6>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd4, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  and.b32 %r2, %r1, 31;
  setp.ge.u32 %p1, %r2, 16;
  @%p1 bra COLD;
BACK:
  and.b32 %r4, %r3, 1;
  setp.ne.u32 %p2, %r4, 0;
  {LATE[op]}
  add.u64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r5;
  ret;
COLD:
  mul.lo.u32 %r3, %r3, 3;
  bra BACK;
}}
"""


def want_late(op, x):
    v = x.astype(np.uint64).reshape(-1, 32).copy()
    v[:, 16:] = (v[:, 16:] * 3) % 2**32
    if op == "shfl":
        r = np.concatenate([v[:, 16:], v[:, :16]], axis=1)
    elif op == "vote":
        bits = (v & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
        r = np.repeat(bits.sum(axis=1, keepdims=True), 32, axis=1)
    elif op == "match":
        same = v[:, :, None] == v[:, None, :]
        r = (same.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=2)
    else:
        r = np.repeat(v.sum(axis=1, keepdims=True) % 2**32, 32, axis=1)
    return r.astype(np.uint32).reshape(-1)


def run(mem, text, x):
    """One CTA of x.size threads."""
    xb, out = Buf(mem, x), Buf(mem, n=x.size, dtype=np.uint32)
    try:
        launch(load_ptx(text), "w", 1, x.size, xb, out, mem=mem)
        return out.read()
    finally:
        xb.free()
        out.free()


@pytest.mark.parametrize("op", LATE)
def test_lanes_arriving_late_meet_the_waiting_lanes(mem, rng, op):
    x = rng.integers(0, 2**32, 4 * 32, dtype=np.uint64).astype(np.uint32)
    if op == "match":
        x = rng.integers(0, 4, x.size).astype(np.uint32)   # repeated values: groups to match
    np.testing.assert_array_equal(run(mem, late_kernel(op), x), want_late(op, x))


@pytest.mark.parametrize("op", ["shfl", "vote"])
def test_for_sm_6x_the_late_lanes_are_refused(mem, rng, op):
    x = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    with pytest.raises(KernelFault) as info:
        run(mem, late_kernel(op, "sm_61"), x)
    msg = str(info.value)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "lanes [16, 17," in msg and "sm_61" in msg and "in convergence" in msg


def test_lanes_whose_partners_exit_go_on_without_them(mem, rng):
    """The ISA waits for non-exited lanes only: lanes 16..31 leave through COLD."""
    x = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    text = late_kernel("redux").replace("mul.lo.u32 %r3, %r3, 3;\n  bra BACK;", "ret;")
    out = run(mem, text, x)
    v = x.astype(np.uint64).reshape(-1, 32)
    want = np.repeat(v[:, :16].sum(axis=1, keepdims=True) % 2**32, 16, axis=1)
    np.testing.assert_array_equal(out.reshape(-1, 32)[:, :16], want.astype(np.uint32))
    assert (out.reshape(-1, 32)[:, 16:] == 0xDEADBEEF).all()       # they stored nothing


def two_sites(op, other=None):
    """late_kernel with lanes 16..31 running their own copy of `op` (or `other`) in COLD."""
    return late_kernel(op).replace(
        "mul.lo.u32 %r3, %r3, 3;\n  bra BACK;",
        "mul.lo.u32 %r3, %r3, 3;\n  and.b32 %r4, %r3, 1;\n  setp.ne.u32 %p2, %r4, 0;\n  "
        + (other or LATE[op]) + "\n  add.u64 %rd5, %rd4, %rd2;\n  st.global.u32 [%rd5], %r5;\n  ret;")


@pytest.mark.parametrize("op", LATE)
def test_lanes_at_two_instructions_with_the_same_qualifiers_exchange_values(mem, rng, op):
    """Each side of an if/else runs its own copy of the instruction with the full mask:
    the PTX ISA waits for lanes that executed one with the same qualifiers and mask, so
    the two halves exchange values as if at one instruction."""
    x = rng.integers(0, 2**32, 4 * 32, dtype=np.uint64).astype(np.uint32)
    if op == "match":
        x = rng.integers(0, 4, x.size).astype(np.uint32)
    np.testing.assert_array_equal(run(mem, two_sites(op), x), want_late(op, x))


def test_shuffles_with_other_qualifiers_never_meet(mem, rng):
    """shfl.sync.bfly and shfl.sync.down do not pair: a hang on a GPU, a launch fault here."""
    x = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    text = two_sites("shfl", "shfl.sync.down.b32 %r5, %r3, 16, 31, 0xffffffff;")
    with pytest.raises(KernelFault) as info:
        run(mem, text, x)
    msg = str(info.value)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "shfl.sync.bfly.b32 in block (0,0,0), warp 0, lane 0" in msg and "0xffffffff" in msg
    assert "lanes [16, 17," in msg and "another shfl.sync.down.b32" in msg and "deadlock" in msg


def test_bar_warp_sync_with_different_masks_on_each_side_is_refused(mem):
    """bar.warp.sync pairs with any bar.warp.sync, but only with the same mask."""
    text = late_kernel("shfl").replace(LATE["shfl"], "bar.warp.sync 0xffffffff;\n  mov.u32 %r5, 1;")
    text = text.replace("mul.lo.u32 %r3, %r3, 3;\n  bra BACK;",
                        "bar.warp.sync 0xfffffffe;\n  bra BACK;")
    with pytest.raises(KernelFault) as info:
        run(mem, text, np.zeros(32, np.uint32))
    msg = str(info.value)
    assert "bar.warp.sync in block (0,0,0), warp 0, lane 0" in msg and "deadlock" in msg
    assert "mask 0xffffffff" in msg and "another bar.warp.sync with member mask 0xfffffffe" in msg


LOGICAL = HEADER + """
.visible .entry w(.param .u64 x, .param .u64 out, .param .u64 flag) {
  .reg .u32 %r<9>; .reg .u64 %rd<8>; .reg .pred %p<5>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd4, [out];
  ld.param.u64 %rd6, [flag];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  and.b32 %r2, %r1, 31;
  setp.lt.u32 %p2, %r2, 16;
  selp.u32 %r6, 0x0000ffff, 0xffff0000, %p2;
  setp.ge.u32 %p1, %r2, 24;
  @%p1 bra COLD;
BACK:
  shfl.sync.bfly.b32 %r5, %r3, 1, 31, %r6;
  add.u64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r5;
  setp.ne.u32 %p3, %r1, 0;
  @%p3 bra END;
  st.volatile.global.u32 [%rd6], 1;
END:
  ret;
COLD:
  ld.volatile.global.u32 %r7, [%rd6];
  setp.eq.u32 %p4, %r7, 0;
  @%p4 bra COLD;
  bra BACK;
}
"""


def test_a_logical_warp_goes_on_while_the_other_half_waits(mem, rng, monkeypatch):
    """Two 16-lane groups of one warp, each with its own mask: lanes 16..23 wait for
    24..31, which spin until lane 0 has shuffled in its own group and set a flag. Only the
    lanes that name the late ones may wait, or nothing ever sets the flag."""
    monkeypatch.setenv("LOWLEVEL_EMU_WATCHDOG_S", "20")
    x = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    xb, out, flag = Buf(mem, x), Buf(mem, n=32, dtype=np.uint32), Buf(mem, np.zeros(1, np.uint32))
    try:
        launch(load_ptx(LOGICAL), "w", 1, 32, xb, out, flag, mem=mem)
        np.testing.assert_array_equal(out.read(), x[np.arange(32) ^ 1])
        assert flag.read()[0] == 1
    finally:
        for b in (xb, out, flag):
            b.free()


def test_threads_at_a_barrier_in_a_warp_instructions_block_are_not_warp_waiters(mem, rng):
    """A block that starts with a warp instruction (shfl.sync, elect.sync: Triton's sm_90a
    code has many) and ends with bar.sync: warp 0 parks at that barrier, warp 1 at another
    bar.sync; when no thread can run, the barrier releases both (the parked threads were taken
    for lanes waiting at the shuffle, and the emulated GPU failed with an internal error)."""
    text = HEADER + """
.visible .entry w(.param .u64 x, .param .u64 out) {
  .reg .u32 %r<8>; .reg .u64 %rd<6>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd4, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  setp.ge.u32 %p1, %r1, 32;
  @%p1 bra SECOND;
  shfl.sync.bfly.b32 %r5, %r3, 1, 31, 0xffffffff;
  bar.sync 0;
  bra DONE;
SECOND:
  add.u32 %r5, %r3, 7;
  bar.sync 0;
DONE:
  add.u64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r5;
  ret;
}"""
    x = rng.integers(0, 1000, 64, dtype=np.uint32)
    out = Buf(mem, n=64, dtype=np.uint32)
    launch(load_ptx(text), "w", 1, 64, Buf(mem, x), out, mem=mem)
    want = np.concatenate([x[:32].reshape(16, 2)[:, ::-1].ravel(), x[32:] + 7])
    np.testing.assert_array_equal(out.read(), want)

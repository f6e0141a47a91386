"""%aggr_smem_size, %current_graph_exec, %clock_hi and the performance monitor counters
%pm0..%pm7 / %pm0_64..%pm7_64, read in a kernel assembled by ptxas for sm_90; the expected
values from the PTX ISA's definitions (and isa/specials.py's documented choices where the
ISA leaves them to the implementation). Output poisoned."""
import numpy as np
import pytest
from helpers.emu_engine import Buf, launch
from helpers.ptxas import assemble_sm90

from lowlevel.emu.engine.decode import load_ptx

SM90 = ".version 8.1\n.target sm_90\n.address_size 64\n"
RESERVED_PER_BLOCK = 1024       # the device's CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK

SIZES = SM90 + """
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<6>;
  .shared .align 4 .b8 tile[STATIC];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %aggr_smem_size;
  mov.u32 %r2, %total_smem_size;
  mov.u32 %r3, %dynamic_smem_size;
  mov.u64 %rd2, %current_graph_exec;
  mov.u32 %r0, tile;
  st.shared.u32 [%r0], %r1;
  st.global.v2.u32 [%rd1], {%r1, %r2};
  st.global.u32 [%rd1+8], %r3;
  st.global.u64 [%rd1+16], %rd2;
  ret;
}
"""


@pytest.mark.parametrize("static, dynamic", [(16, 0), (256, 4096), (1024, 100)])
def test_aggr_smem_size_adds_the_reserved_region(mem, static, dynamic):
    text = SIZES.replace("STATIC", str(static))
    assemble_sm90(text)
    out = Buf(mem, n=6, dtype=np.uint32)
    try:
        launch(load_ptx(text), "k", 1, 32, out, mem=mem, shared=dynamic)
        got = out.read()
    finally:
        out.free()
    assert got[2] == dynamic and got[1] == static + dynamic
    assert got[0] == static + dynamic + RESERVED_PER_BLOCK
    assert got[4] == 0 and got[5] == 0             # no device graph: %current_graph_exec is 0


COUNTERS = SM90 + """
.visible .entry c(.param .u64 out)
{
  .reg .b32 %r<20>; .reg .b64 %rd<24>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 176;          // 22 words a thread
  add.u64 %rd1, %rd1, %rd2;
  mov.u64 %rd3, %clock64;
  mov.u32 %r2, %clock_hi;
  mov.u64 %rd4, %clock64;
  st.global.v2.u64 [%rd1], {%rd3, %rd4};
  cvt.u64.u32 %rd5, %r2;
  st.global.u64 [%rd1+16], %rd5;
READS
  ret;
}
"""


def counter_reads():
    """Each counter read twice (32-bit and 64-bit ones), stored as u64 pairs after the
    three clock words."""
    lines, slot = [], 3
    for n in range(8):
        for name, wide in ((f"%pm{n}", False), (f"%pm{n}_64", True)):
            if wide:
                lines += [f"  mov.u64 %rd6, {name};", f"  mov.u64 %rd7, {name};"]
            else:
                lines += [f"  mov.u32 %r3, {name};", f"  mov.u32 %r4, {name};",
                          "  cvt.u64.u32 %rd6, %r3;", "  cvt.u64.u32 %rd7, %r4;"]
            if n % 2 == 0:             # half the counters: both reads stored
                lines += [f"  st.global.u64 [%rd1+{8 * slot}], %rd6;",
                          f"  st.global.u64 [%rd1+{8 * slot + 8}], %rd7;"]
                slot += 2
    return "\n".join(lines), slot


def test_clock_hi_and_the_performance_counters(mem):
    reads, words = counter_reads()
    assert words == 19                       # 3 words left poisoned at the end of each row
    text = COUNTERS.replace("READS", reads)
    assemble_sm90(text)
    out = Buf(mem, n=(64, 22), dtype=np.uint64)
    try:
        launch(load_ptx(text), "c", 1, 64, out, mem=mem)
        got = out.read()
    finally:
        out.free()
    before, after, hi = got[:, 0], got[:, 1], got[:, 2]
    assert ((before >> np.uint64(32)) <= hi).all() and (hi <= (after >> np.uint64(32))).all()
    pairs = got[:, 3:words].reshape(64, -1, 2)
    wide = pairs[:, 1::2]                    # %pm0_64, %pm2_64 ...: never go back
    assert (wide[:, :, 1] >= wide[:, :, 0]).all() and (wide[:, :, 0] > 0).all()
    narrow = pairs[:, 0::2]                  # %pm0, %pm2 ...: 32-bit, up to their wrap
    assert (narrow < 2**32).all()
    step = (narrow[:, :, 1] - narrow[:, :, 0]) & np.uint64(0xFFFFFFFF)
    assert (step < 2**31).all()
    assert (got[:, words:] == np.uint64(0xDEADBEEFDEADBEEF)).all()   # nothing else written

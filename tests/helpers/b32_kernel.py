"""One 32-bit instruction per thread over three operand arrays, for the ISA tests that check
an instruction against a reference: thread i reads a[i], b[i], c[i] into %r2, %r3, %r4, runs
INSTRUCTION (which writes %r5) and stores %r5 to d[i]. Each kernel is assembled by ptxas
for sm_90 first (the acceptance oracle), then run on the emulator's engine."""
import numpy as np
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


def run_b32(mem, text: str, a, b, c, d=None) -> np.ndarray:
    """Run `text` (KERNEL with its INSTRUCTION filled in) on one block of len(a) threads;
    d (the output) starts as `d` where given, poisoned otherwise. Returns d as uint32."""
    assemble_sm90(text)
    out = Buf(mem, d) if d is not None else Buf(mem, n=len(a), dtype=np.uint32)
    bufs = [Buf(mem, a), Buf(mem, b), Buf(mem, c), out]
    try:
        launch(load_ptx(text), "k", 1, len(a), *bufs, mem=mem)
        return out.read()
    finally:
        for buf in bufs:
            buf.free()

"""Uninitialised shared and local memory reads as poison (0xFF bytes), never as zeros that
a buggy kernel could come to rely on.
"""

import numpy as np
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx

# --- uninitialised shared and local memory -------------------------------------------------

UNINIT_PTX = HEADER + """
.visible .entry k(.param .u64 out) {
  .shared .align 8 .b8 s[64];
  .local .align 8 .b8 l[16];
  .reg .u32 %r<3>; .reg .f32 %f1; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 12;
  add.u64 %rd1, %rd1, %rd2;
  mul.wide.u32 %rd3, %r1, 2;
  ld.shared.u32 %r2, [s];
  st.global.u32 [%rd1], %r2;
  ld.local.u32 %r2, [l+4];
  st.global.u32 [%rd1+4], %r2;
  ld.shared.f32 %f1, [s+32];
  st.global.f32 [%rd1+8], %f1;
  ret;
}
"""


def test_uninitialised_shared_and_local_memory_is_poison(mem):
    mod = load_ptx(UNINIT_PTX)
    out = Buf(mem, np.zeros(3 * 64, np.uint32))
    launch(mod, "k", 1, 64, out, mem=mem)
    got = out.read().reshape(64, 3)
    assert (got[:, :2] == 0xFFFFFFFF).all()                     # -1 as an integer
    assert np.isnan(got[:, 2].view(np.float32)).all()           # NaN as a float
    out.free()

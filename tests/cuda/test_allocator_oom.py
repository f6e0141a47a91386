"""The caching allocator out of memory: before it gives up, it lets go of what the caches
above it hold (the frontend's 0-d constants, kept per stream), which may pin segments of
streams long gone."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_constants_of_dead_streams_do_not_exhaust_memory(driver):
    """Each iteration's stream gets a segment of its own (2 MiB), and `u * 2.0`'s number a
    cached 0-d tensor in it; 80 streams on a 64 MiB emulated device ran out of memory with
    60 MiB cached. Now the retry after the first failure frees them."""
    if driver.kind != "emu":
        pytest.skip("the emulated device's memory size is set by LOWLEVEL_EMU_MEMORY")
    script = textwrap.dedent("""
        import lowlevel as ll
        from lowlevel import cuda
        for i in range(80):
            s = cuda.Stream()
            with cuda.stream(s):
                u = ll.ones(5, device="cuda", dtype=ll.float16) * 2.0
            assert u.numpy().tolist() == [2.0] * 5
        print("ok")
    """)
    env = dict(os.environ, LOWLEVEL_DRIVER="emu", LOWLEVEL_EMU_MEMORY="64M")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]

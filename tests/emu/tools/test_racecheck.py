"""LOWLEVEL_EMU_RACECHECK=1 (tools/racecheck.py): a missing barrier between shared-memory
accesses of different threads is reported (stderr and LaunchStats.races), a present one
is not, and with the variable unset nothing is checked.
"""

import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import Buf, launch
from lowlevel.emu.engine.decode import load_ptx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

POISON_FF = np.uint8(0xFF)      # this module's output buffers start as 0xFF bytes (NaN as float32)


def cu(source, options=()):
    return load_ptx(nvrtc_ptx('extern "C" {\n' + source + "\n}", options=options))


# --- racecheck ---------------------------------------------------------------

RACY = """
__global__ void k(const float* in, float* out, int sync) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 128 + t];
    if (sync) __syncthreads();
    out[blockIdx.x * 128 + t] = s[(t + 1) % 128];
}"""


def test_racecheck_reports_a_missing_barrier(mem, rng, monkeypatch, capsys):
    mod = cu(RACY)
    x = rng.standard_normal(256).astype(np.float32)
    monkeypatch.setenv("LOWLEVEL_EMU_RACECHECK", "1")
    out = Buf(mem, n=256, dtype=np.float32, poison=POISON_FF)
    stats = launch(mod, "k", 2, 128, Buf(mem, x), out, 1, mem=mem)
    assert stats.races == []
    np.testing.assert_array_equal(out.read(), np.roll(x.reshape(2, 128), -1, axis=1).reshape(-1))
    stats = launch(mod, "k", 2, 128, Buf(mem, x), out, 0, mem=mem)
    assert stats.races, "the missing barrier was not reported"
    err = capsys.readouterr().err
    assert "racecheck" in err and "read-after-write" in err and "shared memory" in err
    assert "PTX line" in err
    monkeypatch.delenv("LOWLEVEL_EMU_RACECHECK")
    assert launch(mod, "k", 2, 128, Buf(mem, x), out, 0, mem=mem).races == []

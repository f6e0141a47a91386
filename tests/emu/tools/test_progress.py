"""Progress of long emulated launches ("CTAs done of total"), on an interactive terminal only."""
import io
import re
import sys
import types

import numpy as np
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu import tools
from lowlevel.emu.engine import scheduler
from lowlevel.emu.engine.decode import load_ptx

SLOW = HEADER + """
.visible .entry slow(.param .u64 out) {
    .reg .u32 %r<4>; .reg .u64 %d<3>; .reg .pred %p;
    mov.u32 %r0, %ctaid.x; mov.u32 %r1, 0;
LOOP: add.u32 %r1, %r1, 1; setp.lt.u32 %p, %r1, 200; @%p bra LOOP;
    ld.param.u64 %d0, [out]; mul.wide.u32 %d1, %r0, 4; add.u64 %d2, %d0, %d1;
    st.global.u32 [%d2], %r1;
    ret;
}
"""


class Terminal(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_is_on_only_for_a_terminal(monkeypatch):
    monkeypatch.delenv("LOWLEVEL_EMU_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", Terminal(False))
    assert not any(isinstance(t, tools.Progress) for t in tools.enabled())
    monkeypatch.setattr(sys, "stderr", Terminal(True))
    assert any(isinstance(t, tools.Progress) for t in tools.enabled())
    monkeypatch.setenv("LOWLEVEL_EMU_PROGRESS", "0")
    assert not any(isinstance(t, tools.Progress) for t in tools.enabled())


def test_the_watcher_shows_the_batches_done():
    launch = types.SimpleNamespace(name="sgemm", n_ctas=4096, first_cta=0)
    terminal = Terminal(True)
    progress = tools.Progress(stream=terminal, after_s=2.0)
    progress.initialize(launch)
    try:
        progress.poll(progress.started + 1.0)           # not yet 2 s: nothing
        assert terminal.getvalue() == ""
        launch.first_cta = 1536
        progress.poll(progress.started + 2.5)
        assert terminal.getvalue().startswith("\r[emulated GPU] kernel sgemm: 1536 of 4096 CTAs done (")
        assert not terminal.getvalue().endswith("\n")  # one line, rewritten in place
    finally:
        progress.finish(None)
    assert re.search(r"\r\[emulated GPU\] kernel sgemm: 4096 of 4096 CTAs done \(\d+\.\d s\)\n$", terminal.getvalue())


def test_a_launch_that_ran_long_ends_with_its_total(mem, monkeypatch):
    monkeypatch.setattr(scheduler, "MAX_BATCH_LANES", 32)       # one CTA per batch: several batches
    mod = load_ptx(SLOW)
    n = 6
    out = Buf(mem, n=n, dtype=np.uint32)
    terminal = Terminal(True)
    launch(mod, "slow", (n, 1, 1), (32, 1, 1), out, mem=mem, tools=[tools.Progress(stream=terminal, after_s=0.0)])
    assert (out.read() == 200).all()
    assert re.search(rf"kernel slow: {n} of {n} CTAs done \(\d+\.\d s\)\n$", terminal.getvalue())


def test_a_short_launch_prints_nothing(mem):
    mod = load_ptx(SLOW)
    out = Buf(mem, n=4, dtype=np.uint32)
    terminal = Terminal(True)
    launch(mod, "slow", (4, 1, 1), (32, 1, 1), out, mem=mem, tools=[tools.Progress(stream=terminal, after_s=60.0)])
    assert terminal.getvalue() == ""

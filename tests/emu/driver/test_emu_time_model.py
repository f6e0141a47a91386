"""The emulated driver under the time model (LOWLEVEL_EMU_TIMING=model): what only the
emulator can show (tests/cuda/test_modelled_timing.py has what a GPU shows too)."""
import time

import numpy as np
import pytest

from lowlevel import cuda
from lowlevel.cuda.stream import stream_handle
from lowlevel.emu.driver.context import current
from lowlevel.emu.tools.devicetime import ENV


@pytest.fixture
def model(monkeypatch):
    cuda.use_driver("emu")
    monkeypatch.setenv(ENV, "model")
    cuda.reset_device()
    yield
    cuda.synchronize()
    monkeypatch.delenv(ENV)
    cuda.reset_device()


def test_an_op_is_submitted_when_its_call_began(model):
    nbytes = 64 << 20
    dst, host = cuda.mem_alloc(nbytes), np.ones(nbytes, np.uint8)
    s = cuda.Stream(non_blocking=True)
    before = time.perf_counter_ns()
    cuda.memcpy_htod_async(dst, host, s)            # pageable: the call stages the bytes first
    after = time.perf_counter_ns()
    op = current().stream(stream_handle(s)).last.model
    assert before <= op.submit_ns < before + (after - before) / 2
    cuda.synchronize()


def test_a_context_keeps_the_mode_it_was_made_with(model, monkeypatch):
    monkeypatch.delenv(ENV)
    assert cuda.get_driver().timing == "modelled (H200 time model)"      # read as the context was made
    a, b = cuda.Event(), cuda.Event()
    s = cuda.Stream(non_blocking=True)
    a.record(s)
    b.record(s)
    b.synchronize()
    assert a.elapsed_ms(b) == pytest.approx(0.0, abs=1e-3) or a.elapsed_ms(b) > 0
    monkeypatch.setenv(ENV, "model")                 # the fixture's teardown expects it set

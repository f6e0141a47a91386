"""Ctrl-C (KeyboardInterrupt, SystemExit) inside an emulated driver or cuBLAS call: the
callback cannot raise through ctypes, so the call fails and the exception is kept for
the caller to raise again.
"""
import ctypes
import os
import signal
import threading

import pytest
from lowlevel import cuda, emu
from lowlevel.capi.constants import CURESULT
from lowlevel.emu.driver import context as emu_driver

GATE = 20           # a host callback never holds a stream longer, even if a test fails


def hold(stream):
    """Block `stream` behind a host callback until the returned gate is set."""
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE))
    return gate


def emu_only(driver):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")


# --- KeyboardInterrupt inside a call ---------------------------------------------------------

@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_in_a_driver_call_is_kept_for_the_caller(kind):
    def cuTestInterrupted():
        raise kind()
    entry = emu_driver.api(cuTestInterrupted)
    emu_driver.FUNCTIONS.pop("cuTestInterrupted")
    through_c = ctypes.CFUNCTYPE(ctypes.c_int)(entry)      # as the binding layer calls it
    assert emu.pending_interrupt() is None
    assert through_c() == CURESULT["CUDA_ERROR_UNKNOWN"]
    assert isinstance(emu.pending_interrupt(), kind)
    assert emu.pending_interrupt() is None          # taken once


def test_an_interrupt_in_a_cublas_call_is_kept_for_the_caller(driver):
    emu_only(driver)
    from lowlevel.emu.driver import cublas as emu_cublas

    def cublasTestInterrupted():
        raise KeyboardInterrupt
    entry = emu_cublas.api(cublasTestInterrupted)
    emu_cublas.FUNCTIONS.pop("cublasTestInterrupted")
    assert ctypes.CFUNCTYPE(ctypes.c_int)(entry)() != 0
    assert isinstance(emu.pending_interrupt(), KeyboardInterrupt)


def test_ctrl_c_while_synchronizing_is_not_lost(driver):
    emu_only(driver)
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    gate = hold(cuda.Stream.legacy())
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):      # raised again on this side of the C boundary
            cuda.synchronize()
    finally:
        timer.join()
        gate.set()
    assert emu.pending_interrupt() is None
    cuda.synchronize()

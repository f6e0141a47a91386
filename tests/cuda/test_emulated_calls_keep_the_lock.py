"""A call into the emulated driver keeps Python's lock: its functions are Python, so
dropping the lock on the way into C only handed it to another thread (the emulator's
workers) and waited to get it back, at every call. A real library's functions, and C
functions put in place of the emulator's (tools/bench_host.py's stubs), release it."""
import ctypes

import numpy as np
import pytest

import lowlevel as ll
from lowlevel.cuda import bindings


# the flag that PYFUNCTYPE's functions have and CFUNCTYPE's do not: "keep Python's lock"
KEEP_LOCK = ctypes.PYFUNCTYPE(ctypes.c_int)._flags_ & ~ctypes.CFUNCTYPE(ctypes.c_int)._flags_


def keeps_lock(fn) -> bool:
    return bool(type(fn)._flags_ & KEEP_LOCK)


def test_the_emulated_functions_and_their_raw_form_keep_the_lock(driver):
    if driver.kind != "emu":
        pytest.skip("the emulated driver's functions; a real driver's release the lock, as they may block")
    assert keeps_lock(driver.cuDeviceGetCount.cfunc) and keeps_lock(driver.cuLaunchKernel.cfunc)
    assert keeps_lock(bindings.raw_function(driver.cuLaunchKernel.cfunc))
    count = ctypes.c_int()
    assert driver.cuDeviceGetCount.cfunc(ctypes.byref(count)) == 0 and count.value >= 1
    x = ll.tensor(np.arange(8, dtype=np.float32), device="cuda")
    np.testing.assert_array_equal((x + x).numpy(), 2 * np.arange(8, dtype=np.float32))      # a prepared launch


def test_a_c_function_in_the_emulators_place_releases_the_lock():
    libc = ctypes.CDLL(None)
    assert not keeps_lock(libc.abs) and not keeps_lock(bindings.raw_function(libc.abs))
    assert bindings.raw_function(libc.abs)(-3) == 3

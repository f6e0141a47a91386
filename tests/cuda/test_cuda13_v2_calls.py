"""CUDA 13's cuCtxGetDevice_v2, cuCtxSynchronize_v2 (a context named; NULL: the current
one) and cuLaunchHostFunc_v2 (with a CUhostTaskSyncMode), through the driver table."""
import ctypes
import threading

import pytest

from lowlevel import cuda
from lowlevel.capi.prototypes import CUhostFn
from lowlevel.cuda.context import primary_context_handle

GATE_TIMEOUT = 20


def _driver(name: str):
    cuda.synchronize()                                  # makes the context current
    drv = cuda.get_driver()
    if name not in vars(drv):
        pytest.skip(f"{name} is not exported by this driver ({drv.description})")
    return drv


def _held_legacy_stream(delay_s: float):
    """The legacy stream behind a callback that waits for a gate set `delay_s` from now;
    returns a list the callback appends to when it is done."""
    gate, done = threading.Event(), []
    cuda.Stream.legacy().add_callback(lambda: (gate.wait(GATE_TIMEOUT), done.append(True)))
    threading.Timer(delay_s, gate.set).start()
    return done


def test_ctx_get_device_v2(driver):
    drv = _driver("cuCtxGetDevice_v2")
    plain, named, null = ctypes.c_int(-1), ctypes.c_int(-1), ctypes.c_int(-1)
    drv.cuCtxGetDevice(ctypes.byref(plain))
    drv.cuCtxGetDevice_v2(ctypes.byref(null), None)
    drv.cuCtxGetDevice_v2(ctypes.byref(named), primary_context_handle(plain.value))
    assert plain.value == null.value == named.value == cuda.GPU().ordinal
    if drv.kind == "emu":                               # a handle naming nothing
        with pytest.raises(cuda.CudaError) as info:
            drv.cuCtxGetDevice_v2(ctypes.byref(named), 0x1234)
        assert info.value.name == "CUDA_ERROR_INVALID_CONTEXT"


@pytest.mark.parametrize("named", (False, True), ids=("null", "named"))
def test_ctx_synchronize_v2_waits_for_the_context(driver, named):
    drv = _driver("cuCtxSynchronize_v2")
    handle = primary_context_handle(cuda.GPU().ordinal) if named else None
    done = _held_legacy_stream(0.05)
    drv.cuCtxSynchronize_v2(handle)
    assert done == [True]


@pytest.mark.parametrize("mode", (0, 1), ids=("blocking", "spinwait"))
def test_launch_host_func_v2_runs_in_stream_order(driver, mode):
    drv = _driver("cuLaunchHostFunc_v2")
    stream = cuda.Stream(non_blocking=True)
    seen = []
    callbacks = [CUhostFn(lambda data: seen.append(data)) for _ in range(3)]
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE_TIMEOUT))
    for k, fn in enumerate(callbacks):
        drv.cuLaunchHostFunc_v2(stream.handle, ctypes.cast(fn, ctypes.c_void_p), 100 + k, mode)
    assert seen == []                                   # queued behind the gate
    gate.set()
    stream.synchronize()
    assert seen == [100, 101, 102]


def test_launch_host_func_v2_refuses_an_unknown_mode(driver):
    drv = _driver("cuLaunchHostFunc_v2")
    if drv.kind != "emu":
        pytest.skip("what the real driver answers for an unknown mode is not documented")
    fn = CUhostFn(lambda data: None)
    with pytest.raises(cuda.CudaError) as info:
        drv.cuLaunchHostFunc_v2(None, ctypes.cast(fn, ctypes.c_void_p), None, 7)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE"

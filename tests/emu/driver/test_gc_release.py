"""A module or allocation the garbage collector frees is given back to the driver later, by
the next call into the driver from an ordinary thread: the collector may run inside another
driver call or on a driver thread (the emulated GPU's stream threads run Python), and
cuModuleUnload and cuMemFree wait for the streams (which would wait for that very thread)."""
import ctypes
import gc
import pathlib
import threading

import pytest

from lowlevel import cuda
from lowlevel.capi.prototypes import CUhostFn

VECTOR_ADD = (pathlib.Path(__file__).resolve().parents[3] / "ptx" / "vector_add.ptx").read_text()


def _garbage_module_and_memory() -> None:
    """Leave a module and a 1 MiB allocation reachable only through reference cycles."""
    module = cuda.Module.from_ptx(VECTOR_ADD.replace("vector_add", "gc_add"))
    function = module.get_function("gc_add")
    function.cycle = module.cycle = (module, function)
    memory = cuda.mem_alloc(1 << 20)
    memory.cycle = memory


def test_a_collection_on_a_stream_thread_does_not_deadlock(driver):
    if driver.kind != "emu":
        pytest.skip("the emulated GPU's stream threads are the ones that run Python")
    cuda.synchronize()
    gc.collect()
    gc.disable()                              # the collection happens where the test says
    try:
        free_before = cuda.mem_get_info()[0]
        _garbage_module_and_memory()
        # A bare host function (not Stream.add_callback, which marks its thread): the
        # collection runs on the stream's thread as one during a kernel would.
        collect = CUhostFn(lambda _: gc.collect())
        driver.cuLaunchHostFunc(0, ctypes.cast(collect, ctypes.c_void_p), None)
        done = threading.Event()
        waiter = threading.Thread(target=lambda: (cuda.synchronize(), done.set()), daemon=True)
        waiter.start()
        assert done.wait(20), "cuCtxSynchronize never returned: the stream thread deadlocked"
        assert cuda.mem_get_info()[0] == free_before     # given back by this call into the driver
    finally:
        gc.enable()

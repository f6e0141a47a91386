"""ensure_context keeps what it found per thread, and finds it again after whatever could
change it: a context reset on another thread, a release queued by a finalizer (still run at
the next call), the device the thread chose."""
import ctypes
import threading

import numpy as np
from helpers.memory import download, upload

from lowlevel import cuda
from lowlevel.cuda import context


def _driver_current_context(drv) -> int:
    handle = ctypes.c_void_p()
    drv.cuCtxGetCurrent(ctypes.byref(handle))
    return handle.value or 0


def test_a_thread_sees_a_reset_made_on_another_thread(driver):
    """The thread's ensure_context found the context before the reset; after it, the same
    thread gets the new generation, made current on it, and its work runs."""
    ready, reset, seen, errors = threading.Event(), threading.Event(), [], []

    def work():
        try:
            drv, ctx = context.ensure_context()
            seen.append((ctx.generation, ctx.handle))
            ready.set()
            reset.wait(30)
            drv, ctx = context.ensure_context()
            seen.append((ctx.generation, ctx.handle, _driver_current_context(drv)))
            d = upload(np.arange(8, dtype=np.float32))
            seen.append(download(d, 8))
        except Exception as e:          # reported below, in the test's thread
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    ready.wait(30)
    cuda.reset_device()
    reset.set()
    t.join(60)
    assert not errors
    (gen, _), (gen_after, handle_after, current), values = seen
    assert gen_after == gen + 1 and current == handle_after
    np.testing.assert_array_equal(values, np.arange(8, dtype=np.float32))


def test_a_queued_release_runs_at_the_next_call(driver):
    context.ensure_context()
    context.ensure_context()                           # the kept answer
    ran = []
    context.release_later(lambda: ran.append(True))
    context.ensure_context()
    assert ran == [True] and context.pending_releases() == 0


def test_choosing_the_device_a_thread_has_already_is_not_a_change(driver):
    drv, ctx = context.ensure_context()
    cuda.GPU(ctx.ordinal).set_current()
    assert context.ensure_context() == (drv, ctx) and _driver_current_context(drv) == ctx.handle

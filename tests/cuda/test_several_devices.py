"""Several devices: each with its own memory, primary context and streams; peer access;
copies between devices; unified addresses that name their owner. The emulated GPU presents
two devices with LOWLEVEL_EMU_DEVICES=2, read once at cuInit: the checks run in a fresh
interpreter (this file run as a program, helpers/two_devices.py), on every driver present
that has two devices."""
import ctypes

import numpy as np
from helpers.two_devices import main, run_checks

from lowlevel import cuda, kernels


def test_several_devices(driver):
    run_checks(__file__, driver.kind, [name for name in globals() if name.startswith("check_")])


# ---- the checks, run in the fresh interpreter -------------------------------------------------
def on(device: int):
    cuda.GPU(device).set_current()


def check_page_locked_memory_is_reached_by_every_device():
    """Unified addressing: memory from cuMemHostAlloc while device 0 is current is written by
    a kernel of device 1 at its host address, with no peer access enabled (it runs first: later checks enable it)."""
    rng = np.random.default_rng()
    n = int(rng.integers(1, 4000))
    on(0)
    cuda.synchronize()                          # device 0's context is current from here
    drv = cuda.get_driver()
    p = ctypes.c_void_p()
    drv.cuMemHostAlloc(ctypes.byref(p), 4 * n, 0)
    host = np.ctypeslib.as_array((ctypes.c_float * n).from_address(p.value))
    host[:] = np.nan
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    on(1)
    da, db = cuda.mem_alloc(4 * n), cuda.mem_alloc(4 * n)
    cuda.memcpy_htod(da, x)
    cuda.memcpy_htod(db, y)
    kernels.module("vector_add").get_function("vector_add").launch(
        grid=(n + 255) // 256, block=256, args=(da, db, p.value, n))
    cuda.synchronize()
    np.testing.assert_array_equal(host, (x.astype(np.float64) + y).astype(np.float32))
    drv.cuMemFreeHost(p.value)                  # from device 1's context: it is portable


def check_each_device_has_its_own_memory():
    assert cuda.device_count() >= 2
    on(0)
    a = cuda.mem_alloc(1 << 20)
    on(1)
    b = cuda.mem_alloc(1 << 20)
    assert a.ptr + a.size <= b.ptr or b.ptr + b.size <= a.ptr        # unified: no overlap
    for alloc, ordinal in ((a, 0), (b, 1)):
        info = cuda.pointer_attributes(alloc.ptr + 100)               # asked from device 1
        assert info.device_ordinal == ordinal and info.range_start == alloc.ptr
        assert info.context == cuda.context.primary_context_handle(ordinal)
    assert cuda.context.primary_context_handle(0) != cuda.context.primary_context_handle(1)
    on(0)


def check_kernels_run_on_the_current_device():
    rng = np.random.default_rng(1)
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for device in (1, 0):
        on(device)
        da, db, dc = (cuda.mem_alloc(4 * n) for _ in range(3))
        cuda.memcpy_htod(da, x)
        cuda.memcpy_htod(db, y)
        s = cuda.Stream(priority=-1)            # a stream of this device
        kernels.module("vector_add").get_function("vector_add").launch(
            grid=(n + 255) // 256, block=256, args=(da, db, dc, n), stream=s)
        out = np.full(n, np.nan, np.float32)
        cuda.memcpy_dtoh_async(out, dc, s)
        s.synchronize()
        np.testing.assert_array_equal(out, x + y)
        assert cuda.pointer_attributes(dc).device_ordinal == device


def check_peer_access():
    assert not cuda.can_access_peer(0, 0)
    if cuda.get_driver().kind == "emu":
        assert cuda.can_access_peer(0, 1) and cuda.can_access_peer(1, 0)
    if not cuda.can_access_peer(1, 0):
        return
    on(1)
    cuda.enable_peer_access(0)
    for again, code in ((cuda.enable_peer_access, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"),):
        try:
            again(0)
        except cuda.CudaError as e:
            assert e.name == code, e
        else:
            raise AssertionError("enabling peer access twice succeeded")
    cuda.disable_peer_access(0)
    try:
        cuda.disable_peer_access(0)
    except cuda.CudaError as e:
        assert e.name == "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", e
    else:
        raise AssertionError("disabling peer access that was not enabled succeeded")
    drv = cuda.get_driver()
    code = drv.cuCtxEnablePeerAccess.unchecked(cuda.context.primary_context_handle(1), 0)
    assert code == 201, code                    # CUDA_ERROR_INVALID_CONTEXT: the current context itself
    on(0)


def check_copies_between_devices():
    rng = np.random.default_rng(2)
    host = rng.integers(0, 1 << 31, 4096).astype(np.int32)
    on(0)
    a = cuda.mem_alloc(host.nbytes)
    cuda.memcpy_htod(a, host)
    on(1)
    b = cuda.mem_alloc(host.nbytes)
    cuda.memset_d8(b, 0xFF, host.nbytes)
    cuda.memcpy_peer(b, a, host.nbytes)                     # synchronous
    back = np.zeros_like(host)
    cuda.memcpy_dtoh(back, b)
    np.testing.assert_array_equal(back, host)
    on(0)
    c = cuda.mem_alloc(host.nbytes)
    s = cuda.Stream()
    cuda.memcpy_peer(c.ptr, b.ptr + 64, host.nbytes - 64, dst_device=0, src_device=1, stream=s)
    s.synchronize()
    back = np.zeros(len(host) - 16, np.int32)
    cuda.memcpy_dtoh(back, c)
    np.testing.assert_array_equal(back, host[16:])
    if cuda.get_driver().kind == "emu":      # past the end of the source: refused, nothing copied
        drv = cuda.get_driver()
        code = drv.cuMemcpyPeer.unchecked(c.ptr, cuda.context.primary_context_handle(0), b.ptr + 64,
                                           cuda.context.primary_context_handle(1), host.nbytes)
        assert code == 1, code                # CUDA_ERROR_INVALID_VALUE


def check_limits_and_priorities_are_per_device():
    on(1)
    cuda.set_limit("STACK_SIZE", 8192)
    on(0)
    assert cuda.get_limit("STACK_SIZE") != 8192             # device 0's context has its own
    on(1)
    assert cuda.get_limit("STACK_SIZE") >= 8192
    on(0)
    assert cuda.GPU(0).uuid != cuda.GPU(1).uuid
    assert cuda.GPU(0).pci_bus_id != cuda.GPU(1).pci_bus_id
    out = ctypes.c_int()
    assert cuda.get_driver().cuDeviceGet.unchecked(ctypes.byref(out), 2 if cuda.device_count() == 2 else 99) == 101


def _driver_current_context() -> int:
    handle = ctypes.c_void_p()
    cuda.get_driver().cuCtxGetCurrent(ctypes.byref(handle))
    return handle.value or 0


def check_the_current_device_stays_current_after_a_release_on_another():
    """Freeing device 1's memory while device 0 is current makes device 1's context current
    for the free; the next call into lowlevel makes device 0's current again (what
    ensure_context found before is not taken as still true), and its work runs there."""
    on(1)
    other = cuda.mem_alloc(4096)
    on(0)
    mine = cuda.mem_alloc(4096)
    _, ctx = cuda.context.ensure_context()
    assert _driver_current_context() == ctx.handle
    other.free()                                        # device 1's context, made current to free
    assert _driver_current_context() == cuda.context.primary_context_handle(1)
    drv, again = cuda.context.ensure_context()
    assert again is ctx and _driver_current_context() == ctx.handle
    cuda.memset_d8(mine, 7, 4096)
    cuda.synchronize()
    assert cuda.pointer_attributes(mine.ptr).device_ordinal == 0
    on(1)
    assert cuda.context.ensure_context()[1].ordinal == 1 and _driver_current_context() != ctx.handle
    on(0)



if __name__ == "__main__":
    main(globals())

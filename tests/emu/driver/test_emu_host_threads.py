"""Host threads calling the emulated driver at once: atomic submissions with the legacy
stream's implicit dependencies, distinct handles, instruction counts that add up, bounds
checks while other threads allocate, a context reset under other threads, and cuBLAS
handles that die with their context.
"""
import ctypes
import sys
import threading
import time

import numpy as np
import pytest
from helpers.emu_engine import HEADER
from lowlevel import cuda, emu
from lowlevel.emu.driver import context as emu_driver
from lowlevel.emu.engine.memory import DeviceMemory

GATE = 20           # a host callback never holds a stream longer, even if a test fails


def hold(stream):
    """Block `stream` behind a host callback until the returned gate is set."""
    gate = threading.Event()
    stream.add_callback(lambda: gate.wait(GATE))
    return gate


def emu_only(driver):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")


@pytest.fixture
def fast_switching():
    """Switch host threads as often as possible, so that races show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


# --- host threads submitting at once ---------------------------------------------------------

def test_a_submission_and_the_legacy_streams_implicit_dependencies_are_atomic(driver, monkeypatch):
    """Thread A queues on a blocking stream while thread B queues on the legacy stream:
    whichever goes second must depend on the other, never neither."""
    emu_only(driver)
    blocking = cuda.Stream()            # makes the context current (this may be the first test)
    ctx = emu_driver.current()
    s = ctx.stream(blocking.handle)
    gates = [hold(blocking), hold(cuda.Stream.legacy())]      # nothing completes meanwhile
    real = ctx.implicit_deps
    inside = threading.Event()

    def slow(stream):
        deps = real(stream)
        if stream is s:
            inside.set()
            time.sleep(0.3)         # thread A between its dependencies and its queue
        return deps
    monkeypatch.setattr(ctx, "implicit_deps", slow)
    box = {}
    a = threading.Thread(target=lambda: box.update(a=ctx.submit(s, lambda: None, "A")))
    a.start()
    assert inside.wait(5)
    b = ctx.submit(ctx.legacy, lambda: None, "B")
    a.join()
    monkeypatch.undo()
    for g in gates:
        g.set()
    cuda.synchronize()
    assert box["a"] in b.deps or b in box["a"].deps


def test_handles_made_by_many_threads_are_distinct(driver, fast_switching):
    emu_only(driver)
    ctx = emu_driver.current()
    handles = []

    def make():
        handles.extend(ctx.new_handle() for _ in range(2000))
    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(handles)) == len(handles)


COUNT_PTX = HEADER + """
.visible .entry count(.param .u64 out) {
  .reg .u32 %r<3>; .reg .u64 %rd<3>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd1, %rd1, %rd2;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def test_instruction_counts_of_concurrent_launches_add_up(driver, fast_switching):
    emu_only(driver)
    f = cuda.Module.from_ptx(COUNT_PTX).get_function("count")
    out = cuda.mem_alloc(4 * 64)
    f.launch(1, 64, (out,))
    cuda.synchronize()
    before = emu.thread_instructions()
    f.launch(1, 64, (out,))
    cuda.synchronize()
    one = emu.thread_instructions() - before
    streams = [cuda.Stream(non_blocking=True) for _ in range(4)]
    before = emu.thread_instructions()
    for _ in range(25):
        for s in streams:
            f.launch(1, 64, (out,), stream=s)
    cuda.synchronize()
    assert emu.thread_instructions() - before == 100 * one


# --- the allocation table read by other threads --------------------------------------------

def test_bounds_checks_hold_while_other_threads_allocate(fast_switching):
    mem = DeviceMemory(64 << 20)
    a, b = mem.alloc(4096), mem.alloc(4096)
    addrs = np.array([a, b, a + 4092, b + 4092], np.uint64)       # two allocations: the full check
    stop = threading.Event()
    errors = []

    def churn():
        while not stop.is_set():
            ptrs = [mem.alloc(512 * (i + 1)) for i in range(20)]
            for p in ptrs:
                mem.free(p)

    def count():
        try:
            while not stop.is_set():
                mem.used()
        except Exception as e:      # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=churn), threading.Thread(target=count)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            mem.offsets(addrs, 4)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []


# --- a reset context, other threads, cuBLAS handles -----------------------------------------

def test_a_thread_whose_context_was_reset_reaches_the_fresh_one(driver):
    emu_only(driver)
    handle = ctypes.c_void_p()
    emu_driver.FUNCTIONS["cuCtxGetCurrent"](ctypes.addressof(handle))
    ready, reset_done, result = threading.Event(), threading.Event(), {}

    def other():
        emu_driver.FUNCTIONS["cuCtxSetCurrent"](handle.value)
        ready.set()
        reset_done.wait(10)
        ptr = ctypes.c_uint64()
        result["code"] = emu_driver.FUNCTIONS["cuMemAlloc"](ctypes.addressof(ptr), 256)
        result["ptr"] = ptr.value
        current = ctypes.c_void_p()
        emu_driver.FUNCTIONS["cuCtxGetCurrent"](ctypes.addressof(current))
        result["current"] = current.value
    t = threading.Thread(target=other)
    t.start()
    assert ready.wait(10)
    cuda.reset_device()
    reset_done.set()
    t.join()
    ctx = emu_driver.current()
    assert result["code"] == 0 and result["current"] == handle.value
    assert ctx.memory.is_allocation(result["ptr"])          # in the live context's memory
    assert emu_driver.FUNCTIONS["cuMemFree"](result["ptr"]) == 0


def test_a_cublas_handle_dies_with_its_context(driver):
    emu_only(driver)
    from lowlevel.capi.cublas_constants import STATUS
    from lowlevel.emu.driver import cublas as emu_cublas
    h = ctypes.c_void_p()
    assert emu_cublas.FUNCTIONS["cublasCreate_v2"](ctypes.addressof(h)) == 0
    assert emu_cublas.FUNCTIONS["cublasSetStream_v2"](h.value, 0) == 0
    cuda.reset_device()
    assert emu_cublas.FUNCTIONS["cublasSetStream_v2"](h.value, 0) == STATUS["CUBLAS_STATUS_NOT_INITIALIZED"]
    assert emu_cublas.FUNCTIONS["cublasDestroy_v2"](h.value) == STATUS["CUBLAS_STATUS_NOT_INITIALIZED"]

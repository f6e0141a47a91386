"""Review fixes of the emulated GPU: destroyed streams, Ctrl-C inside a call, races between
host threads, PTX for a newer GPU, uninitialised shared/local memory, the warp member
mask, re-recorded events, the allocation table under threads, reset contexts and cuBLAS
handles.

Tests that take the `driver` fixture state what the real driver documents (they run on
the GPU too where there is one); the others look inside the emulator.
"""
import ctypes
import os
import signal
import struct
import sys
import threading
import time

import numpy as np
import pytest

from engine_helpers import HEADER, Buf, launch
from lowlevel import cuda
from lowlevel.capi.constants import CURESULT
from lowlevel import emu
from lowlevel.emu.driver import context as emu_driver
from lowlevel.capi import images
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError
from lowlevel.emu.engine.memory import DeviceMemory
from lowlevel.emu.engine.decode import load_ptx

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


# --- 1. work on a destroyed stream is not forgotten -----------------------------------------

def test_ctx_synchronize_waits_for_the_work_of_a_destroyed_stream(driver):
    stream = cuda.Stream()
    gate = hold(stream)
    done = []
    stream.add_callback(lambda: done.append("stream"))
    stream.destroy()                    # returns at once; the queued work still runs
    threading.Timer(0.2, gate.set).start()
    cuda.synchronize()
    assert done == ["stream"]


def test_legacy_stream_orders_after_a_destroyed_blocking_stream(driver):
    stream = cuda.Stream()              # blocking: ordered against the legacy stream
    gate = hold(stream)
    order = []
    stream.add_callback(lambda: order.append("stream"))
    stream.destroy()
    legacy = cuda.Stream.legacy()
    legacy.add_callback(lambda: order.append("legacy"))
    time.sleep(0.05)
    gate.set()
    legacy.synchronize()
    assert order == ["stream", "legacy"]


# --- 2. KeyboardInterrupt inside a call ---------------------------------------------------------

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


# --- 3. host threads submitting at once ---------------------------------------------------------

def test_a_submission_and_the_legacy_streams_implicit_dependencies_are_atomic(driver, monkeypatch):
    """Thread A queues on a blocking stream while thread B queues on the legacy stream:
    whichever goes second must depend on the other, never neither."""
    emu_only(driver)
    ctx = emu_driver.current()
    blocking = cuda.Stream()
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


# --- 4. PTX for a newer GPU ---------------------------------------------------------------------

def _ptx(target):
    return f".version 8.0\n.target {target}\n.address_size 64\n.visible .entry k() {{ ret; }}\n"


@pytest.mark.parametrize("cc, target, runs", [
    ("8.0", "sm_80", True), ("8.0", "sm_75", True), ("8.0", "sm_86", False),
    ("8.0", "sm_90", False), ("8.0", "sm_90a", False), ("9.0", "sm_90a", True),
    ("10.0", "sm_90", True), ("10.0", "sm_90a", False), ("9.0", "sm_100f", False),
])
def test_ptx_for_a_newer_or_another_specific_gpu_is_refused_at_load(driver, monkeypatch, cc, target, runs):
    emu_only(driver)
    monkeypatch.setenv("LOWLEVEL_EMU_CC", cc)
    if runs:
        cuda.Module.from_ptx(_ptx(target)).get_function("k").launch(1, 1, ())
        cuda.synchronize()
        return
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(_ptx(target))
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert target in info.value.log and f"sm_{cc.replace('.', '')}" in info.value.log


def _fatbin(*entries) -> bytes:
    """A fatbin of uncompressed PTX entries (arch, text), laid out as images.py reads it."""
    body = b""
    for arch, text in entries:
        payload = text.encode() + b"\0"
        head = bytearray(72)
        struct.pack_into("<HHIQ", head, 0, images.KIND_PTX, 0x101, 72, len(payload))
        struct.pack_into("<I", head, 28, arch)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", images.FATBIN_MAGIC, 1, 16, len(body)) + body


def test_a_fatbin_gives_the_newest_ptx_the_device_can_run():
    data = _fatbin((75, _ptx("sm_75")), (90, _ptx("sm_90")), (80, _ptx("sm_80")))
    assert ".target sm_80" in images.ptx_from_fatbin(data, 86)
    assert ".target sm_90" in images.ptx_from_fatbin(data, 90)
    assert ".target sm_75" in images.ptx_from_fatbin(data, 75)
    with pytest.raises(images.ImageError) as info:
        images.ptx_from_fatbin(data, 70)
    assert info.value.code_name == "CUDA_ERROR_NO_BINARY_FOR_GPU" and "sm_75" in str(info.value)
    specific = _fatbin((80, _ptx("sm_80")), (90, _ptx("sm_90a")))
    assert ".target sm_90a" in images.ptx_from_fatbin(specific, 90)
    assert ".target sm_80" in images.ptx_from_fatbin(specific, 100)   # sm_90a is for sm_90 only


def test_a_fatbin_whose_ptx_is_all_too_new_is_refused_at_load(driver, monkeypatch, tmp_path):
    emu_only(driver)
    monkeypatch.setenv("LOWLEVEL_EMU_CC", "8.0")
    path = tmp_path / "k.fatbin"
    path.write_bytes(_fatbin((90, _ptx("sm_90")), (100, _ptx("sm_100"))))
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.load(path)
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    path.write_bytes(_fatbin((80, _ptx("sm_80")), (90, _ptx("sm_90"))))
    cuda.Module.load(path).get_function("k").launch(1, 1, ())
    cuda.synchronize()


# --- 5. uninitialised shared and local memory -------------------------------------------------

UNINIT_PTX = HEADER + """
.visible .entry k(.param .u64 out) {
  .shared .align 8 .b8 s[64];
  .local .align 8 .b8 l[16];
  .reg .u32 %r<3>; .reg .f32 %f1; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 12;
  add.u64 %rd1, %rd1, %rd2;
  mul.wide.u32 %rd3, %r1, 2;
  ld.shared.u32 %r2, [s];
  st.global.u32 [%rd1], %r2;
  ld.local.u32 %r2, [l+4];
  st.global.u32 [%rd1+4], %r2;
  ld.shared.f32 %f1, [s+32];
  st.global.f32 [%rd1+8], %f1;
  ret;
}
"""


def test_uninitialised_shared_and_local_memory_is_poison(mem):
    mod = load_ptx(UNINIT_PTX)
    out = Buf(mem, np.zeros(3 * 64, np.uint32))
    launch(mod, "k", 1, 64, out, mem=mem)
    got = out.read().reshape(64, 3)
    assert (got[:, :2] == 0xFFFFFFFF).all()                     # -1 as an integer
    assert np.isnan(got[:, 2].view(np.float32)).all()           # NaN as a float
    out.free()


# --- 6. the warp member mask ------------------------------------------------------------------

WARP_OPS = {
    "shfl": "shfl.sync.idx.b32 %r3, %r1, 0, 31, {mask};",
    "vote": "vote.sync.ballot.b32 %r3, %p2, {mask};",
    "match": "match.any.sync.b32 %r3, %r1, {mask};",
    "redux": "redux.sync.add.u32 %r3, %r1, {mask};",
    "bar.warp": "bar.warp.sync {mask}; mov.u32 %r3, 7;",
}


def warp_kernel(op, mask="0xffffffff", split=32, guard="", after_split="ret;"):
    """Lanes below `split` run `op` (lane ids in %r1, %p2 = lane is odd); the others go to
    `after_split` (exit, or elsewhere and back)."""
    return HEADER + f"""
.visible .entry w(.param .u64 out) {{
  .reg .u32 %r<6>; .reg .u64 %rd<4>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r4, %r1, 1;
  setp.ne.u32 %p2, %r4, 0;
  setp.lt.u32 %p3, %r1, 8;
  mov.u32 %r3, 0;
  setp.ge.u32 %p1, %r1, {split};
  @%p1 bra OTHER;
  {guard}{WARP_OPS[op].format(mask=mask)}
  bra STORE;
OTHER:
  {after_split}
STORE:
  mul.wide.u32 %rd2, %r1, 4;
  add.u64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
}}
"""


def run_warp(mem, text, block=32, grid=1):
    out = Buf(mem, n=block * grid, dtype=np.uint32)
    try:
        launch(load_ptx(text), "w", grid, block, out, mem=mem)
        return out.read()
    finally:
        out.free()


@pytest.mark.parametrize("op", WARP_OPS)
def test_converged_full_warp_with_the_full_mask_runs(mem, op):
    run_warp(mem, warp_kernel(op))


@pytest.mark.parametrize("op", WARP_OPS)
def test_lanes_that_exited_may_be_named_in_the_mask(mem, op):
    run_warp(mem, warp_kernel(op, split=16))                          # lanes 16..31 exit
    run_warp(mem, warp_kernel(op, split=32), block=20)                # a partial warp


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_mask_naming_only_the_lanes_that_run_is_fine(mem, op):
    run_warp(mem, warp_kernel(op, mask="0x0000ffff", split=16, after_split="mov.u32 %r3, 1;"))


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_lane_missing_from_its_own_mask_faults(mem, op):
    with pytest.raises(KernelFault) as info:
        run_warp(mem, warp_kernel(op, mask="0x0000ffff"))
    msg = str(info.value)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "w:" in msg and "block (0,0,0)" in msg and "warp 0, lane 16" in msg
    assert "PTX line" in msg and "0x0000ffff" in msg and "own bit" in msg


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_named_lane_that_is_elsewhere_faults(mem, op):
    # lanes 16..31 have not exited: they run `mov` at OTHER and come back to STORE
    with pytest.raises(KernelFault) as info:
        run_warp(mem, warp_kernel(op, split=16, after_split="mov.u32 %r3, 1;"), block=64)
    msg = str(info.value)
    assert "block (0,0,0), warp 0, lane 0" in msg and "0xffffffff" in msg
    assert "lanes [16, 17," in msg and "31]" in msg


@pytest.mark.parametrize("op", WARP_OPS)
def test_a_named_lane_whose_guard_is_false_faults(mem, op):
    with pytest.raises(KernelFault) as info:
        run_warp(mem, warp_kernel(op, guard="@%p3 "))           # lanes 8..31: guard false
    assert "lanes [8, 9," in str(info.value)


def test_lanes_naming_each_other_with_different_masks_fault(mem):
    text = warp_kernel("shfl", mask="%r5").replace(
        "mov.u32 %r3, 0;", "mov.u32 %r3, 0;\n  selp.u32 %r5, 0xffffffff, 0xffff0000, %p3;")
    # lanes 0..7 name every lane with 0xffffffff; lanes 8..31 use 0xffff0000
    with pytest.raises(KernelFault) as info:
        run_warp(mem, text)
    assert "another mask" in str(info.value)
    consistent = warp_kernel("shfl", mask="%r5").replace(
        "mov.u32 %r3, 0;", "mov.u32 %r3, 0;\n  selp.u32 %r5, 0xff, 0xffffff00, %p3;")
    run_warp(mem, consistent)                       # two groups, each with its own mask


# --- 7. re-recording an event ---------------------------------------------------------------

def test_a_superseded_record_does_not_change_the_events_time(driver):
    a, b = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    start, ev = cuda.Event(), cuda.Event()
    start.record(b)
    start.synchronize()
    gate = hold(a)
    ev.record(a)                    # pending behind the gate
    ev.record(b)                    # supersedes it; b is idle
    ev.synchronize()
    first = start.elapsed_ms(ev)
    time.sleep(0.1)
    gate.set()
    a.synchronize()
    assert start.elapsed_ms(ev) == first


# --- 8. the allocation table read by other threads --------------------------------------------

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


# --- 9. a reset context, other threads, cuBLAS handles -----------------------------------------

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


# --- 10. the cache-policy operand, one way for every memory instruction ------------------------

CACHE_HINT_PTX = HEADER + """
.visible .entry h(.param .u64 buf) {
  .shared .align 16 .b8 s[16];
  .reg .u32 %r<4>; .reg .u64 %rd<4>;
  ld.param.u64 %rd1, [buf];
  createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;
  ld.global.L2::cache_hint.u32 %r1, [%rd1], %rd2;
  add.u32 %r1, %r1, 1;
  st.global.L2::cache_hint.u32 [%rd1+4], %r1, %rd2;
  atom.global.add.L2::cache_hint.u32 %r2, [%rd1+8], 5, %rd2;
  cp.async.ca.shared.global.L2::cache_hint [s], [%rd1], 4, %rd2;
  cp.async.wait_all;
  ld.shared.u32 %r3, [s];
  st.global.u32 [%rd1+12], %r3;
  ret;
}
"""


def test_the_cache_policy_operand_is_read_and_ignored(mem):
    try:
        mod = load_ptx(CACHE_HINT_PTX)
    except Exception as e:          # noqa: BLE001
        if "createpolicy" not in str(e):
            raise
        mod = load_ptx(CACHE_HINT_PTX.replace(
            "createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;", "mov.u64 %rd2, 0;"))
    buf = Buf(mem, np.array([41, 0, 10, 0], np.uint32))
    launch(mod, "h", 1, 1, buf, mem=mem)
    assert buf.read().tolist() == [41, 42, 15, 41]
    buf.free()
    for ins in ("ld.global.L2::cache_hint.u32 %r1, [%rd1];",
                "st.global.L2::cache_hint.u32 [%rd1], %r1;"):
        text = HEADER + (".visible .entry e(.param .u64 buf) {\n .reg .u32 %r1; .reg .u64 %rd1;\n"
                         " ld.param.u64 %rd1, [buf];\n mov.u32 %r1, 0;\n " + ins + "\n ret;\n}\n")
        with pytest.raises(PtxError, match="cache policy"):
            load_ptx(text)

"""The emulated driver's stream and event functions, and cuLaunchHostFunc."""
import ctypes
import threading

from ...capi.prototypes import CUhostFn
from .capture import refuse_capturing, refuse_unsafe
from .context import LEGACY_STREAM_HANDLES, PER_THREAD_STREAM_HANDLE, Context, api, current, forget_handle, live_contexts, lookup_handle
from .entry import write_out
from .errors import EmuError
from .limits import LEAST_PRIORITY, clamp_priority
from .queues import Event, Stream
from ..tools.timemodel import timed_host


# ---- streams --------------------------------------------------------------------------------
def _create(stream_out, flags, priority: int) -> None:
    ctx = current()
    if flags & ~Stream.NON_BLOCKING:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown stream flags {flags:#x}")
    if not stream_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL stream pointer")
    handle = ctx.new_handle()
    stream = Stream(ctx, flags, f"stream-{handle:#x}")
    # Out of range is clamped, as the driver documents; the priority is recorded (limits.py).
    stream.priority = clamp_priority(priority)
    ctx.add_stream(handle, stream)
    write_out(ctypes.c_void_p, stream_out, handle)


@api
def cuStreamCreate(stream_out, flags):
    _create(stream_out, flags, LEAST_PRIORITY)


@api
def cuStreamCreateWithPriority(stream_out, flags, priority):
    _create(stream_out, flags, priority)


@api
def cuStreamGetPriority(handle, priority_out):
    stream = current().stream(handle)
    write_out(ctypes.c_int, priority_out, getattr(stream, "priority", LEAST_PRIORITY))


@api
def cuStreamGetFlags(handle, flags_out):
    stream = current().stream(handle)
    write_out(ctypes.c_uint, flags_out, stream.flags)


@api
def cuStreamDestroy(handle):
    ctx = current(check_sticky=False)
    if handle in (*LEGACY_STREAM_HANDLES, PER_THREAD_STREAM_HANDLE):
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown stream handle {handle:#x}")
    # The driver returns at once and lets queued work finish; close() drains in its thread.
    # Until it is done, that work still counts for cuCtxSynchronize and the legacy stream.
    stream = ctx.retire_stream(handle)
    threading.Thread(target=stream.close, daemon=True).start()


@api
def cuStreamSynchronize(handle):
    ctx = current()
    stream = _stream_of_any_context(ctx, handle)
    refuse_capturing(stream, "cuStreamSynchronize")
    stream.synchronize()
    current()


@api
def cuStreamQuery(handle):
    ctx = current()
    stream = _stream_of_any_context(ctx, handle)
    refuse_capturing(stream, "cuStreamQuery")
    if not stream.idle():
        raise EmuError("CUDA_ERROR_NOT_READY")


@api
def cuStreamWaitEvent(stream_handle, event_handle, flags):
    ctx = current()
    stream = ctx.stream(stream_handle)
    event = _event_of_any_context(ctx, event_handle)
    if flags not in (0,):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown cuStreamWaitEvent flags {flags:#x}")
    if event.captured is not None or stream.capture is not None:
        _wait_in_capture(ctx, stream, event)
        return
    item = event.item                   # the record current now, even if re-recorded meanwhile
    # Under the time model a done record may still end later in modelled time: wait anyway.
    if item is not None and (not item.done.is_set() or ctx.timeline is not None):
        ctx.submit(stream, lambda: None, "wait event", extra_deps=[item])


def _wait_in_capture(ctx: Context, stream, event: Event) -> None:
    """A wait that involves a capture: a stream waiting for an event recorded in one joins
    it; a capturing stream may not wait for work outside its capture."""
    with ctx.lock:
        if event.captured is None:
            stream.capture.invalidate("a capturing stream waited for an event recorded outside the capture")
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
                           "cuStreamWaitEvent: the event was not recorded in the stream's capture")
        capture, nodes = event.captured
        if capture not in ctx.captures:
            raise EmuError("CUDA_ERROR_CAPTURED_EVENT",
                           "cuStreamWaitEvent: the event was recorded in a capture that has ended")
        if stream.capture is not None and stream.capture is not capture:
            stream.capture.invalidate("cuStreamWaitEvent merged two captures")
            capture.invalidate("cuStreamWaitEvent merged two captures")
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_MERGE",
                           "cuStreamWaitEvent: the event belongs to another capture sequence")
        if stream is ctx.legacy:
            capture.invalidate("the legacy stream waited for a captured event")
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "the legacy stream cannot join a capture")
        capture.check_valid()
        capture.join(stream, nodes)


@api
def cuLaunchHostFunc(stream_handle, fn, user_data):
    _launch_host_func(stream_handle, fn, user_data)


HOST_TASK_SYNC_MODES = (0, 1)           # CU_HOST_TASK_BLOCKING, CU_HOST_TASK_SPINWAIT


@api
def cuLaunchHostFunc_v2(stream_handle, fn, user_data, sync_mode):
    # How the driver's thread waits for the next host task: no difference to what runs
    # when, so both modes queue the function as cuLaunchHostFunc does.
    if sync_mode not in HOST_TASK_SYNC_MODES:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUhostTaskSyncMode {sync_mode:#x}")
    _launch_host_func(stream_handle, fn, user_data)


def _launch_host_func(stream_handle, fn, user_data) -> None:
    ctx = current()
    stream = ctx.stream(stream_handle)
    if not fn:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL host function")
    callback = CUhostFn(fn)
    ctx.submit(stream, timed_host(lambda: callback(user_data)), "host function")


# ---- events ---------------------------------------------------------------------------------
def _event(ctx: Context, handle: int) -> Event:
    return lookup_handle(ctx.events, handle, "event")


def _of_any_context(ctx: Context, handle: int, table: str):
    """What `handle` names in the `table` ("streams" or "events") of any live context, the
    current one first: a handle names its object whichever context is current (a thread
    may wait for, query, or wait on a stream or event of another device, as with a GPU);
    None if no context has it."""
    for other in (ctx, *(c for c in live_contexts() if c is not ctx)):
        found = getattr(other, table).get(handle)
        if found is not None:
            return found
    return None


def _stream_of_any_context(ctx: Context, handle: int):
    """The stream `handle` names; the legacy handles name the current context's legacy stream."""
    return _of_any_context(ctx, handle, "streams") or ctx.stream(handle)   # INVALID_HANDLE if none


def _event_of_any_context(ctx: Context, handle: int) -> Event:
    """cuStreamWaitEvent's event "may be from a different context or device than stream"."""
    return _of_any_context(ctx, handle, "events") or _event(ctx, handle)   # INVALID_HANDLE if none


def _uncaptured(event: Event, call: str) -> Event:
    if event.captured is not None:
        raise EmuError("CUDA_ERROR_CAPTURED_EVENT", f"{call}: the event was last recorded in a stream capture")
    return event


@api
def cuEventCreate(event_out, flags):
    ctx = current()
    if flags & ~(0x1 | 0x2 | 0x4):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown event flags {flags:#x}")
    handle = ctx.new_handle()
    ctx.events[handle] = Event(flags)
    write_out(ctypes.c_void_p, event_out, handle)


@api
def cuEventDestroy(handle):
    ctx = current(check_sticky=False)
    forget_handle(ctx.events, handle, "event")


@api
def cuEventRecord(event_handle, stream_handle):
    ctx = current()
    event = _event(ctx, event_handle)
    stream = ctx.stream(stream_handle)
    ctx.record(event, stream)


@api
def cuEventSynchronize(handle):
    ctx = current()
    event = _uncaptured(_event_of_any_context(ctx, handle), "cuEventSynchronize")
    refuse_unsafe(ctx, "cuEventSynchronize")
    if event.item is not None:
        event.item.done.wait()
    current()


@api
def cuEventQuery(handle):
    ctx = current()
    event = _uncaptured(_event_of_any_context(ctx, handle), "cuEventQuery")
    refuse_unsafe(ctx, "cuEventQuery")      # a query from any thread, under a global capture
    if not event.complete():
        raise EmuError("CUDA_ERROR_NOT_READY")


@api
def cuEventElapsedTime(ms_out, start_handle, end_handle):
    ctx = current()
    start = _uncaptured(_event(ctx, start_handle), "cuEventElapsedTime")
    end = _uncaptured(_event(ctx, end_handle), "cuEventElapsedTime")
    if not (start.timing and end.timing):
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event was created with CU_EVENT_DISABLE_TIMING")
    if start.item is None or end.item is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event has not been recorded")
    if not (start.complete() and end.complete()):
        raise EmuError("CUDA_ERROR_NOT_READY", "an event has not completed yet")
    if start.time_ns is None or end.time_ns is None:     # skipped after a fault
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event was never reached by its stream")
    t0, t1 = start.time_ns, end.time_ns
    if ctx.timeline is not None and start.item.model is not None and end.item.model is not None:
        t0, t1 = ctx.timeline.event_time_ns(start.item.model), ctx.timeline.event_time_ns(end.item.model)
    write_out(ctypes.c_float, ms_out, (t1 - t0) / 1e6)



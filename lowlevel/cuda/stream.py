"""Streams and events: the ordering and timing of asynchronous work.

Work queued on one stream runs in order; different streams may overlap. `Stream()` is a
blocking stream: it synchronises with the legacy default stream (handle 0), as the driver
documents; `Stream(non_blocking=True)` does not. Nothing here waits unless its name says so
(`synchronize`), and `query()` answers without waiting.
"""
import ctypes
import itertools
import sys
import threading
import traceback

from ..capi.prototypes import CUhostFn
from .checked import c_integer
from .context import ContextBound, ContextResource, device_of_thread, set_in_host_callback
from .driver import NOT_READY

CU_STREAM_NON_BLOCKING = 0x1
CU_STREAM_PER_THREAD = 0x2
CU_EVENT_BLOCKING_SYNC = 0x1
CU_EVENT_DISABLE_TIMING = 0x2

_pending_callbacks: dict[int, CUhostFn] = {}     # host callbacks the driver has yet to call
_finished_callbacks: list[int] = []             # called already; freed at the next add
_pending_lock = threading.Lock()
_callback_ids = itertools.count(1)
# Host callbacks captured into a graph run at every replay: their C function pointers live
# as long as the graph does (capture id -> the pointers; graph.py hands them to the Graph).
captured_callbacks: dict[int, list] = {}
CAPTURE_STATUS = ("none", "active", "invalidated")      # CUstreamCaptureStatus, by value


class Stream(ContextResource):
    """A CUDA stream. `Stream.legacy()` is the legacy default stream (handle 0);
    `Stream.per_thread()` the calling host thread's per-thread default stream
    (CU_STREAM_PER_THREAD): blocking, it synchronises with the legacy stream only."""

    handle = ContextBound("_handle")       # refused once the context is reset

    def __init__(self, non_blocking: bool = False, _handle: int | None = None, *, priority: int | None = None):
        self._adopt()
        self.non_blocking = non_blocking
        if _handle is not None:
            self.handle, self._owned = _handle, False
            return
        h = ctypes.c_void_p()
        flags = CU_STREAM_NON_BLOCKING if non_blocking else 0
        if priority is None:
            self._drv.cuStreamCreate(ctypes.byref(h), flags)
        else:
            # Lower numbers are higher priorities; the driver clamps to stream_priority_range().
            priority = c_integer(priority, ctypes.c_int, "Stream: priority")
            self._drv.cuStreamCreateWithPriority(ctypes.byref(h), flags, priority)
        self.handle, self._owned = h.value, True

    @property
    def priority(self) -> int:
        """The stream's priority (cuStreamGetPriority): lower is more urgent."""
        value = ctypes.c_int()
        self._drv.cuStreamGetPriority(self.handle, ctypes.byref(value))
        return value.value

    @property
    def flags(self) -> int:
        """The flags the stream was created with (cuStreamGetFlags): CU_STREAM_NON_BLOCKING or 0."""
        value = ctypes.c_uint()
        self._drv.cuStreamGetFlags(self.handle, ctypes.byref(value))
        return value.value

    @classmethod
    def legacy(cls) -> "Stream":
        return cls(_handle=0)

    @classmethod
    def per_thread(cls) -> "Stream":
        return cls(_handle=CU_STREAM_PER_THREAD)

    def __repr__(self):
        kind = "legacy default" if self._handle == 0 else "per-thread default" if \
            self._handle == CU_STREAM_PER_THREAD else ("non-blocking" if self.non_blocking else "blocking")
        return f"<Stream {kind} {self._handle or 0:#x}>"

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished."""
        self._drv.cuStreamSynchronize(self.handle)

    def query(self) -> bool:
        """True when all queued work has finished; never waits."""
        code = self._drv.cuStreamQuery.unchecked(self.handle)
        if code == 0:
            return True
        if code == NOT_READY:
            return False
        raise self._drv.error(code, "cuStreamQuery")

    def wait(self, event: "Event") -> None:
        """Make later work on this stream wait for `event` (cuStreamWaitEvent); returns at once."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait: expected an Event, got {type(event).__name__}")
        self._drv.cuStreamWaitEvent(self.handle, event.handle, 0)

    def capture_status(self) -> tuple[str, int]:
        """("none" | "active" | "invalidated", the capture's id) (cuStreamGetCaptureInfo)."""
        status, ident = ctypes.c_int(), ctypes.c_uint64()
        self._drv.cuStreamGetCaptureInfo(self.handle, ctypes.byref(status), ctypes.byref(ident),
                                         None, None, None, None)
        return CAPTURE_STATUS[status.value], ident.value

    def add_callback(self, fn) -> None:
        """Run `fn()` on a driver thread once the work queued so far is done (cuLaunchHostFunc).
        On a capturing stream it runs at each replay of the graph instead.

        As the driver requires, `fn` must not call CUDA functions. An exception in it is
        printed (it cannot propagate across the driver).
        """
        status, ident = self.capture_status()
        if status == "active":
            cfn = CUhostFn(_callback_trampoline(fn, None))
            captured_callbacks.setdefault(ident, []).append(cfn)
            self._drv.cuLaunchHostFunc(self.handle, ctypes.cast(cfn, ctypes.c_void_p), None)
            return
        with _pending_lock:
            # Host functions run one after another on the driver's thread: once a later one
            # has finished, an earlier one has surely returned through its C function pointer.
            while len(_finished_callbacks) > 1:
                _pending_callbacks.pop(_finished_callbacks.pop(0), None)
            key = next(_callback_ids)
            trampoline = _callback_trampoline(fn, key)
            # The C function pointer must stay alive until the driver has called it, even if
            # this Stream object goes away first: keep it in a module-level table.
            cfn = _pending_callbacks[key] = CUhostFn(trampoline)
        self._drv.cuLaunchHostFunc(self.handle, ctypes.cast(cfn, ctypes.c_void_p), None)

    def destroy(self) -> None:
        """Release the stream; work already queued still completes."""
        self.release()

    def _release(self) -> None:
        if self._owned:
            self._drv.cuStreamDestroy(self.handle)


def _callback_trampoline(fn, key):
    """The C callback that runs `fn`; `key`: its entry in _pending_callbacks, marked
    finished after each call (None: a captured one, kept by its graph)."""
    def trampoline(_user_data):
        set_in_host_callback(True)
        try:
            fn()
        except Exception:
            print(f"exception in stream callback {fn!r}:\n{traceback.format_exc()}", file=sys.stderr)
        finally:
            set_in_host_callback(False)
            if key is not None:
                # Not freed here: this very C function pointer is still running.
                _finished_callbacks.append(key)
    return trampoline


class Event(ContextResource):
    """A marker in a stream: `record` it, then `query`, `synchronize` or time with `elapsed_ms`."""

    handle = ContextBound("_handle")       # refused once the context is reset

    def __init__(self, timing: bool = True, blocking_sync: bool = False):
        self._adopt()
        flags = (0 if timing else CU_EVENT_DISABLE_TIMING) | (CU_EVENT_BLOCKING_SYNC if blocking_sync else 0)
        h = ctypes.c_void_p()
        self._drv.cuEventCreate(ctypes.byref(h), flags)
        self.handle = h.value
        self.timing = timing

    def record(self, stream: Stream | None = None) -> "Event":
        """Queue the marker on `stream` (default: the legacy default stream); returns at once."""
        self._drv.cuEventRecord(self.handle, stream_handle(stream, "Event.record: stream"))
        return self

    def query(self) -> bool:
        """True when the stream has passed the marker (or it was never recorded); never waits."""
        code = self._drv.cuEventQuery.unchecked(self.handle)
        if code == 0:
            return True
        if code == NOT_READY:
            return False
        raise self._drv.error(code, "cuEventQuery")

    def synchronize(self) -> None:
        """Wait until the stream has passed the marker."""
        self._drv.cuEventSynchronize(self.handle)

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds between this event and `end`, both recorded and complete."""
        if not isinstance(end, Event):
            raise TypeError(f"Event.elapsed_ms: expected an Event, got {type(end).__name__}")
        ms = ctypes.c_float()
        self._drv.cuEventElapsedTime(ctypes.byref(ms), self.handle, end.handle)
        return ms.value

    def destroy(self) -> None:
        self.release()

    def _release(self) -> None:
        self._drv.cuEventDestroy(self.handle)


def stream_handle(stream, what: str = "stream") -> int:
    """The CUstream of `stream` (a Stream, or None for the legacy default stream): a
    TypeError naming `what` for anything else, ContextResetError for one from before a
    reset."""
    if stream is None:
        return 0
    if not isinstance(stream, Stream):
        raise TypeError(f"{what} must be a Stream or None, got {type(stream).__name__} {stream!r}")
    return stream.handle


# ---- the current stream ---------------------------------------------------------------------
class _CurrentStream(threading.local):
    stream = None       # the class default: a thread that never chose a stream uses the legacy one


_current = _CurrentStream()


def current_stream() -> Stream | None:
    """The stream this thread's ops run on; None means the legacy default stream. A stream
    belongs to one device: while another device is current, its legacy stream is used."""
    s = _current.stream
    if s is not None and s.context.ordinal != device_of_thread.ordinal:
        return None
    return s


class stream:
    """`with lowlevel.cuda.stream(s):` runs this thread's ops on `s` inside the block."""

    def __init__(self, s: Stream | None):
        stream_handle(s, "cuda.stream(s)")        # refuse a non-stream here, not at the first op
        self.s = s

    def __enter__(self):
        self.previous = getattr(_current, "stream", None)
        _current.stream = self.s
        return self.s

    def __exit__(self, *exc):
        _current.stream = self.previous
        return False

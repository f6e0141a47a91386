"""The emulated driver's state: initialisation, the device, its primary context, errors.

Each C function of the emulated driver (here and in memory.py, modules.py, launch.py,
streams.py) has the name, arguments and result of the libcuda function of the same public
name (see lowlevel/capi/prototypes.py); the binding layer wraps them as ctypes callbacks, so
they receive what C would: ints for pointers and handles, and they write out-parameters
through those pointers (entry.write_out). They return a CUresult, never raise: an EmuError
becomes its code, and its details are kept for `error_details()` (the emulator can say
which thread faulted where, which the real driver cannot).

State: one device; its primary context holds the memory arena, the streams (each with a
worker thread), events and modules. Handles are small integers standing for those objects.
"""
import ctypes
import sys
import threading
import traceback

from ...capi.constants import CURESULT, CURESULT_NAME
from ..engine.memory import HOST_RANGES, DeviceMemory, unified_arena
from ..tools.devicetime import timeline_from_env
from . import capture, device
from .entry import CFunctions, keep_interrupt, stamp_calls, write_out
from .errors import EmuError, describe, static_c_string
from .queues import Event, Stream

SUCCESS = 0
LEGACY_STREAM_HANDLES = (0, 0x1)       # NULL and CU_STREAM_LEGACY
PER_THREAD_STREAM_HANDLE = 0x2         # CU_STREAM_PER_THREAD
DEVICE_COUNT = 1                       # LOWLEVEL_EMU_DEVICES, read by the first cuInit

_state_lock = threading.RLock()
_thread = threading.local()            # .context: the current context of this thread
_last_error = threading.local()        # .code, .details: the last failure on this thread
_initialized = False


def record_interrupt(exc: BaseException, where: str) -> int:
    """A KeyboardInterrupt/SystemExit inside emulated `where`: kept for the caller to raise
    again, and the call fails with CUDA_ERROR_UNKNOWN."""
    keep_interrupt(exc)
    details = f"{type(exc).__name__} while in emulated {where}; the call did not complete"
    _last_error.code, _last_error.details = CURESULT["CUDA_ERROR_UNKNOWN"], details
    return CURESULT["CUDA_ERROR_UNKNOWN"]


def _failure(name: str, exc: BaseException) -> int:
    """The CUresult a driver function returns for what it raised."""
    if isinstance(exc, EmuError):
        _last_error.code, _last_error.details = exc.code, exc.details
        return exc.code
    if isinstance(exc, Exception):        # never let a bug cross the C boundary silently
        details = f"internal error in emulated {name}: {exc!r}\n{traceback.format_exc()}"
        print(details, file=sys.stderr)
        _last_error.code, _last_error.details = CURESULT["CUDA_ERROR_UNKNOWN"], details
        return CURESULT["CUDA_ERROR_UNKNOWN"]
    return record_interrupt(exc, name)    # Ctrl-C in a wait: ctypes would swallow it


# The driver's C functions by public name; `@api` registers one (a CUresult: they return
# nothing of their own).
FUNCTIONS = CFunctions(SUCCESS, _failure, returns_status=False)
api = FUNCTIONS


def functions() -> dict:
    return dict(FUNCTIONS)


def error_details(code: int) -> str:
    """What the emulator knows about the last `code` returned on this thread (or sticky)."""
    ctx = live(getattr(_thread, "context", None))
    if ctx is not None and ctx.sticky is not None and ctx.sticky[0] == code:
        return ctx.sticky[1]
    if getattr(_last_error, "code", None) == code:
        return _last_error.details
    return ""


# ---- contexts ------------------------------------------------------------------------------
class Context:
    """The primary context of the device: memory, streams, events, modules, sticky error.

    `lock` makes each submission atomic across host threads: the implicit dependencies of
    the legacy stream are computed and the item queued in one step, so two threads cannot
    interleave between them. `per_thread` holds each host thread's CU_STREAM_PER_THREAD
    stream, made on its first use: a blocking stream (flags 0), so it synchronises with
    the legacy stream both ways and with no other stream, as the driver documents. Destroyed streams whose work is still queued stay in
    `retired` until it is done: cuStreamDestroy returns at once, but that work still
    orders against the legacy stream and cuCtxSynchronize still waits for it.
    """

    def __init__(self, handle: int, ordinal: int = 0):
        try:                # LOWLEVEL_EMU_TIMING, read as each context is made (devicetime.py)
            self.timeline = timeline_from_env()
        except ValueError as e:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", str(e))
        if self.timeline is not None:
            stamp_calls()                       # ops are submitted when their call began
        self.handle = handle
        self.ordinal = ordinal                  # the device it belongs to
        self.refcount = 0
        self.lock = threading.RLock()
        # each device's addresses follow the previous device's: unified addressing
        size = device.memory_size()
        self.memory = DeviceMemory(size, first_offset=ordinal * size, arena=unified_arena(DEVICE_COUNT, size))
        self.legacy = Stream(self, 0, "legacy")
        self.streams: dict[int, Stream] = {}
        self.retired: list[Stream] = []         # destroyed, with work still queued
        self.per_thread: dict[int, Stream] = {}  # host thread ident -> its per-thread stream
        self.events: dict[int, Event] = {}
        self.modules: dict = {}                 # handle -> modules.Module
        self.functions: dict = {}               # handle -> modules.Function
        self.pinned: dict[int, tuple[int, int]] = {}   # address -> (size, flags): cuMemHostAlloc
        self.registered: dict[int, int] = {}    # host address -> size (cuMemHostRegister)
        self.managed: dict = {}                 # cuMemAllocManaged start -> managed.ManagedRange
        self.buffer_ids: dict[int, int] = {}    # allocation start -> CU_POINTER_ATTRIBUTE_BUFFER_ID
        self.limits: dict[int, int] = {}        # CUlimit -> value set (limits.py has the defaults)
        self.used_calls: set[str] = set()       # "_vprintf", "_malloc", "_free": launched, limits fixed
        self.heap = None                        # limits.DeviceHeap: device malloc's, from the first use on
        self.peers: list = []                   # contexts whose memory this one may access (peer.py)
        self.sticky: tuple[int, str] | None = None
        self.captures: list = []                # active capture.Capture sequences
        self.graphs: dict = {}                  # handle -> capture.Graph
        self.graph_nodes: dict = {}             # handle -> capture.Node
        self.graph_execs: dict = {}             # handle -> capture.GraphExec
        self.thread_instructions = 0        # executed by every kernel so far (for the trace)
        # Stream workers take no lock that a host thread may hold while it waits for them
        # (that is `lock`): the count has its own.
        self._count_lock = threading.Lock()
        self._next = 0x100

    def new_handle(self) -> int:
        with self.lock:
            self._next += 0x10
            return self.handle + self._next

    def count_instructions(self, n: int) -> None:
        with self._count_lock:              # workers of several streams add at once
            self.thread_instructions += n

    def set_sticky(self, code_name: str, message: str) -> None:
        if self.sticky is None:
            self.sticky = (CURESULT[code_name], message)

    def all_streams(self):
        """Every stream with work that may still run: legacy, live, and retired ones."""
        with self.lock:
            self.retired = [s for s in self.retired if not s.idle()]
            return [self.legacy, *self.streams.values(), *self.per_thread.values(), *self.retired]

    def capturing_blocking_streams(self) -> list:
        """The blocking streams (created or per-thread) that are capturing now: what work on
        the legacy stream would synchronise with."""
        with self.lock:
            streams = [*self.streams.values(), *self.per_thread.values()]
        return [s for s in streams if s.blocking and s.capture is not None]

    def add_stream(self, handle: int, stream: Stream) -> None:
        with self.lock:
            self.streams[handle] = stream

    def retire_stream(self, handle: int) -> Stream:
        with self.lock:
            stream = self.streams.pop(handle, None)
            if stream is None:
                raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown stream handle {handle:#x}")
            if not stream.idle():
                self.retired.append(stream)
            return stream

    def stream(self, handle: int) -> Stream:
        if handle in LEGACY_STREAM_HANDLES:
            return self.legacy
        if handle == PER_THREAD_STREAM_HANDLE:
            return self.per_thread_stream()
        return lookup_handle(self.streams, handle, "stream")

    def per_thread_stream(self) -> Stream:
        """The calling host thread's CU_STREAM_PER_THREAD stream (made on first use)."""
        key = threading.get_ident()
        with self.lock:
            stream = self.per_thread.get(key)
            if stream is None:
                stream = self.per_thread[key] = Stream(self, 0, f"per-thread-{key:#x}")
            return stream

    def implicit_deps(self, stream: Stream):
        """What work on `stream` must wait for under legacy default-stream semantics."""
        with self.lock:
            if stream is self.legacy:
                return [s.last for s in self.all_streams()[1:] if s.blocking]
            if stream.blocking:
                return [self.legacy.last]
            return []

    def submit(self, stream: Stream, run, label: str, extra_deps=(), key=None):
        """Queue `run` on `stream`; on a capturing stream it becomes a graph node instead
        (and None is returned)."""
        with self.lock:
            if stream.capture is not None:
                return stream.capture.add(self, stream, run, label, key)
            if stream is self.legacy:
                capture.refuse_implicit(self, label)
            return stream.submit(run, [*self.implicit_deps(stream), *extra_deps], label)

    def record(self, event: Event, stream: Stream) -> None:
        with self.lock:
            if stream.capture is not None:       # the event holds the capture's frontier
                stream.capture.check_valid()
                event.captured = (stream.capture, list(stream.capture.frontier[stream]))
                return
            if stream is self.legacy:
                capture.refuse_implicit(self, "cuEventRecord")
            event.captured = None
            event.record_into(stream, self.implicit_deps(stream))

    def is_pinned(self, address: int, nbytes: int) -> bool:
        for start, (size, _) in list(self.pinned.items()):
            if start <= address and address + nbytes <= start + size:
                return True
        # memory pinned by cuMemHostRegister is page-locked as well
        return any(start <= address and address + nbytes <= start + size
                   for start, size in list(self.registered.items()))

    def synchronize(self) -> None:
        for s in self.all_streams():
            s.synchronize()

    def destroy(self) -> None:
        for s in self.all_streams():
            s.close()
        for start in [*self.pinned, *self.registered]:      # no device reaches them any more
            HOST_RANGES.remove(start)
        self.memory.release()


_contexts: dict[int, Context] = {}          # device ordinal -> its primary context
_PRIMARY_HANDLE = 0x7E0000000000


def lookup_handle(table: dict, handle: int, what: str):
    """The object a handle stands for; CUDA_ERROR_INVALID_HANDLE if it stands for none."""
    obj = table.get(handle)
    if obj is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown {what} handle {handle:#x}")
    return obj


def forget_handle(table: dict, handle: int, what: str):
    """Remove and return the object a handle stands for (its destroy call), as lookup_handle
    fails when it stands for none."""
    obj = lookup_handle(table, handle, what)
    del table[handle]
    return obj


def require_init() -> None:
    if not _initialized:
        raise EmuError("CUDA_ERROR_NOT_INITIALIZED", "cuInit has not been called")


def device_count() -> int:
    """How many devices the emulated GPU presents."""
    return DEVICE_COUNT


def device_ordinal(ordinal: int) -> int:
    require_init()
    if not 0 <= ordinal < DEVICE_COUNT:
        raise EmuError("CUDA_ERROR_INVALID_DEVICE", f"device {ordinal} does not exist (count {DEVICE_COUNT})")
    return ordinal


def live(ctx: Context | None) -> Context | None:
    """The live context `ctx` stands for: itself, or, once it was reset (destroyed and
    made again with the same handle, as the primary context's handle stays valid), the
    fresh one; None if no live context has its handle."""
    if ctx is None:
        return None
    contexts = list(_contexts.values())
    if any(c is ctx for c in contexts):
        return ctx
    return next((c for c in contexts if c.handle == ctx.handle), None)


def current(check_sticky: bool = True) -> Context:
    """The calling thread's current context, failing as the driver does."""
    require_init()
    current = getattr(_thread, "context", None)
    if current is None:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT", "no context is current on this thread")
    ctx = live(current)
    if ctx is None:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT",
                       f"the context current on this thread ({current.handle:#x}) was destroyed")
    _thread.context = ctx
    if check_sticky:
        raise_sticky(ctx)
    return ctx


def thread_context() -> Context | None:
    """The context this thread made current, as it was made (a reset one too), or None."""
    return getattr(_thread, "context", None)


def set_thread_context(ctx: Context | None) -> None:
    """Make `ctx` this thread's current context (the top of its stack: ctx_stack.py)."""
    _thread.context = ctx


def raise_sticky(ctx: Context) -> None:
    """The context's sticky error (a fault in earlier work), raised as the driver reports it."""
    if ctx.sticky is not None:
        code, details = ctx.sticky
        raise EmuError(CURESULT_NAME[code], details)




def live_contexts() -> list:
    """The contexts alive now (cuBLAS handles die with theirs)."""
    return list(_contexts.values())


# ---- initialisation, versions, errors -------------------------------------------------------
@api
def cuInit(flags):
    global _initialized, DEVICE_COUNT
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuInit flags must be 0")
    if not _initialized:
        try:
            DEVICE_COUNT = device.device_count()
        except ValueError as e:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", str(e))
    _initialized = True


@api
def cuDriverGetVersion(version_out):
    write_out(ctypes.c_int, version_out, device.DRIVER_VERSION)


@api
def cuGetErrorName(code, text_out):
    name = CURESULT_NAME.get(code)
    if name is None:
        write_out(ctypes.c_void_p, text_out, None)
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUresult {code}")
    write_out(ctypes.c_void_p, text_out, static_c_string(name))


@api
def cuGetErrorString(code, text_out):
    text = describe(code)
    if text is None:
        write_out(ctypes.c_void_p, text_out, None)
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUresult {code}")
    write_out(ctypes.c_void_p, text_out, static_c_string(text))


# ---- devices -------------------------------------------------------------------------------
@api
def cuDeviceGetCount(count_out):
    require_init()
    write_out(ctypes.c_int, count_out, DEVICE_COUNT)


@api
def cuDeviceGet(device_out, ordinal):
    write_out(ctypes.c_int, device_out, device_ordinal(ordinal))


@api
def cuDeviceGetName(buf, length, dev):
    device_ordinal(dev)
    if length <= 0 or not buf:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "name buffer is empty")
    data = device.name().encode()[: length - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))


@api
def cuDeviceTotalMem(bytes_out, dev):
    device_ordinal(dev)
    write_out(ctypes.c_size_t, bytes_out, device.memory_size())


@api
def cuDeviceGetAttribute(value_out, attribute, dev):
    device_ordinal(dev)
    values = device.attributes(dev)
    if attribute not in values:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown device attribute {attribute}")
    write_out(ctypes.c_int, value_out, values[attribute])


# ---- the primary context -------------------------------------------------------------------
@api
def cuDevicePrimaryCtxRetain(ctx_out, dev):
    device_ordinal(dev)
    with _state_lock:
        ctx = _contexts.get(dev)
        if ctx is None:
            ctx = _contexts[dev] = Context(_PRIMARY_HANDLE + dev * 0x1000000, dev)
        ctx.refcount += 1
    write_out(ctypes.c_void_p, ctx_out, ctx.handle)


def _release(dev: int, reset: bool) -> None:
    with _state_lock:
        ctx = _contexts.get(dev)
        if ctx is None or (not reset and ctx.refcount == 0):
            raise EmuError("CUDA_ERROR_INVALID_CONTEXT", f"device {dev} has no retained primary context")
        if not reset:
            ctx.refcount -= 1
        if reset or ctx.refcount == 0:
            # Like the driver, destroying the context first lets queued work finish
            # (after a fault it is skipped), then frees everything it owned.
            ctx.destroy()
            del _contexts[dev]
            if reset and ctx.refcount > 0:          # the retainers keep a fresh, clean context
                # with the same handle: threads it is current on now reach the fresh one
                fresh = _contexts[dev] = Context(ctx.handle, dev)
                fresh.refcount = ctx.refcount
            elif getattr(_thread, "context", None) is ctx:
                _thread.context = None


@api
def cuDevicePrimaryCtxRelease(dev):
    _release(device_ordinal(dev), reset=False)


@api
def cuDevicePrimaryCtxReset(dev):
    _release(device_ordinal(dev), reset=True)


def _context_by_handle(handle: int) -> Context:
    for ctx in _contexts.values():
        if ctx.handle == handle:
            return ctx
    raise EmuError("CUDA_ERROR_INVALID_CONTEXT", f"unknown or destroyed context {handle:#x}")


def context_by_handle(handle: int) -> Context:
    """The live context a CUcontext stands for; CUDA_ERROR_INVALID_CONTEXT if none."""
    return _context_by_handle(handle)


@api
def cuCtxGetCurrent(ctx_out):
    require_init()
    ctx = live(getattr(_thread, "context", None))
    write_out(ctypes.c_void_p, ctx_out, ctx.handle if ctx else None)


@api
def cuCtxGetDevice(device_out):
    ctx = current(check_sticky=False)
    write_out(ctypes.c_int, device_out, next(d for d, c in _contexts.items() if c is ctx))


@api
def cuCtxSynchronize():
    ctx = current()
    capture.refuse_unsafe(ctx, "cuCtxSynchronize")
    ctx.synchronize()
    current()          # report a fault that happened in the work just waited for

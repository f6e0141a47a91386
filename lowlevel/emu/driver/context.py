"""The emulated GPU's implementation of the CUDA driver C functions.

Each function here has the name, arguments and result of the libcuda function of the same
public name (see lowlevel/cuda/bindings.py); the binding layer wraps them as ctypes
callbacks, so they receive what C would: ints for pointers and handles, and they write
out-parameters through those pointers. They return a CUresult, never raise: an EmuError
becomes its code, and its details are kept for `error_details()` (the emulator can say
which thread faulted where, which the real driver cannot).

State: one device; its primary context holds the memory arena, the streams (each with a
worker thread), events and modules. Handles are small integers standing for those objects.
"""
import ctypes
import functools
import sys
import threading
import traceback

from ...capi.constants import CURESULT, CURESULT_NAME, FUNCTION_ATTRIBUTE, JIT_OPTION
from ...capi.versions import max_ptx_isa
from . import device
from .errors import EmuError, describe, static_c_string
from ..ptx.errors import PtxError
from ...capi.images import ImageError, ptx_from_fatbin, read_image
from ..engine.memory import AccessFault, DeviceMemory, OutOfMemory
from .queues import Event, Stream

SUCCESS = 0
LEGACY_STREAM_HANDLES = (0, 0x1)       # NULL and CU_STREAM_LEGACY
DEVICE_COUNT = 1

FUNCTIONS: dict = {}                   # public name -> implementation
_state_lock = threading.RLock()
_thread = threading.local()            # .context: the current context of this thread
_last_error = threading.local()        # .code, .details: the last failure on this thread
_interrupt = threading.local()         # .exc: a KeyboardInterrupt/SystemExit caught in a call
_initialized = False


def api(fn):
    """Register `fn` as the implementation of the driver function of the same name."""
    @functools.wraps(fn)
    def entry(*args):
        try:
            # ctypes hands a NULL pointer to a callback as None; C code would see 0.
            fn(*[0 if a is None else a for a in args])
            return SUCCESS
        except EmuError as e:
            _last_error.code, _last_error.details = e.code, e.details
            return e.code
        except Exception as exc:            # never let a bug cross the C boundary silently
            details = f"internal error in emulated {fn.__name__}: {exc!r}\n{traceback.format_exc()}"
            print(details, file=sys.stderr)
            _last_error.code, _last_error.details = CURESULT["CUDA_ERROR_UNKNOWN"], details
            return CURESULT["CUDA_ERROR_UNKNOWN"]
        except BaseException as exc:        # Ctrl-C in a wait: ctypes would swallow it
            return keep_interrupt(exc, fn.__name__)
    FUNCTIONS[fn.__name__] = entry
    return entry


def keep_interrupt(exc: BaseException, where: str) -> int:
    """Keep a KeyboardInterrupt/SystemExit raised inside a C callback for the caller to
    re-raise (see pending_interrupt); a callback cannot raise through ctypes."""
    _interrupt.exc = exc
    details = f"{type(exc).__name__} while in emulated {where}; the call did not complete"
    _last_error.code, _last_error.details = CURESULT["CUDA_ERROR_UNKNOWN"], details
    return CURESULT["CUDA_ERROR_UNKNOWN"]


def pending_interrupt() -> BaseException | None:
    """The KeyboardInterrupt/SystemExit that interrupted this thread's last emulated call
    (which then returned CUDA_ERROR_UNKNOWN), or None; cleared by the call. The binding
    layer re-raises it after a failed call."""
    exc = getattr(_interrupt, "exc", None)
    _interrupt.exc = None
    return exc


def functions() -> dict:
    return dict(FUNCTIONS)


def error_details(code: int) -> str:
    """What the emulator knows about the last `code` returned on this thread (or sticky)."""
    ctx = _live(getattr(_thread, "context", None))
    if ctx is not None and ctx.sticky is not None and ctx.sticky[0] == code:
        return ctx.sticky[1]
    if getattr(_last_error, "code", None) == code:
        return _last_error.details
    return ""


# ---- writing through C pointers ----------------------------------------------------------
def _out(ctype, address: int, value) -> None:
    if not address:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL output pointer")
    ctype.from_address(address).value = value


# ---- contexts ------------------------------------------------------------------------------
class Context:
    """The primary context of the device: memory, streams, events, modules, sticky error.

    `lock` makes each submission atomic across host threads: the implicit dependencies of
    the legacy stream are computed and the item queued in one step, so two threads cannot
    interleave between them. Destroyed streams whose work is still queued stay in
    `retired` until it is done: cuStreamDestroy returns at once, but that work still
    orders against the legacy stream and cuCtxSynchronize still waits for it.
    """

    def __init__(self, handle: int):
        self.handle = handle
        self.refcount = 0
        self.lock = threading.RLock()
        self.memory = DeviceMemory(device.memory_size())
        self.legacy = Stream(self, 0, "legacy")
        self.streams: dict[int, Stream] = {}
        self.retired: list[Stream] = []         # destroyed, with work still queued
        self.events: dict[int, Event] = {}
        self.modules: dict[int, "Module"] = {}
        self.functions: dict[int, "Function"] = {}
        self.pinned: dict[int, ctypes.Array] = {}      # host address -> buffer (cuMemAllocHost)
        self.sticky: tuple[int, str] | None = None
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
            return [self.legacy, *self.streams.values(), *self.retired]

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
        return _lookup(self.streams, handle, "stream")

    def implicit_deps(self, stream: Stream):
        """What work on `stream` must wait for under legacy default-stream semantics."""
        with self.lock:
            if stream is self.legacy:
                return [s.last for s in self.all_streams()[1:] if s.blocking]
            if stream.blocking:
                return [self.legacy.last]
            return []

    def submit(self, stream: Stream, run, label: str, extra_deps=()):
        with self.lock:
            return stream.submit(run, [*self.implicit_deps(stream), *extra_deps], label)

    def record(self, event: Event, stream: Stream) -> None:
        with self.lock:
            event.record_into(stream, self.implicit_deps(stream))

    def is_pinned(self, address: int, nbytes: int) -> bool:
        for start, buf in list(self.pinned.items()):
            if start <= address and address + nbytes <= start + ctypes.sizeof(buf):
                return True
        return False

    def synchronize(self) -> None:
        for s in self.all_streams():
            s.synchronize()

    def destroy(self) -> None:
        for s in self.all_streams():
            s.close()


_contexts: dict[int, Context] = {}          # device ordinal -> its primary context
_PRIMARY_HANDLE = 0x7E0000000000


def _lookup(table: dict, handle: int, what: str):
    """The object a handle stands for; CUDA_ERROR_INVALID_HANDLE if it stands for none."""
    obj = table.get(handle)
    if obj is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown {what} handle {handle:#x}")
    return obj


def _require_init() -> None:
    if not _initialized:
        raise EmuError("CUDA_ERROR_NOT_INITIALIZED", "cuInit has not been called")


def _device(ordinal: int) -> int:
    _require_init()
    if not 0 <= ordinal < DEVICE_COUNT:
        raise EmuError("CUDA_ERROR_INVALID_DEVICE", f"device {ordinal} does not exist (count {DEVICE_COUNT})")
    return ordinal


def _live(ctx: Context | None) -> Context | None:
    """The live context `ctx` stands for: itself, or, once it was reset (destroyed and
    made again with the same handle, as the primary context's handle stays valid), the
    fresh one; None if no live context has its handle."""
    if ctx is None:
        return None
    contexts = list(_contexts.values())
    if any(c is ctx for c in contexts):
        return ctx
    return next((c for c in contexts if c.handle == ctx.handle), None)


def _ctx(check_sticky: bool = True) -> Context:
    """The calling thread's current context, failing as the driver does."""
    _require_init()
    current = getattr(_thread, "context", None)
    if current is None:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT", "no context is current on this thread")
    ctx = _live(current)
    if ctx is None:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT",
                       f"the context current on this thread ({current.handle:#x}) was destroyed")
    _thread.context = ctx
    if check_sticky and ctx.sticky is not None:
        code, details = ctx.sticky
        raise EmuError(CURESULT_NAME[code], details)
    return ctx


# ---- initialisation, versions, errors -------------------------------------------------------
@api
def cuInit(flags):
    global _initialized
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuInit flags must be 0")
    _initialized = True


@api
def cuDriverGetVersion(version_out):
    _out(ctypes.c_int, version_out, device.DRIVER_VERSION)


@api
def cuGetErrorName(code, text_out):
    name = CURESULT_NAME.get(code)
    if name is None:
        _out(ctypes.c_void_p, text_out, None)
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUresult {code}")
    _out(ctypes.c_void_p, text_out, static_c_string(name))


@api
def cuGetErrorString(code, text_out):
    text = describe(code)
    if text is None:
        _out(ctypes.c_void_p, text_out, None)
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown CUresult {code}")
    _out(ctypes.c_void_p, text_out, static_c_string(text))


# ---- devices -------------------------------------------------------------------------------
@api
def cuDeviceGetCount(count_out):
    _require_init()
    _out(ctypes.c_int, count_out, DEVICE_COUNT)


@api
def cuDeviceGet(device_out, ordinal):
    _out(ctypes.c_int, device_out, _device(ordinal))


@api
def cuDeviceGetName(buf, length, dev):
    _device(dev)
    if length <= 0 or not buf:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "name buffer is empty")
    data = device.name().encode()[: length - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))


@api
def cuDeviceTotalMem(bytes_out, dev):
    _device(dev)
    _out(ctypes.c_size_t, bytes_out, device.memory_size())


@api
def cuDeviceGetAttribute(value_out, attribute, dev):
    _device(dev)
    values = device.attributes()
    if attribute not in values:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown device attribute {attribute}")
    _out(ctypes.c_int, value_out, values[attribute])


# ---- the primary context -------------------------------------------------------------------
@api
def cuDevicePrimaryCtxRetain(ctx_out, dev):
    _device(dev)
    with _state_lock:
        ctx = _contexts.get(dev)
        if ctx is None:
            ctx = _contexts[dev] = Context(_PRIMARY_HANDLE + dev * 0x1000000)
        ctx.refcount += 1
    _out(ctypes.c_void_p, ctx_out, ctx.handle)


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
                fresh = _contexts[dev] = Context(ctx.handle)
                fresh.refcount = ctx.refcount
            elif getattr(_thread, "context", None) is ctx:
                _thread.context = None


@api
def cuDevicePrimaryCtxRelease(dev):
    _release(_device(dev), reset=False)


@api
def cuDevicePrimaryCtxReset(dev):
    _release(_device(dev), reset=True)


def _context_by_handle(handle: int) -> Context:
    for ctx in _contexts.values():
        if ctx.handle == handle:
            return ctx
    raise EmuError("CUDA_ERROR_INVALID_CONTEXT", f"unknown or destroyed context {handle:#x}")


@api
def cuCtxSetCurrent(handle):
    _require_init()
    _thread.context = None if not handle else _context_by_handle(handle)


@api
def cuCtxGetCurrent(ctx_out):
    _require_init()
    ctx = _live(getattr(_thread, "context", None))
    _out(ctypes.c_void_p, ctx_out, ctx.handle if ctx else None)


@api
def cuCtxGetDevice(device_out):
    ctx = _ctx(check_sticky=False)
    _out(ctypes.c_int, device_out, next(d for d, c in _contexts.items() if c is ctx))


@api
def cuCtxSynchronize():
    ctx = _ctx()
    ctx.synchronize()
    _ctx()          # report a fault that happened in the work just waited for


# ---- memory --------------------------------------------------------------------------------
@api
def cuMemGetInfo(free_out, total_out):
    ctx = _ctx()
    total = ctx.memory.size
    _out(ctypes.c_size_t, free_out, total - ctx.memory.used())
    _out(ctypes.c_size_t, total_out, total)


def _alloc(ctx: Context, nbytes: int) -> int:
    if nbytes == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cannot allocate 0 bytes")
    try:
        return ctx.memory.alloc(nbytes)
    except OutOfMemory:
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY",
                       f"{nbytes} bytes requested, {ctx.memory.size - ctx.memory.used()} free "
                       f"(set LOWLEVEL_EMU_MEMORY for a larger emulated device)")


@api
def cuMemAlloc(dptr_out, nbytes):
    ctx = _ctx()
    _out(ctypes.c_uint64, dptr_out, _alloc(ctx, nbytes))


def _check_freeable(ctx: Context, dptr: int) -> None:
    """cuMemFree takes only what cuMemAlloc gave: not a module's variables, not an offset."""
    if not ctx.memory.is_allocation(dptr):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{dptr:#x} is not the start of a live allocation")
    for module in ctx.modules.values():
        for name, (address, _) in (getattr(module.ptx, "symbols", None) or {}).items():
            if address == dptr:
                raise EmuError("CUDA_ERROR_INVALID_VALUE",
                               f"{dptr:#x} is the module variable {name!r}; it is freed with its module")


@api
def cuMemFree(dptr):
    ctx = _ctx()
    # cuMemFree synchronises: work still using the memory finishes first.
    ctx.synchronize()
    _check_freeable(ctx, dptr)
    ctx.memory.free(dptr)


@api
def cuMemGetAddressRange(base_out, size_out, dptr):
    ctx = _ctx()
    hit = ctx.memory.find(dptr)
    if hit is None:
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"{dptr:#x} is not inside any allocation")
    if base_out:
        _out(ctypes.c_uint64, base_out, hit[0])
    if size_out:
        _out(ctypes.c_size_t, size_out, hit[1])


@api
def cuMemAllocHost(host_out, nbytes):
    ctx = _ctx()
    if nbytes == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cannot allocate 0 bytes")
    try:
        buf = (ctypes.c_char * nbytes)()
    except (MemoryError, OverflowError):
        # The host cannot lock (here: hold) that much, as the driver reports it.
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", f"cannot allocate {nbytes} bytes of page-locked host memory")
    ctx.pinned[ctypes.addressof(buf)] = buf
    _out(ctypes.c_void_p, host_out, ctypes.addressof(buf))


@api
def cuMemFreeHost(host):
    ctx = _ctx()
    ctx.synchronize()
    if ctx.pinned.pop(host, None) is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{host:#x} was not allocated by cuMemAllocHost")


@api
def cuMemAllocAsync(dptr_out, nbytes, stream):
    ctx = _ctx()
    ctx.stream(stream)          # validates the handle
    # The address is handed out now; the stream orders its first use after this point.
    _out(ctypes.c_uint64, dptr_out, _alloc(ctx, nbytes))


@api
def cuMemFreeAsync(dptr, stream):
    ctx = _ctx()
    s = ctx.stream(stream)
    _check_freeable(ctx, dptr)
    ctx.submit(s, lambda: ctx.memory.free(dptr), "cuMemFreeAsync")


def _device_range(ctx: Context, dptr: int, nbytes: int, what: str) -> None:
    try:
        ctx.memory.check_range(dptr, nbytes)
    except AccessFault:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{what}: [{dptr:#x}, +{nbytes}) is not inside one live allocation")


def _copy(stream_handle, dst, src, nbytes, kind: str, asynchronous: bool) -> None:
    """All six copy calls: validate now, move the bytes in stream order.

    Pageable host memory behaves as the driver documents: an async host-to-device copy
    stages the bytes before returning, and a device-to-host copy into pageable memory
    returns only when done. Pinned memory (cuMemAllocHost) is truly asynchronous.
    """
    ctx = _ctx()
    stream = ctx.stream(stream_handle)
    if nbytes == 0:
        return
    mem = ctx.memory
    if kind in ("HtoD", "DtoD"):
        _device_range(ctx, dst, nbytes, "destination")
    if kind in ("DtoH", "DtoD"):
        _device_range(ctx, src, nbytes, "source")
    if not (dst and src):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL pointer in copy")
    if kind == "HtoD":
        if asynchronous and not ctx.is_pinned(src, nbytes):
            # One copy by memmove (size_t sizes), not ctypes.string_at, whose size is a C int.
            try:
                staged = (ctypes.c_char * nbytes)()
            except (MemoryError, OverflowError):
                raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", f"cannot stage {nbytes} bytes of pageable host memory")
            ctypes.memmove(staged, src, nbytes)
            run = lambda: ctypes.memmove(mem.host_address(dst), staged, nbytes)   # noqa: E731
        else:
            run = lambda: ctypes.memmove(mem.host_address(dst), src, nbytes)   # noqa: E731
    elif kind == "DtoH":
        run = lambda: ctypes.memmove(dst, mem.host_address(src), nbytes)   # noqa: E731
        asynchronous = asynchronous and ctx.is_pinned(dst, nbytes)
    else:
        run = lambda: ctypes.memmove(mem.host_address(dst), mem.host_address(src), nbytes)  # noqa: E731
    item = ctx.submit(stream, run, f"memcpy{kind}")
    if not asynchronous:
        item.done.wait()
        _ctx()


@api
def cuMemcpyHtoD(dst, src, nbytes):
    _copy(0, dst, src, nbytes, "HtoD", asynchronous=False)


@api
def cuMemcpyDtoH(dst, src, nbytes):
    _copy(0, dst, src, nbytes, "DtoH", asynchronous=False)


@api
def cuMemcpyDtoD(dst, src, nbytes):
    # Device-to-device copies are asynchronous with respect to the host even without a stream.
    _copy(0, dst, src, nbytes, "DtoD", asynchronous=True)


@api
def cuMemcpyHtoDAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "HtoD", asynchronous=True)


@api
def cuMemcpyDtoHAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "DtoH", asynchronous=True)


@api
def cuMemcpyDtoDAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "DtoD", asynchronous=True)


def _memset(stream_handle, dptr, value, count, width: int) -> None:
    ctx = _ctx()
    stream = ctx.stream(stream_handle)
    if dptr % width:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"memset of {width}-byte words at unaligned {dptr:#x}")
    if count == 0:
        return
    _device_range(ctx, dptr, count * width, "memset")
    view = ctx.memory.view({1: "u1", 4: "u4"}[width])
    start = ctx.memory.check_range(dptr, count * width) // width

    def run():
        view[start:start + count] = value
    # Even the "synchronous" memsets are asynchronous with respect to the host for device
    # memory, as the driver documents; they are ordered on the legacy stream.
    ctx.submit(stream, run, f"memsetD{width * 8}")


@api
def cuMemsetD8(dptr, value, count):
    _memset(0, dptr, value, count, 1)


@api
def cuMemsetD32(dptr, value, count):
    _memset(0, dptr, value, count, 4)


@api
def cuMemsetD8Async(dptr, value, count, stream):
    _memset(stream, dptr, value, count, 1)


@api
def cuMemsetD32Async(dptr, value, count, stream):
    _memset(stream, dptr, value, count, 4)


# ---- modules and functions -----------------------------------------------------------------
class Module:
    def __init__(self, handle: int, ptx_module, source_kind: str, figures: dict | None = None):
        self.handle = handle
        self.ptx = ptx_module
        self.source_kind = source_kind       # "ptx" or "fatbin"
        self.functions: dict[str, int] = {}  # kernel name -> function handle
        self.figures = figures or {}         # kernel name -> assembler.KernelFigures


class Function:
    def __init__(self, handle: int, module: Module, kernel):
        self.handle = handle
        self.module = module
        self.kernel = kernel
        self.max_dynamic_shared = device.MAX_SHARED_PER_BLOCK - kernel.shared_bytes
        self.figures = module.figures.get(kernel.name)     # None: the emulator's own estimates

    def resources(self) -> dict[str, int]:
        """Registers and bytes of shared, local and user constant memory per thread/CTA:
        the assembler's figures where it ran, else the emulator's estimates."""
        from ..ptx.ir import layout_variables
        k, fig = self.kernel, self.figures
        const = fig.const if fig is not None and fig.const is not None else \
            layout_variables([v for v in self.module.ptx.globals if v.space == "const"])[1]
        if fig is None:
            return {"registers": k.num_regs, "shared": k.shared_bytes, "local": k.local_bytes, "const": const}
        return {"registers": fig.registers, "shared": fig.shared, "local": fig.local, "const": const}


def _jit_options(count: int, options: int, values: int) -> dict[int, int]:
    """The (option -> value slot address) pairs of cuModuleLoadDataEx."""
    if count and not (options and values):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "JIT options given without their arrays")
    known = set(JIT_OPTION.values())
    slots = {}
    for i in range(count):
        option = ctypes.c_int.from_address(options + 4 * i).value
        if option not in known or option == JIT_OPTION["CU_JIT_NUM_OPTIONS"]:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown JIT option {option}")
        slots[option] = values + 8 * i
    return slots


def _write_log(slots: dict, buffer_option: str, size_option: str, text: str) -> None:
    buf_slot, size_slot = slots.get(JIT_OPTION[buffer_option]), slots.get(JIT_OPTION[size_option])
    if buf_slot is None or size_slot is None:
        return
    buf = ctypes.c_void_p.from_address(buf_slot).value
    capacity = ctypes.c_size_t.from_address(size_slot).value & 0xFFFFFFFF
    if not buf or capacity == 0:
        return
    data = text.encode()[: capacity - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))
    # The driver reports how much of the buffer it filled, in the size option's slot.
    ctypes.c_size_t.from_address(size_slot).value = len(data) - 1


def _refuse(slots: dict, code_name: str, log: str) -> None:
    _write_log(slots, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", log)
    raise EmuError(code_name, log)


def _read_ptx(image: int, slots: dict) -> tuple[str, str, bytes]:
    """(image kind, PTX text, PTX bytes as given) of a PTX or fatbin image."""
    try:
        kind, data = read_image(image)
        if kind == "cubin":
            raise ImageError("CUDA_ERROR_NO_BINARY_FOR_GPU",
                             "the image is a cubin (SASS, machine code for one real GPU architecture); "
                             "the emulated GPU runs PTX only: load the PTX, or a fatbin that contains PTX")
        if kind == "fatbin":
            text = ptx_from_fatbin(data, device.arch())
            return kind, text, text.encode()
        return kind, data.decode("utf-8", errors="replace"), data
    except ImageError as e:
        _refuse(slots, e.code_name, str(e))


def _check_versions(slots: dict, version, target) -> None:
    """The driver's own refusals, which come before any verdict on the PTX itself: a
    `.target` newer than the device, a PTX ISA newer than the driver."""
    refusal = device.target_refusal(target) if target else ""
    if refusal:
        _refuse(slots, "CUDA_ERROR_NO_BINARY_FOR_GPU", f"ptxas (emulated) fatal   : {refusal}")
    newest = max_ptx_isa(device.DRIVER_VERSION)
    if version is not None and tuple(version) > newest:
        _refuse(slots, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
                f"PTX ISA {version[0]}.{version[1]} is newer than this driver "
                f"(CUDA {device.DRIVER_VERSION // 1000}.{device.DRIVER_VERSION % 1000 // 10}) supports: "
                f"at most {newest[0]}.{newest[1]}")


def _option_values(slots: dict) -> dict[str, int]:
    """The JIT options given as numbers (name without CU_JIT_ -> value): each is an
    unsigned int carried in its pointer-sized slot of the values array."""
    values = {}
    for name in ("MAX_REGISTERS", "THREADS_PER_BLOCK", "OPTIMIZATION_LEVEL",
                 "GENERATE_DEBUG_INFO", "GENERATE_LINE_INFO"):
        slot = slots.get(JIT_OPTION["CU_JIT_" + name])
        if slot is not None:
            values[name] = (ctypes.c_void_p.from_address(slot).value or 0) & 0xFFFFFFFF
    return values


def _assemble(raw: bytes, version, target, slots: dict):
    """(the assembler's Assembly, a note) for an accepted module; refuses what ptxas
    refuses. (None, why) when no assembler can judge: the emulator's own checks decide."""
    from . import assembler
    asm = assembler.active()
    if asm is None:
        return None, f"checked by the emulator's own checks ({assembler.disabled_reason()})"
    newest = assembler.max_ptx_isa(asm)
    if version is not None and newest is not None and tuple(version) > newest:
        return None, (f"checked by the emulator's own checks: PTX ISA {version[0]}.{version[1]} is newer "
                      f"than {asm.description} reads")
    try:
        result = assembler.assemble(asm, raw, assembler.target_arch(target, device.arch()),
                                    assembler.jit_flags(_option_values(slots)))
    except assembler.AssemblerUnusable as e:
        return None, f"checked by the emulator's own checks: {e}"
    if not result.accepted:
        _refuse(slots, "CUDA_ERROR_INVALID_PTX", result.error_log or f"ptxas refused the PTX ({asm.description})")
    return result, f"assembled by {asm.description}"


def _decode(text: str, slots: dict, assembled: bool):
    """The emulator's decoded module; PTX it cannot run is refused, and where ptxas has
    accepted it the log says it is valid PTX, not a mistake in it."""
    from ..engine.decode import load_ptx
    try:
        return load_ptx(text)
    except PtxError as e:
        if assembled:
            where = f" at line {e.line}" if e.line else ""
            _refuse(slots, "CUDA_ERROR_INVALID_PTX", f"valid PTX that the emulated GPU cannot run: {e.message}{where}")
        _refuse(slots, "CUDA_ERROR_INVALID_PTX", f"ptxas (emulated) error   : {e}")


def _info_log(ptx_module, assembly, note: str) -> str:
    if assembly is None:
        return f"{ptx_module.info_log()}\n{note}"
    decoded = [f"emulated: {k.name}: {k.instruction_count} instructions decoded in "
               f"{len(k.compiled.blocks) if k.compiled else 0} basic blocks" for k in ptx_module.kernels.values()]
    return "\n".join([assembly.info_log, note, *decoded])


def _load(module_out: int, image: int, slots: dict) -> None:
    """cuModuleLoadData(Ex)/cuModuleLoadFatBinary: the driver's version checks, then
    ptxas's verdict (lowlevel/emu/driver/assembler.py), then the emulator's decoding."""
    ctx = _ctx()
    if not image:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL image")
    kind, text, raw = _read_ptx(image, slots)
    from .assembler import ptx_header
    version, target = ptx_header(text)
    _check_versions(slots, version, target)
    assembly, note = _assemble(raw, version, target, slots)
    ptx_module = _decode(text, slots, assembled=assembly is not None)
    _check_versions(slots, ptx_module.version, ptx_module.target)
    from ..engine.spaces import allocate_globals
    try:                     # module-scope .global/.const variables live in the context's memory
        allocate_globals(ptx_module, ctx.memory)
    except OutOfMemory:
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", "no room for the module's global variables")
    _write_log(slots, "CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", _info_log(ptx_module, assembly, note))
    _write_log(slots, "CU_JIT_ERROR_LOG_BUFFER", "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES", "")
    handle = ctx.new_handle()
    ctx.modules[handle] = Module(handle, ptx_module, kind, assembly.figures if assembly else None)
    _out(ctypes.c_void_p, module_out, handle)


@api
def cuModuleLoadData(module_out, image):
    _load(module_out, image, {})


@api
def cuModuleLoadDataEx(module_out, image, count, options, values):
    _load(module_out, image, _jit_options(count, options, values))


@api
def cuModuleLoadFatBinary(module_out, image):
    _load(module_out, image, {})


def _module(ctx: Context, handle: int) -> Module:
    return _lookup(ctx.modules, handle, "module")


@api
def cuModuleUnload(handle):
    ctx = _ctx()
    module = _module(ctx, handle)
    ctx.synchronize()       # work using the module finishes before it goes away
    for fh in module.functions.values():
        ctx.functions.pop(fh, None)
    from ..engine.spaces import free_globals
    free_globals(module.ptx, ctx.memory)
    del ctx.modules[handle]


@api
def cuModuleGetFunction(function_out, module_handle, name):
    ctx = _ctx()
    module = _module(ctx, module_handle)
    name = name.decode() if name else ""
    kernel = module.ptx.kernels.get(name)
    if kernel is None:
        known = ", ".join(sorted(module.ptx.kernels)) or "none"
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"no kernel named {name!r} in the module (kernels: {known})")
    handle = module.functions.get(name)
    if handle is None:
        handle = module.functions[name] = ctx.new_handle()
        ctx.functions[handle] = Function(handle, module, kernel)
    _out(ctypes.c_void_p, function_out, handle)


@api
def cuModuleGetGlobal(dptr_out, size_out, module_handle, name):
    ctx = _ctx()
    module = _module(ctx, module_handle)
    name = name.decode() if name else ""
    symbols = getattr(module.ptx, "symbols", {})
    if name not in symbols:
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"no global variable named {name!r} in the module")
    address, size = symbols[name]
    if dptr_out:
        _out(ctypes.c_uint64, dptr_out, address)
    if size_out:
        _out(ctypes.c_size_t, size_out, size)


def _function(ctx: Context, handle: int) -> Function:
    return _lookup(ctx.functions, handle, "function")


@api
def cuFuncGetAttribute(value_out, attribute, handle):
    ctx = _ctx()
    f = _function(ctx, handle)
    k = f.kernel
    used = f.resources()                 # ptxas's figures where it ran
    values = {
        "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": k.max_threads_per_block,
        "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES": used["shared"],
        "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES": used["const"],
        "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES": used["local"],
        "CU_FUNC_ATTRIBUTE_NUM_REGS": used["registers"],
        "CU_FUNC_ATTRIBUTE_PTX_VERSION": k.ptx_version,
        "CU_FUNC_ATTRIBUTE_BINARY_VERSION": k.binary_version,
        "CU_FUNC_ATTRIBUTE_CACHE_MODE_CA": 0,
        "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": f.max_dynamic_shared,
        "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT": -1,
    }
    by_number = {FUNCTION_ATTRIBUTE[name]: v for name, v in values.items()}
    if attribute not in by_number:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"function attribute {attribute} is not supported")
    _out(ctypes.c_int, value_out, by_number[attribute])


@api
def cuFuncGetParamInfo(handle, index, offset_out, size_out):
    ctx = _ctx()
    params = _function(ctx, handle).kernel.params
    if index >= len(params):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"parameter index {index} >= parameter count {len(params)}")
    if offset_out:
        _out(ctypes.c_size_t, offset_out, params[index].offset)
    if size_out:
        _out(ctypes.c_size_t, size_out, params[index].size)


LAUNCH_PARAM_END, LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2


def _param_buffer(kernel, kernel_params: int, extra: int) -> bytes:
    """The kernel's parameter bytes, copied now (the caller may reuse its memory at once)."""
    if kernel_params and extra:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "both kernelParams and extra were given")
    buf = bytearray(kernel.param_size)
    if kernel_params:
        for i, p in enumerate(kernel.params):
            arg = ctypes.c_void_p.from_address(kernel_params + 8 * i).value
            if not arg:
                raise EmuError("CUDA_ERROR_INVALID_VALUE", f"kernelParams[{i}] ({p.name}) is NULL")
            buf[p.offset:p.offset + p.size] = ctypes.string_at(arg, p.size)
        return bytes(buf)
    if extra:
        pointer = size = None
        i = 0
        while True:
            key = ctypes.c_void_p.from_address(extra + 8 * i).value or 0
            if key == LAUNCH_PARAM_END:
                break
            value = ctypes.c_void_p.from_address(extra + 8 * (i + 1)).value
            if key == LAUNCH_PARAM_BUFFER_POINTER:
                pointer = value
            elif key == LAUNCH_PARAM_BUFFER_SIZE:
                size = ctypes.c_size_t.from_address(value).value if value else None
            else:
                raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown key {key:#x} in extra")
            i += 2
        if pointer is None or size is None:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           "extra needs both CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE")
        if size != kernel.param_size:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"parameter buffer is {size} bytes, kernel {kernel.name} takes {kernel.param_size}")
        return ctypes.string_at(pointer, size)
    if kernel.params:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"kernel {kernel.name} takes parameters and none were given")
    return b""


def _check_config(f: Function, grid, block, shared: int) -> None:
    limits = device.attributes()
    from ...capi.constants import DEVICE_ATTRIBUTE as A
    maxima_block = [limits[A[f"CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{c}"]] for c in "XYZ"]
    maxima_grid = [limits[A[f"CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{c}"]] for c in "XYZ"]
    name = f.kernel.name
    if any(d < 1 for d in (*grid, *block)):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: grid {grid} and block {block} must be >= 1 in every dimension")
    required = f.kernel.reqntid
    if required and tuple(block) != (*required, 1, 1)[:3]:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: .reqntid requires a block of exactly "
                                                   f"{(*required, 1, 1)[:3]}, got {tuple(block)}")
    for d, m, c in zip(block, maxima_block, "xyz"):
        if d > m:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: block.{c} = {d} exceeds the device limit {m}")
    for d, m, c in zip(grid, maxima_grid, "xyz"):
        if d > m:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: grid.{c} = {d} exceeds the device limit {m}")
    threads = block[0] * block[1] * block[2]
    limit = min(1024, f.kernel.max_threads_per_block)
    if threads > limit:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: {threads} threads per block exceed the limit {limit}")
    if shared > f.max_dynamic_shared:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{name}: {shared} bytes of dynamic shared memory exceed the limit {f.max_dynamic_shared}")


@api
def cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, shared, stream_handle, kernel_params, extra):
    ctx = _ctx()
    f = _function(ctx, handle)
    stream = ctx.stream(stream_handle)
    grid, block = (gx, gy, gz), (bx, by, bz)
    _check_config(f, grid, block, shared)
    params = _param_buffer(f.kernel, kernel_params, extra)
    from ..engine.scheduler import run_kernel
    module, memory, name = f.module.ptx, ctx.memory, f.kernel.name

    def run():
        stats = run_kernel(module, name, grid=grid, block=block, params=params, memory=memory, shared_bytes=shared)
        ctx.last_launch_stats = (name, stats)
        ctx.count_instructions(stats.thread_instructions)
        if stats.printed:                   # device printf: on stdout when the kernel completes
            sys.stdout.write(stats.printed)
            sys.stdout.flush()
    ctx.submit(stream, run, f"kernel {name}")


# ---- streams --------------------------------------------------------------------------------
@api
def cuStreamCreate(stream_out, flags):
    ctx = _ctx()
    if flags & ~Stream.NON_BLOCKING:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown stream flags {flags:#x}")
    handle = ctx.new_handle()
    ctx.add_stream(handle, Stream(ctx, flags, f"stream-{handle:#x}"))
    _out(ctypes.c_void_p, stream_out, handle)


@api
def cuStreamDestroy(handle):
    ctx = _ctx(check_sticky=False)
    if handle in LEGACY_STREAM_HANDLES:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown stream handle {handle:#x}")
    # The driver returns at once and lets queued work finish; close() drains in its thread.
    # Until it is done, that work still counts for cuCtxSynchronize and the legacy stream.
    stream = ctx.retire_stream(handle)
    threading.Thread(target=stream.close, daemon=True).start()


@api
def cuStreamSynchronize(handle):
    ctx = _ctx()
    ctx.stream(handle).synchronize()
    _ctx()


@api
def cuStreamQuery(handle):
    ctx = _ctx()
    if not ctx.stream(handle).idle():
        raise EmuError("CUDA_ERROR_NOT_READY")


@api
def cuStreamWaitEvent(stream_handle, event_handle, flags):
    ctx = _ctx()
    stream = ctx.stream(stream_handle)
    event = _event(ctx, event_handle)
    if flags not in (0,):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown cuStreamWaitEvent flags {flags:#x}")
    item = event.item                   # the record current now, even if re-recorded meanwhile
    if item is not None and not item.done.is_set():
        ctx.submit(stream, lambda: None, "wait event", extra_deps=[item])


@api
def cuLaunchHostFunc(stream_handle, fn, user_data):
    ctx = _ctx()
    stream = ctx.stream(stream_handle)
    if not fn:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL host function")
    from ...capi.prototypes import CUhostFn
    callback = CUhostFn(fn)
    ctx.submit(stream, lambda: callback(user_data), "host function")


# ---- events ---------------------------------------------------------------------------------
def _event(ctx: Context, handle: int) -> Event:
    return _lookup(ctx.events, handle, "event")


@api
def cuEventCreate(event_out, flags):
    ctx = _ctx()
    if flags & ~(0x1 | 0x2 | 0x4):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown event flags {flags:#x}")
    handle = ctx.new_handle()
    ctx.events[handle] = Event(flags)
    _out(ctypes.c_void_p, event_out, handle)


@api
def cuEventDestroy(handle):
    ctx = _ctx(check_sticky=False)
    if ctx.events.pop(handle, None) is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", f"unknown event handle {handle:#x}")


@api
def cuEventRecord(event_handle, stream_handle):
    ctx = _ctx()
    event = _event(ctx, event_handle)
    stream = ctx.stream(stream_handle)
    ctx.record(event, stream)


@api
def cuEventSynchronize(handle):
    ctx = _ctx()
    event = _event(ctx, handle)
    if event.item is not None:
        event.item.done.wait()
    _ctx()


@api
def cuEventQuery(handle):
    ctx = _ctx()
    if not _event(ctx, handle).complete():
        raise EmuError("CUDA_ERROR_NOT_READY")


@api
def cuEventElapsedTime(ms_out, start_handle, end_handle):
    ctx = _ctx()
    start, end = _event(ctx, start_handle), _event(ctx, end_handle)
    if not (start.timing and end.timing):
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event was created with CU_EVENT_DISABLE_TIMING")
    if start.item is None or end.item is None:
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event has not been recorded")
    if not (start.complete() and end.complete()):
        raise EmuError("CUDA_ERROR_NOT_READY", "an event has not completed yet")
    if start.time_ns is None or end.time_ns is None:     # skipped after a fault
        raise EmuError("CUDA_ERROR_INVALID_HANDLE", "an event was never reached by its stream")
    _out(ctypes.c_float, ms_out, (end.time_ns - start.time_ns) / 1e6)


def thread_instructions() -> int:
    """Thread-instructions executed so far by kernels of this thread's current context."""
    ctx = _live(getattr(_thread, "context", None))
    return 0 if ctx is None else ctx.thread_instructions


def last_launch_stats():
    """The engine's LaunchStats of the last kernel completed in this thread's current
    context (for tools/bench_emu.py), or None."""
    ctx = _live(getattr(_thread, "context", None))
    last = None if ctx is None else getattr(ctx, "last_launch_stats", None)
    return None if last is None else last[1]

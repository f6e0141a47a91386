"""Devices and the primary context.

lowlevel uses each device's primary context (cuDevicePrimaryCtxRetain + cuCtxSetCurrent):
the one the CUDA runtime and cuBLAS use, and stable across CUDA 12 and 13. It is retained
on first use and made current on every thread that calls in. At interpreter exit nothing
waits for the device: as a driver does at process teardown, work still queued is abandoned,
and nothing is released into a context that is going away.
"""
import _signal  # noqa: PLC2701  (the builtin behind signal.signal: no Python code runs in it)
import atexit
import collections
import ctypes
import itertools
import signal
import sys
import threading
import uuid

from ..capi.enums import enum_value
from .driver import Driver, get_driver, on_switch
from .errors import ContextResetError


class _PrimaryContext:
    """The retained primary context of one device under one driver."""

    def __init__(self, drv: Driver, ordinal: int):
        self.drv = drv
        self.ordinal = ordinal
        handle = ctypes.c_void_p()
        drv.cuDevicePrimaryCtxRetain(ctypes.byref(handle), ordinal)
        self.handle = handle.value
        self.generation = 0          # bumped by reset_device(): older objects must not free


_contexts: dict[tuple[int, int], _PrimaryContext] = {}     # (id(driver), device) -> context
class _CurrentDevice(threading.local):
    ordinal = 0                  # the class default: a thread that never chose a device has 0


class _ThreadContext(threading.local):
    context = None               # (driver id, handle, generation) last made current on this thread
    ensured = (-1, None)         # (the _epoch it was found in, ensure_context's (driver, context))


# Thread-local state with class defaults: reading an attribute a thread never set finds the
# default instead of raising and catching AttributeError inside getattr (ensure_context runs
# once per op, so that costs a few tenths of a microsecond per op).
# The thread's current device; public, for a module's hot path to read
# (`device_of_thread.ordinal` is current_device_ordinal() without its frame).
device_of_thread = _CurrentDevice()
_thread_current = _ThreadContext()
_lock = threading.Lock()
shutting_down = False

# ensure_context's answer is kept per thread with the epoch it was found in; whatever could
# change it on any thread (the thread's device, the driver in use, a context reset, a
# context made current) moves the epoch to a number never used before (so a thread's kept
# answer cannot match by chance), after the change is made. A kept answer is used only while
# the epoch has not moved: a repeat op skips the lookups, never a change.
_epochs = itertools.count(1)
_epoch = 0


def _moved() -> None:
    global _epoch
    _epoch = next(_epochs)


on_switch(_moved)           # use_driver(): another driver


def current_device_ordinal() -> int:
    return device_of_thread.ordinal


def _primary(drv: Driver, ordinal: int) -> _PrimaryContext:
    key = (id(drv), ordinal)
    ctx = _contexts.get(key)
    if ctx is None:
        with _lock:
            ctx = _contexts.get(key)
            if ctx is None:
                ctx = _contexts[key] = _PrimaryContext(drv, ordinal)
                if len(_contexts) == 1:
                    _end_on_ctrl_c_at_exit()
    return ctx


def primary_context_handle(ordinal: int) -> int:
    """The CUcontext of device `ordinal`'s primary context (retained on first use)."""
    return _primary(get_driver(), ordinal).handle


def _make_current(drv: Driver, ctx: _PrimaryContext) -> None:
    # The driver's current context is per thread; remember what this thread last made current
    # (per driver and context generation), so switching devices or drivers sets it again.
    want = (id(drv), ctx.handle, ctx.generation)
    if _thread_current.context != want:
        drv.cuCtxSetCurrent(ctx.handle)
        _thread_current.context = want
        _moved()


def ensure_context() -> tuple[Driver, _PrimaryContext]:
    """The driver in use, with the current device's primary context current on this thread.

    Every call into lowlevel passes here first, holding no lock of lowlevel's: the safe
    point where releases queued by finalizers are carried out. A repeat call on a thread
    whose device, driver and context have not changed since (the epoch has not moved) and
    with no release queued returns what the last call found."""
    ensured = _thread_current.ensured
    if ensured[0] == _epoch and not _pending_releases:
        return ensured[1]
    epoch = _epoch                  # read before the lookups: a change during them moves it
    drv = get_driver()
    ordinal = device_of_thread.ordinal
    ctx = _contexts.get((id(drv), ordinal)) or _primary(drv, ordinal)
    if _thread_current.context != (id(drv), ctx.handle, ctx.generation):
        _make_current(drv, ctx)
    if _pending_releases and not _callback_state.active and not _captures[0]:    # in_host_callback(), inline
        run_pending_releases()
        _make_current(drv, ctx)     # a release makes its own context current: another device's
    _thread_current.ensured = (epoch, (drv, ctx))
    return drv, ctx


# Finalizers (__del__) run wherever the garbage collector happens to run: inside one of
# lowlevel's locks, on a stream worker of the emulated GPU, in a host callback (which must
# make no CUDA call). A release may wait for the device (cuModuleUnload, cuMemFree), and the
# device may be waiting for the very lock or thread the finalizer interrupted. So a
# finalizer only queues its release; the next thread to enter lowlevel carries it out.
class _CallbackState(threading.local):
    active = False               # True while this thread runs a host callback


_callback_state = _CallbackState()
_pending_releases: collections.deque = collections.deque()


# While a stream captures, a release (cuMemFree, cuModuleUnload, ...) would be refused by
# the driver and invalidate the capture: releases wait until no capture of lowlevel's runs.
_captures = [0]                 # how many cuda.capture blocks are open, on any thread
_captures_lock = threading.Lock()


def capture_began() -> None:
    with _captures_lock:
        _captures[0] += 1


def capture_ended() -> None:
    with _captures_lock:
        _captures[0] -= 1


def releases_allowed() -> bool:
    """Whether this thread is at a safe point for queued releases: in no host callback, and
    no cuda.capture block of lowlevel's is open (what ensure_context checks before it runs them)."""
    return not _callback_state.active and not _captures[0]


def in_host_callback() -> bool:
    return _callback_state.active


def set_in_host_callback(active: bool) -> None:
    _callback_state.active = active


def release_later(release) -> None:
    """Queue `release` (a callable) for the next safe point; for finalizers."""
    _pending_releases.append(release)


def pending_releases() -> int:
    """How many releases are queued for the next safe point."""
    return len(_pending_releases)


def run_pending_releases() -> None:
    """Carry out the releases finalizers queued (ensure_context calls this)."""
    while _pending_releases:
        try:
            release = _pending_releases.popleft()
        except IndexError:          # another thread took the last one
            return
        try:
            release()
        except Exception:           # a broken context: the reset will reclaim it
            pass


def device_count() -> int:
    count = ctypes.c_int()
    get_driver().cuDeviceGetCount(ctypes.byref(count))
    return count.value


def synchronize() -> None:
    """Wait for all work on the current device (cuCtxSynchronize)."""
    drv, _ = ensure_context()
    drv.cuCtxSynchronize()


# What must go before a context is reset (cuBLAS's handles live in it): the modules that
# keep such state subscribe here, so this module calls them without importing them.
_reset_callbacks: list = []


def on_reset(callback) -> None:
    """Call `callback()` in reset_device(), before the context goes away."""
    if callback not in _reset_callbacks:
        _reset_callbacks.append(callback)


def reset_device() -> None:
    """Destroy and recreate the current device's primary context (cuDevicePrimaryCtxReset).

    This is the way out of a sticky error (an illegal address, a trap): after it, every
    allocation, module, stream and event made before is invalid and must be made again.
    """
    drv, ctx = ensure_context()
    for callback in list(_reset_callbacks):
        callback()
    drv.cuDevicePrimaryCtxReset(ctx.ordinal)
    ctx.generation += 1                    # every thread makes the new context current again
    _moved()
    handle = ctypes.c_void_p()
    drv.cuDevicePrimaryCtxRetain(ctypes.byref(handle), ctx.ordinal)
    drv.cuDevicePrimaryCtxRelease(ctx.ordinal)   # keep exactly one reference, as before
    ctx.handle = handle.value
    _moved()


class ContextResource:
    """Something made in the current context that must be given back to the driver once:
    memory, a stream, an event, a module, a cuBLAS handle.

    A subclass calls `_adopt()` when it is made and implements `_release()`. `release()`
    runs it at most once, and not at all when the interpreter is exiting or the context has
    been reset since (the driver took everything back then). Garbage collection releases
    too, at the next safe point (see release_later); an error there (a broken context) is
    dropped, since the reset will reclaim it.
    """

    _released = False

    def _adopt(self) -> None:
        self._drv, self.context = ensure_context()
        self.context_generation = self.context.generation

    @property
    def driver(self) -> Driver:
        """The driver this object was made with (and is released to)."""
        return self._drv

    def _release(self) -> None:
        raise NotImplementedError

    def check_context(self) -> None:
        """Refuse this object if its context was reset after it was made: the new context
        may have given its handle or address to something else."""
        if self.context_generation != self.context.generation:
            raise ContextResetError(
                f"this {type(self).__name__} belongs to a context that was reset (cuda.reset_device()); "
                f"everything made before the reset must be made again")

    def release(self) -> None:
        if self._released:
            return
        if in_host_callback():
            release_later(self.release)
            return
        self._released = True
        if not shutting_down and self.context_generation == self.context.generation:
            _make_current(self._drv, self.context)     # it may be released on any thread
            self._release()

    def __del__(self):
        try:
            if not self._released and not shutting_down:
                release_later(self.release)
        except Exception:       # at interpreter teardown the module's globals may be gone
            pass


class ContextBound:
    """A ContextResource attribute (its handle, its device address) that can be read only
    while the context it was made in lives: reading it later raises ContextResetError.

    It is read wherever the object reaches the driver (copies, launches, frees, stream and
    event calls), so that check is one comparison there. The raw value is in `storage`."""

    def __init__(self, storage: str):
        self.storage = storage

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        if obj.context_generation != obj.context.generation:
            obj.check_context()
        return obj.__dict__[self.storage]

    def __set__(self, obj, value):
        obj.__dict__[self.storage] = value


class GPU:
    """A GPU (real or emulated) by ordinal: the driver's CUdevice. (lowlevel.Device is where a
    tensor lives: "cpu", "cuda:1".)"""

    def __init__(self, ordinal: int = 0):
        drv = get_driver()
        handle = ctypes.c_int()
        drv.cuDeviceGet(ctypes.byref(handle), ordinal)
        self.ordinal = ordinal
        self.handle = handle.value
        self.driver = drv

    def __repr__(self):
        major, minor = self.compute_capability
        return f"<GPU {self.ordinal}: {self.name}, sm_{major}{minor}, {self.driver.kind} driver>"

    def set_current(self) -> None:
        """Make this device the one the calling thread's work goes to."""
        if device_of_thread.ordinal != self.ordinal:
            device_of_thread.ordinal = self.ordinal
            _moved()

    @property
    def name(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self.driver.cuDeviceGetName(buf, len(buf), self.handle)
        return buf.value.decode()

    @property
    def total_memory(self) -> int:
        size = ctypes.c_size_t()
        self.driver.cuDeviceTotalMem(ctypes.byref(size), self.handle)
        return size.value

    def attribute(self, name: str) -> int:
        """A CUdevice_attribute by name: "MULTIPROCESSOR_COUNT" or "CU_DEVICE_ATTRIBUTE_..."."""
        number = enum_value("device attribute", name)
        value = ctypes.c_int()
        self.driver.cuDeviceGetAttribute(ctypes.byref(value), number, self.handle)
        return value.value

    @property
    def compute_capability(self) -> tuple[int, int]:
        return self.attribute("COMPUTE_CAPABILITY_MAJOR"), self.attribute("COMPUTE_CAPABILITY_MINOR")

    @property
    def multiprocessor_count(self) -> int:
        return self.attribute("MULTIPROCESSOR_COUNT")

    @property
    def uuid(self) -> uuid.UUID:
        """The device's UUID (cuDeviceGetUuid), as nvidia-smi shows it after "GPU-"."""
        raw = (ctypes.c_char * 16)()
        self.driver.cuDeviceGetUuid(raw, self.handle)
        return uuid.UUID(bytes=bytes(raw))

    @property
    def pci_bus_id(self) -> str:
        """"domain:bus:device.function" in hexadecimal (cuDeviceGetPCIBusId)."""
        buf = ctypes.create_string_buffer(64)
        self.driver.cuDeviceGetPCIBusId(buf, len(buf), self.handle)
        return buf.value.decode()


def _at_exit() -> None:
    """At exit, wait for nothing and release nothing: the process's teardown takes the
    contexts and everything in them, and abandons the work still queued, as with any
    driver. Releasing here could wait for that work (minutes of kernels) or for threads
    that are still running."""
    global shutting_down
    shutting_down = True
    _pending_releases.clear()


atexit.register(_at_exit)


def _end_on_ctrl_c_at_exit() -> None:
    """A second Ctrl-C while the program exits would land in an exit handler or a finalizer
    and print "Exception ignored ..."; by then it can only mean "stop", so from the start
    of exit on, Ctrl-C ends the process (SIG_DFL). Registered once the driver is loaded, so
    it runs before every exit handler lowlevel and its driver registered (atexit runs them
    last in, first out); a builtin, so no Python code runs in it for that Ctrl-C to
    interrupt. Left alone when the program installed a SIGINT handler of its own."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        atexit.register(_signal.signal, int(signal.SIGINT), int(signal.SIG_DFL))
        sys.excepthook = _ending_on_ctrl_c(sys.excepthook)


def _ending_on_ctrl_c(excepthook):
    """Python's exit runs threading's shutdown (Python code) before any exit handler, so a
    Ctrl-C that arrives after an uncaught KeyboardInterrupt's traceback could still land
    there. The traceback is printed by sys.excepthook: when it prints a KeyboardInterrupt,
    the program is ending because of Ctrl-C, and from then on Ctrl-C ends the process."""
    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt) and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            _signal.signal(int(signal.SIGINT), int(signal.SIG_DFL))
        excepthook(kind, value, tb)
    return hook

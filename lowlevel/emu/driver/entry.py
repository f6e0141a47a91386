"""How a Python function becomes an emulated C function, for the driver and for cuBLAS alike.

A C function returns a status and never raises: `CFunctions` is a table of them by public
name, whose decorator turns what the implementation raises into the status C code expects
(each library says how, in its `failure`). A Ctrl-C (KeyboardInterrupt, SystemExit) cannot
cross the ctypes boundary: it is kept for the caller to raise again (`pending_interrupt`).
Out-parameters are written through their C pointer by `write_out`.
"""
import functools
import threading
import time

from .errors import EmuError

_interrupt = threading.local()         # .exc: a KeyboardInterrupt/SystemExit caught in a call

# The time the calling threads spend inside emulated C functions: the emulator's Python,
# which on a GPU would be the driver's (and the GPU's) work. Measured only while a trace
# asks (count_call_time), so that an untraced call pays one global read.
_counting = [False]
_spent = threading.local()             # .wall, .cpu: seconds inside calls on this thread; .depth


def count_call_time(on: bool) -> None:
    """Start (True) or stop measuring the time spent inside emulated calls."""
    _counting[0] = on


def call_time() -> tuple[float, float]:
    """(wall, CPU) seconds this thread has spent inside emulated calls while counting."""
    return getattr(_spent, "wall", 0.0), getattr(_spent, "cpu", 0.0)


def _timed(run, args):
    depth = getattr(_spent, "depth", 0)
    if depth:                           # a call made inside a call is counted once
        return run(args)
    _spent.depth = 1
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        return run(args)
    finally:
        _spent.depth = 0
        _spent.wall = getattr(_spent, "wall", 0.0) + time.perf_counter() - wall
        _spent.cpu = getattr(_spent, "cpu", 0.0) + time.thread_time() - cpu


# Under the time model an operation is submitted when the host called the function that
# queued it (the emulator's Python inside the call stands for a driver's microseconds).
# Noted only once a context has the model (stamp_calls), so that other calls pay one read.
_stamping = [False]
_call = threading.local()              # .start_ns: when this thread's outermost call began


def stamp_calls() -> None:
    """From now on, note when each outermost emulated call begins (call_started_ns)."""
    _stamping[0] = True


def call_started_ns() -> int | None:
    """When the emulated call this thread is in began (perf_counter_ns), if noted."""
    return getattr(_call, "start_ns", None)


class NullOutput(EmuError):
    """An out-parameter pointer that is NULL (each library returns its own 'invalid value')."""

    def __init__(self):
        super().__init__("CUDA_ERROR_INVALID_VALUE", "NULL output pointer")


def write_out(ctype, address: int, value) -> None:
    """Store `value` as a `ctype` at C pointer `address`."""
    if not address:
        raise NullOutput()
    ctype.from_address(address).value = value


class CFunctions(dict):
    """Emulated C functions by public name. `failure(name, exc) -> status` turns an exception
    into the library's status; `success` is returned otherwise, or, with `returns_status`,
    what the implementation returns when that is not None (cuBLAS's may return a status)."""

    def __init__(self, success: int, failure, returns_status: bool = True):
        super().__init__()
        self.success = success
        self.failure = failure
        self.returns_status = returns_status

    def __call__(self, fn):
        """Register `fn` as the implementation of the C function of the same name."""
        def run(args):
            try:
                # ctypes hands a NULL pointer to a callback as None; C code would see 0.
                result = fn(*[0 if a is None else a for a in args])
            except BaseException as exc:        # nothing may cross the C boundary
                return self.failure(fn.__name__, exc)
            return result if self.returns_status and result is not None else self.success

        @functools.wraps(fn)
        def entry(*args):
            if _stamping[0] and getattr(_call, "start_ns", None) is None:
                _call.start_ns = time.perf_counter_ns()     # the outermost call: note when it began
                try:
                    return entry(*args)
                finally:
                    _call.start_ns = None
            # timed from here: all of the call but ctypes' conversion of the arguments
            return _timed(run, args) if _counting[0] else run(args)
        self[fn.__name__] = entry
        return entry


def keep_interrupt(exc: BaseException) -> None:
    """Keep a KeyboardInterrupt/SystemExit raised inside a C callback for the caller to
    re-raise (see pending_interrupt); a callback cannot raise through ctypes."""
    _interrupt.exc = exc


def pending_interrupt() -> BaseException | None:
    """The KeyboardInterrupt/SystemExit that interrupted this thread's last emulated call
    (which then failed), or None; cleared by the call. The binding layer re-raises it after
    a failed call."""
    exc = getattr(_interrupt, "exc", None)
    _interrupt.exc = None
    return exc

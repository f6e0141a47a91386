"""Which driver runs: the real libcuda, or the emulated GPU behind the same C table.

`LOWLEVEL_DRIVER=cuda|emu` chooses; by default the real driver is used when libcuda.so.1
loads and reports at least one device, else the emulated GPU. `LOWLEVEL_LIBCUDA=/path`
overrides where libcuda is loaded from. `LOWLEVEL_LOG_API=1` prints every driver call with
its arguments, result and duration to stderr: the boundary made visible.

Every call is checked: a CUresult other than CUDA_SUCCESS raises CudaError. Calls whose
non-success results are answers (cuStreamQuery's CUDA_ERROR_NOT_READY) use `.unchecked`.
"""
import ctypes
import os
import sys
import threading
import time

from .. import trace
from . import bindings, profiling
from .checked import IntegerArguments
from ..capi.constants import CURESULT, CURESULT_NAME
from .errors import CudaError

DEFAULT_LIBCUDA = "libcuda.so.1"


class DriverFunction:
    """One bound C function: call it to have its CUresult checked.

    Its integer arguments are range-checked first (see checked.py): ctypes would pass the
    low bits of one too large for its C type, and the driver would act on those."""

    __slots__ = ("driver", "name", "symbol", "cfunc", "integers")

    def __init__(self, driver, name, symbol, cfunc):
        self.driver, self.name, self.symbol, self.cfunc = driver, name, symbol, cfunc
        self.integers = IntegerArguments(symbol, bindings.PROTOTYPES[name][1])

    def __call__(self, *args):
        code = self.unchecked(*args)
        if code != 0:
            raise self.driver.error(code, self.symbol)

    def unchecked(self, *args) -> int:
        self.integers.check(args)
        if not self.driver.log_api and trace.active is None:
            code = self.cfunc(*args)
            if code != 0:
                self.driver.reraise_interrupt()
            return code
        timeline = trace.active_timeline           # a profile: timestamps, and events around device work
        pending = profiling.begin_call(timeline, self.driver, self.name, args) if timeline is not None else None
        start_ns = time.perf_counter_ns()
        code = self.cfunc(*args)
        end_ns = time.perf_counter_ns()
        shown = ", ".join(show_argument(a) for a in args)
        result = CURESULT_NAME.get(code, str(code))
        if timeline is not None:
            profiling.end_call(timeline, self.driver, self.name, self.symbol, args, pending, start_ns, end_ns,
                               shown, result, "driver")
        if code != 0:
            self.driver.reraise_interrupt()
        elapsed = (end_ns - start_ns) / 1e9
        trace.note_call(self.driver.kind, self.symbol, shown, result, elapsed)
        if self.driver.log_api:
            print(f"[lowlevel {self.driver.kind}] {self.symbol}({shown}) -> {result} ({elapsed * 1e6:.1f} us)",
                  file=sys.stderr, flush=True)
        return code


def show_argument(arg) -> str:
    """An argument as the log shows it; byref out-parameters with the value they now hold."""
    obj = getattr(arg, "_obj", None)                # what byref(x) points at
    if obj is not None:
        value = getattr(obj, "value", None)
        if isinstance(value, int) and not isinstance(obj, ctypes.c_int):
            return f"&{value:#x}"
        return f"&{value!r}" if value is not None else f"&{type(obj).__name__}"
    if isinstance(arg, ctypes.Array):
        return f"<{type(arg).__name__}>"
    if isinstance(arg, bytes):
        return repr(arg[:40])
    if isinstance(arg, int) and arg > 0xFFFF:
        return hex(arg)
    return repr(arg)


def no_interrupt() -> BaseException | None:
    """The real driver's interrupt hook: a C library never holds one of Python's."""
    return None


def no_details(code: int) -> str:
    """The real driver's error-detail hook: it says nothing beyond the error string."""
    return ""


class Driver:
    """The C function table bound to one implementation, with what that implementation
    provides besides its C functions. The loader below builds it; nothing else in
    lowlevel.cuda asks which implementation it is.

    .kind is "cuda" (the real libcuda) or "emu" (the emulated GPU), for reports only;
    .description says which library it is, and why it was chosen. .runs_sass: whether
    the driver loads SASS (cubins) for its device; the emulated GPU runs PTX only.
    .pending_interrupt() returns a Ctrl-C (or SystemExit) that arrived inside a call, to be
    raised again here; .error_details(code) what the driver knows about its last failure.
    .cublas_functions() returns cuBLAS's C functions when the driver brings its own
    implementation of them (the emulated GPU does); None: the real libcublas is loaded.
    .timing says what the device times it reports (cuEventElapsedTime) mean.
    """

    def __init__(self, kind: str, functions: dict, description: str, *, runs_sass: bool,
                 pending_interrupt=no_interrupt, error_details=no_details, cublas_functions=None,
                 keepalive=None, timing=None):
        self.kind = kind
        self._timing = timing               # the emulator's timing(); None: measured on the GPU
        self.description = description
        self.runs_sass = runs_sass
        self.pending_interrupt = pending_interrupt
        self.error_details = error_details
        self.cublas_functions = cublas_functions
        self.log_api = os.environ.get("LOWLEVEL_LOG_API", "") not in ("", "0")
        self._keepalive = keepalive         # the emulator's callbacks must outlive every call
        for name, cfunc in functions.items():
            setattr(self, name, DriverFunction(self, name, bindings.PROTOTYPES[name][0], cfunc))

    def __getattr__(self, name):
        # Only reached for names not bound above.
        if name in bindings.PROTOTYPES:
            raise RuntimeError(f"{bindings.PROTOTYPES[name][0]} is not exported by this driver "
                               f"({self.description}); it is too old for this call")
        raise AttributeError(name)

    @property
    def emulated(self) -> bool:
        """Whether the device is the emulated GPU: lowlevel.emu bound directly ("emu"), or the
        real-driver binding over the emulated GPU's drop-in libcuda.so.1 ("cuda")."""
        return self._timing is not None

    @property
    def timing(self) -> str:
        """What device times (events) mean: "measured on the GPU", "emulator CPU time", or
        "modelled (H200 time model)" (LOWLEVEL_EMU_TIMING=model, read as the emulator makes
        each context: set it before the first use of a device)."""
        return "measured on the GPU" if self._timing is None else self._timing()

    def reraise_interrupt(self) -> None:
        """Raise the Ctrl-C (or SystemExit) that arrived inside a call of this driver.

        The emulator runs as ctypes callbacks, and an exception cannot cross the C boundary:
        the callback keeps it and fails the call, and it is raised again here, on our side."""
        exc = self.pending_interrupt()
        if exc is not None:
            raise exc

    def error(self, code: int, symbol: str, log: str = "") -> CudaError:
        """The CudaError for `code`, with the driver's own description of it."""
        text = ctypes.c_char_p()
        description = ""
        if self.cuGetErrorString.cfunc(code, ctypes.byref(text)) == 0 and text.value:
            description = text.value.decode(errors="replace")
        return CudaError(code, symbol, description, log, self.error_details(code))

    def version(self) -> int:
        """cuDriverGetVersion: 1000 * major + 10 * minor, e.g. 13000 for 13.0."""
        v = ctypes.c_int()
        self.cuDriverGetVersion(ctypes.byref(v))
        return v.value


def _load_real(path: str) -> tuple[Driver | None, str]:
    """The real driver if it loads, initialises and has a device, else (None, why not)."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return None, f"{path} not loadable ({e})"
    if hasattr(lib, "lowlevel_emu_fill"):
        drv = _over_emulated_libcuda(lib, path)
    else:
        drv = Driver("cuda", bindings.bind_library(lib), f"real driver ({path})", runs_sass=True)
    code = drv.cuInit.unchecked(0)
    if code != 0:
        return None, f"{path} loaded but cuInit failed with {CURESULT_NAME.get(code, code)}"
    count = ctypes.c_int()
    drv.cuDeviceGetCount(ctypes.byref(count))
    if count.value == 0:
        return None, f"{path} loaded but reports no device"
    return drv, ""


def _emulator_hooks() -> dict:
    """What the emulated GPU brings to a Driver, whichever way it is bound: it runs no SASS,
    its failures carry its details, its cuBLAS is its own, its times are its own."""
    # Imported here, not at the top: where a real GPU runs, the emulator is never loaded.
    from .. import emu  # noqa: PLC0415
    return {"runs_sass": False, "pending_interrupt": emu.pending_interrupt, "error_details": emu.error_details,
            "cublas_functions": emu.cublas_functions, "timing": emu.timing}


def _over_emulated_libcuda(lib: ctypes.CDLL, path: str) -> Driver:
    """The real-driver binding over lowlevel's own drop-in libcuda.so.1 (lowlevel.emu.libcuda):
    every call crosses the C library, but the device is the emulated GPU, so its reports say
    so (cuBLAS is the emulated one: a real libcublas cannot reach the emulated device's memory)."""
    return Driver("cuda", bindings.bind_library(lib), f"the emulated GPU behind its libcuda.so.1 ({path})",
                  **_emulator_hooks())


def _load_emulator(reason: str) -> Driver:
    from .. import emu  # noqa: PLC0415
    functions = bindings.bind_python(emu.functions())
    description = "emulated GPU (lowlevel.emu)" + (f"; {reason}" if reason else "")
    return Driver("emu", functions, description, keepalive=functions, **_emulator_hooks())


_lock = threading.Lock()
_loaded: dict[str, Driver] = {}          # kind -> driver, each loaded at most once
_current: Driver | None = None


def _load(kind: str) -> Driver:
    """Load the driver of `kind` ("cuda", "emu" or "" for the default choice), cuInit done."""
    path = os.environ.get("LOWLEVEL_LIBCUDA", DEFAULT_LIBCUDA)
    if kind == "emu":
        drv = _loaded.get("emu") or _load_emulator("chosen by LOWLEVEL_DRIVER=emu")
    elif kind == "cuda":
        drv = _loaded.get("cuda")
        if drv is None:
            drv, why_not = _load_real(path)
            if drv is None:
                raise RuntimeError(f"the real CUDA driver is unusable: {why_not}")
    else:
        drv = _loaded.get("cuda")
        if drv is None:
            drv, why_not = _load_real(path)
            if drv is None:
                drv = _loaded.get("emu") or _load_emulator(f"no real GPU: {why_not}")
    drv.cuInit(0)
    _loaded[drv.kind] = drv
    return drv


def get_driver() -> Driver:
    """The driver in use, chosen on first use from LOWLEVEL_DRIVER (see the module doc)."""
    global _current
    if _current is None:
        with _lock:
            if _current is None:
                choice = os.environ.get("LOWLEVEL_DRIVER", "").strip().lower()
                if choice not in ("", "cuda", "emu"):
                    raise ValueError(f"LOWLEVEL_DRIVER={choice!r}: expected 'cuda' or 'emu'")
                _current = _load(choice)
    return _current


def use_driver(kind: str) -> Driver:
    """Switch this process to the driver of `kind` ("cuda" or "emu"); tests use it to run
    the same code on every driver present. Objects keep the driver they were made with."""
    global _current
    if kind not in ("cuda", "emu"):
        raise ValueError(f"driver kind {kind!r}: expected 'cuda' or 'emu'")
    with _lock:
        _current = _load(kind)
    for callback in _switch_callbacks:
        callback()
    return _current


_switch_callbacks: list = []


def on_switch(callback) -> None:
    """Call `callback()` after use_driver() switched drivers (context.py forgets what each
    thread's ensure_context found: it was another driver's)."""
    if callback not in _switch_callbacks:
        _switch_callbacks.append(callback)


def real_driver_status() -> str:
    """'' when a real driver with a device is usable here, else the reason it is not."""
    return _load_real(os.environ.get("LOWLEVEL_LIBCUDA", DEFAULT_LIBCUDA))[1]


SUCCESS = CURESULT["CUDA_SUCCESS"]
NOT_READY = CURESULT["CUDA_ERROR_NOT_READY"]

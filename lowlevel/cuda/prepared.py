"""Prepared launches: a kernel, its launch configuration and its parameter buffer, resolved
once, so that a launch is a write of the values in place and one call of the C function.

    add = module.get_function("add_f32").prepare(grid=8, block=256)
    add(out_ptr, a_ptr, b_ptr, n, stream=s)          # as Function.launch, minus its setup

What `Function.launch` does per call, a PreparedLaunch does once, at `prepare`:
  - the grid, block and shared-memory size are checked (and become C values) once;
  - the parameter layout (offset, size, declared type of each) is read from the driver
    once, and one buffer with the void* array pointing into it is made once;
  - the C function is called without ctypes' per-call argument conversion: its constant
    arguments are made once (the configuration as Python ints below 2**31, which ctypes
    passes as the same 32 bits; c_uint objects above; the handles as c_void_p objects).
Per call only what changes is checked: each value's type, and its range for its declared
type (one struct.pack_into does both for plain ints and floats). Anything else (a
DeviceAllocation, a numpy scalar, bytes, a negative int for a .u32, a value out of range)
goes through `kernel_args.pack_value`, which packs it or raises exactly the error
`Function.launch` raises. While the API is logged or a trace runs, the launch goes through
the driver's checked function, so it is reported like any other call.

`run_own` is for the backend's own values (addresses, counts, strides it computed, float
parameters): not screened by type as a user's values are, still range-checked the same way
(the same errors); values equal to the last call's are the bytes the buffer holds already
and are not packed again (floats equal in value have the same bytes, but zeros: values with
a float zero are packed at every call).

The buffer is reused: the driver copies the values at launch, and a call that finds it in
use by another thread packs into a buffer of its own instead.
"""
import ctypes
import functools
import struct
import threading
from ctypes import c_uint, c_void_p

import numpy as np

from .. import trace
from .bindings import raw_function
from .checked import c_integer, integer
from .kernel_args import pack_value
from .stream import stream_handle

# struct codes by (kind, size) for the values the fast path packs; a .f16 (its rounding and
# overflow are numpy's) and a .pred or .b8 array always take pack_value.
_CODES = {("s", 1): "b", ("s", 2): "h", ("s", 4): "i", ("s", 8): "q",
          ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
          ("f", 4): "f", ("f", 8): "d"}
F32_MAX = float(np.finfo(np.float32).max)
_PLAIN_NUMBERS = frozenset({int, float})     # exactly these types (not bool, not numpy's) take pack_into
_MAX_STREAMS = 64           # stream handles whose C value is kept


def _code(ptype: str | None, size: int) -> str | None:
    kind = (ptype or "")[:1]
    kind = "u" if kind in ("u", "b", "") else kind      # unknown type: an integer, as pack_value reads it
    return _CODES.get((kind, size))


def launch_dims(value, what: str) -> tuple[int, int, int]:
    """An int or a 1-3 tuple of ints as (x, y, z), each one a C unsigned int (cuLaunchKernel's)."""
    try:
        dims = (value,) if hasattr(value, "__index__") else tuple(value)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    try:
        dims = [integer(d, what) for d in dims]
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}") from None
    if any(d < 1 for d in dims):
        raise ValueError(f"{what} must be >= 1 in every dimension, got {value!r}")
    dims = [c_integer(d, c_uint, f"{what}.{axis}") for d, axis in zip(dims, "xyz")]
    return (*dims, 1, 1)[:3]


def shared_bytes(shared_mem, name: str) -> int:
    """The dynamic shared memory of a launch: an int >= 0 that a C unsigned int holds."""
    shared_mem = integer(shared_mem, f"{name}: shared_mem")
    if shared_mem < 0:
        raise ValueError(f"{name}: shared_mem must be >= 0, got {shared_mem}")
    return c_integer(shared_mem, c_uint, f"{name}: shared_mem")


def _c_unsigned(value: int):
    """A C unsigned int argument of the untyped C function (_bind): the Python int itself
    below 2**31, which ctypes passes as a C int (the same 32 bits, in the same register or
    stack slot, as the unsigned int cuLaunchKernel reads, on x86-64 and aarch64) and converts
    faster than a c_uint; a c_uint object above, where a C int cannot hold the value."""
    return value if value < 1 << 31 else c_uint(value)


class PreparedLaunch:
    """One kernel with one launch configuration; call it with the kernel's arguments."""

    def __init__(self, function, grid, block, shared_mem: int = 0):
        name = function.name
        self.function = function
        self.grid = launch_dims(grid, f"{name}: grid")
        self.block = launch_dims(block, f"{name}: block")
        self.shared_mem = shared_bytes(shared_mem, name)
        self._launch = function.driver.cuLaunchKernel        # the driver's checked function
        self._driver, self._module = function.driver, function.module
        self._handle = function.handle                        # refused if the context was reset
        self._config = tuple(_c_unsigned(v) for v in (*self.grid, *self.block, self.shared_mem))
        self._c_handle = c_void_p(self._handle)
        self._layout(function)
        # the void* array by reference: the same pointer (its first element's address), that
        # ctypes passes as it is, where the array itself becomes a new C argument per call
        self._params_ref = ctypes.byref(self._kernel_params) if self._kernel_params is not None else None
        self._lock = threading.Lock()
        self._packed = None         # the values the buffer holds, packed by struct (run_own)
        self._cfunc = self._raw = None
        self._streams: dict[int, c_void_p | None] = {0: None}

    def _layout(self, function) -> None:
        """The one buffer, the void* array into it, and the struct that fills it."""
        params = function.params
        self._count = len(params)
        self._fields = function.declared_params()
        size = max((off + sz for off, sz in params), default=0)
        self._buffer = ctypes.create_string_buffer(max(1, size))
        base = ctypes.addressof(self._buffer)
        self._offsets = [(base + off, sz) for off, sz in params]
        self._kernel_params = (c_void_p * len(params))(*[a for a, _ in self._offsets]) if params else None
        codes = [_code(ptype, sz) for (_, ptype), (_, sz) in zip(self._fields, params)]
        self._f32 = tuple(i for i, c in enumerate(codes) if c == "f")
        self._floats = tuple(i for i, c in enumerate(codes) if c in ("f", "d"))
        self._struct = None
        if None not in codes and all(a[0] <= b[0] for a, b in zip(params, params[1:])):
            fmt, at = "<", 0
            for (off, sz), c in zip(params, codes):
                fmt += "x" * (off - at) + c
                at = off + sz
            self._struct = struct.Struct(fmt)

    def __repr__(self):
        return f"<PreparedLaunch {self.function.name} grid={self.grid} block={self.block}>"

    # -- the values ------------------------------------------------------------------------
    def _write(self, args, own: bool = False) -> None:
        """The values into the buffer: plain ints and floats by one pack_into, anything else
        (or a value that does not fit) through pack_value, which raises what launch does.
        `own`: the backend's values (run_own), not screened by type, and remembered once
        packed by pack_into, so that the same values next time are not packed again."""
        self._packed = None
        if len(args) != self._count:
            raise TypeError(f"{self.function.name} takes {self._count} arguments, got {len(args)}")
        fast = self._struct
        if fast is not None and (own or _PLAIN_NUMBERS.issuperset(map(type, args))):
            for i in self._f32:
                if not -F32_MAX <= args[i] <= F32_MAX:        # NaN and inf: pack_value's call
                    break
            else:
                try:
                    fast.pack_into(self._buffer, 0, *args)
                    # Floats equal in value have the same bytes, but for zeros (0.0 == -0.0):
                    # values with a zero float are never taken as packed already.
                    if own and not any(args[i] == 0 for i in self._floats):
                        self._packed = args
                    return
                except (struct.error, OverflowError):
                    pass
        for i, value in enumerate(args):
            address, size = self._offsets[i]
            pname, ptype = self._fields[i]
            data = pack_value(self.function.name, i, pname, ptype, size, value)
            ctypes.memmove(address, data, size)

    # -- the launch ------------------------------------------------------------------------
    def __call__(self, *args, stream=None) -> None:
        """Queue the kernel with `args` on `stream` (default: the legacy default stream)."""
        self.run_on(stream_handle(stream, f"{self.function.name}: stream"), args)

    def run_on(self, handle: int, args) -> None:
        """__call__ for a caller that has read the stream's handle already (`Stream.handle`,
        which refuses a stream of a reset context; 0: the legacy default stream); `args` is
        the tuple of values. Every check of the values and of the module's context stays."""
        module = self._module
        if module.context_generation != module.context.generation:
            module.check_context()
        if not self._lock.acquire(False):
            self._launch_unshared(args, handle)            # another thread is using the buffer
            return
        try:
            fast = self._struct
            if fast is not None and not self._f32 and len(args) == self._count \
                    and _PLAIN_NUMBERS.issuperset(map(type, args)):
                self._packed = None
                try:                                  # _write's first case, inline (no floats)
                    fast.pack_into(self._buffer, 0, *args)
                except (struct.error, OverflowError):
                    self._write(args)
            else:
                self._write(args)
            self._call(handle)
        finally:
            self._lock.release()

    def run_own(self, handle: int, values: tuple) -> None:
        """run_on for values the caller computed itself, not a user's: ints (device
        addresses, counts, strides) for the integer parameters, Python floats for the float
        ones (what the backend passes). They are not screened by type, as a user's are; each
        is still range-checked for its declared type (by struct, or by pack_value, which
        raises what launch raises, naming the kernel and the parameter). Values equal to the
        last call's are the bytes the buffer holds already, checked then, and are not packed
        again (a float zero is always packed again: 0.0 == -0.0, but their bytes differ)."""
        module = self._module
        if module.context_generation != module.context.generation:
            module.check_context()
        if not self._lock.acquire(False):
            self._launch_unshared(values, handle)          # another thread is using the buffer
            return
        try:
            packed = self._packed
            if values != packed:
                self._write(values, own=True)
            # _call, inline (the op's hot path: one frame less)
            if self._launch.cfunc is not self._cfunc or self._driver.log_api or trace.active is not None:
                self._call_checked(handle)
                return
            stream = self._streams.get(handle, False)
            if stream is False:
                stream = self._stream_value(handle)
            code = self._configured(stream, self._params_ref, None)
            if code != 0:
                self._driver.reraise_interrupt()
                raise self._driver.error(code, self._launch.symbol)
        finally:
            self._lock.release()

    def _call(self, handle: int) -> None:
        """The C function on the packed buffer (with the lock held): bound directly, or
        through the driver's checked function while logged or traced (or to bind it)."""
        if self._launch.cfunc is not self._cfunc or self._driver.log_api or trace.active is not None:
            self._call_checked(handle)
            return
        stream = self._streams.get(handle, False)
        if stream is False:
            stream = self._stream_value(handle)
        code = self._configured(stream, self._params_ref, None)
        if code != 0:
            self._driver.reraise_interrupt()
            raise self._driver.error(code, self._launch.symbol)

    def _stream_value(self, handle: int):
        """The C value of a stream handle, kept for the next launch on that stream."""
        if len(self._streams) > _MAX_STREAMS:
            self._streams = {0: None}
        value = self._streams[handle] = c_void_p(handle)
        return value

    def _launch_unshared(self, args, handle: int) -> None:
        packed = self.function.pack(args)
        self._launch(self._handle, *self.grid, *self.block, self.shared_mem, handle, packed.kernel_params, None)

    def _call_checked(self, handle: int) -> None:
        """Through the driver's checked function: logged and traced like any call. Also the
        first call, and the first after the C function was replaced, which bind it."""
        launch = self._launch
        if launch.driver.log_api or trace.active is not None:
            launch(self._handle, *self.grid, *self.block, self.shared_mem, handle, self._kernel_params, None)
            return
        self._bind(launch.cfunc)
        stream = self._streams.get(handle, False)
        code = self._raw(self._c_handle, *self._config, self._stream_value(handle) if stream is False else stream,
                         self._params_ref, None)
        if code != 0:
            launch.driver.reraise_interrupt()
            raise launch.driver.error(code, launch.symbol)

    def _bind(self, cfunc) -> None:
        """The C function at the same address, called without per-call argument conversion
        (the arguments are ctypes values already); `cfunc` is kept, so it stays alive."""
        self._raw = raw_function(cfunc)
        # the kernel and the configuration, the same C values at every call: bound once
        self._configured = functools.partial(self._raw, self._c_handle, *self._config)
        self._cfunc = cfunc


__all__ = ["PreparedLaunch", "launch_dims", "shared_bytes"]

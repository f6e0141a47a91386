"""Layer 1: making tensors. empty, zeros, ones, full, arange, tensor() from data (lists,
numbers, numpy arrays, tensors), and from_numpy_values, which the backends use to hand
back results computed on the host. Each takes requires_grad=True to make a leaf that
autograd accumulates a gradient into (floating-point dtypes only).

On CUDA, full (zeros, ones) and arange write their values on the device (the backend's
"fill" and "arange"); rand, randn and randint are random.py's, drawn on the device too.
"""
import contextlib
import math

import numpy as np

from ..cuda import current_stream, get_driver, memcpy_htod_async, memset_d8, memset_d32
from ..cuda.graph import is_current_stream_capturing, refuse_while_capturing
from ..cuda.allocator import on_empty_cache
from ..cuda.context import device_of_thread, on_reset
from ..dispatch import call
from . import dtypes as dt
from .device import Device, device_guard
from .dtypes import DType, as_dtype
from .errors import ArgumentError, ShapeError, ValueRangeError
from .shapes import contiguous_strides, shape_args
from .tensor import Storage, Tensor


def _leaf(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_(True) if requires_grad else t       # requires_grad_: autograd/record.py


def empty(*shape, dtype=dt.float32, device="cpu", requires_grad=False) -> Tensor:
    shape = tuple(shape_args(shape))
    if any(s < 0 for s in shape):
        raise ShapeError(f"negative dimension in shape {shape}")
    dtype = as_dtype(dtype)
    device = device if type(device) is Device else Device(device)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= 1 << 64:
        raise ShapeError(f"empty: shape {shape} of {dtype.name} is {nbytes} bytes, more than a 64-bit "
                         f"address space holds")
    storage = Storage(nbytes, device)
    return _leaf(Tensor(storage, shape, contiguous_strides(shape), 0, dtype), requires_grad)


def from_numpy_values(values: np.ndarray, dtype: DType, device) -> Tensor:
    """A tensor holding `values` (converted to dtype) on `device`."""
    device = device if type(device) is Device else Device(device)
    if device.type != "cuda":
        # from_numpy_values made a new array already; reshape(-1) reads any layout in order
        host = dtype.from_numpy_values(values)
        t = empty(host.shape, dtype=dtype, device=device)
        t.storage.host[:host.nbytes] = host.reshape(-1).view(np.uint8)
        return t
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into a 1-d one.
    host = np.array(dtype.from_numpy_values(values), order="C")
    if host.nbytes:
        refuse_while_capturing("a copy of a numpy array (pageable host memory) to the device",
                               "a captured copy would read the host memory at each replay, long after "
                               "the array is gone; copy_ into a tensor made before the capture instead")
    t = empty(host.shape, dtype=dtype, device=device)
    if host.nbytes:
        with device_guard(device.index):        # in the order of the tensor's own device
            # From pageable memory the driver stages the bytes, so `host` may go at once.
            memcpy_htod_async(t.data_ptr, host, current_stream())
    return t


_constants: dict = {}          # (number, dtype, device, stream, context) -> its 0-d tensor
_MAX_CONSTANTS = 256
on_empty_cache(_constants.clear)          # empty_cache() returns their memory to the driver too
on_reset(_constants.clear)                # a reset context's constants are no use


def scalar_tensor(value, dtype: DType, device) -> Tensor:
    """The 0-d tensor of `dtype` on `device` that a Python number stands for in an op
    (x * 2.0), with the number in `.scalar_value` so that a backend may pass it to a kernel
    as an argument instead of reading the tensor.

    Made once per number, dtype, device, stream and context, then reused: an op never
    writes into its operands and this tensor is handed to no caller (an autograd node may
    save it: its storage's `constant` makes every in-place write refuse it), so its bytes
    stay what they were (and, made on the stream that uses it, are there in that stream's
    order).
    """
    device = device if type(device) is Device else Device(device)
    # 0.0 == -0.0 (and they hash alike), but they are different numbers: the sign of a
    # zero is part of the key, or x - -0.0 would reuse the tensor of +0.0. The device is in
    # the key as its type and index (what Device's == compares), hashed without a call of
    # Device.__hash__.
    negative_zero = value == 0 and math.copysign(1.0, value) < 0
    if device.type != "cuda":
        key = (type(value), value, negative_zero, dtype, device.type, device.index)
    else:
        if is_current_stream_capturing():
            return _captured_scalar(value, dtype, device)
        # The driver and device whose context the tensor would be made in, and the stream;
        # no context generation: a reset empties the cache (on_reset above).
        index, current = device.index, device_of_thread.ordinal
        if index is None or index == current:      # no device to switch to
            stream, index = current_stream(), current
        else:
            with device_guard(index):                   # the stream of the tensor's own device
                stream = current_stream()
        key = (type(value), value, negative_zero, dtype, "cuda", index, id(get_driver()),
               0 if stream is None else stream.handle)
    t = _constants.get(key)
    if t is None:
        check_fits(value, dtype)
        with np.errstate(over="ignore"):        # a float beyond float16's range is its inf, as in PyTorch
            t = from_numpy_values(np.array(value), dtype, device)
            stored = dtype.from_numpy_values(np.array(value))       # as the tensor holds it
        t.scalar_value = t.storage.constant = dtype.to_numpy_values(stored).item()
        if len(_constants) >= _MAX_CONSTANTS:
            _constants.clear()
        _constants[key] = t
    return t


def _captured_scalar(value, dtype: DType, device: Device) -> Tensor:
    """scalar_tensor inside a graph capture: written by memsets (captured as nodes, so each
    replay writes it again), not copied from host memory; made in the graph's private pool,
    not cached (the graph's memory is its own)."""
    check_fits(value, dtype)
    stored = np.array(dtype.from_numpy_values(np.array(value))).reshape(-1).view(np.uint8)
    t = empty((), dtype=dtype, device=device)
    stream, ptr = current_stream(), t.data_ptr
    for at in range(0, stored.size - stored.size % 4, 4):
        memset_d32(ptr + at, int(stored[at:at + 4].view(np.uint32)[0]), 1, stream)
    for at in range(stored.size - stored.size % 4, stored.size):
        memset_d8(ptr + at, int(stored[at]), 1, stream)
    t.scalar_value = dtype.to_numpy_values(stored.view(dtype.storage)).item()
    return t


def check_fits(value, dtype: DType) -> None:
    """Refuse a number that an integer dtype cannot hold, as PyTorch does ("value cannot be
    converted to type int32 without overflow"), instead of wrapping it."""
    if dtype in _INT_RANGE and not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.number)):
        low, high = _INT_RANGE[dtype]
        if not low <= value <= high:
            raise ValueRangeError(f"value cannot be converted to type {dtype.name} without overflow: {value}")


_INT_RANGE = {dt.int32: (-2 ** 31, 2 ** 31 - 1), dt.int64: (-2 ** 63, 2 ** 63 - 1)}


def _check_data_fits(values: np.ndarray, dtype: DType) -> None:
    """The numbers of a list against the dtype they go into: an int beyond int64 (numpy
    holds it as uint64 or an object) is refused as PyTorch refuses it ("Overflow when
    unpacking long long"), and into an integer dtype any number it cannot hold."""
    if values.dtype.kind not in "iufO" or not values.size or (values.dtype.kind == "f" and dtype not in _INT_RANGE):
        return
    flat = values.reshape(-1)
    if values.dtype.kind == "O":        # numpy's objects: Python ints beyond uint64 among the numbers
        flat = np.array([v for v in flat.tolist() if isinstance(v, (int, float)) and not isinstance(v, bool)],
                        dtype=object)
        if not flat.size:
            return
    low, high = flat.min(), flat.max()
    if values.dtype.kind in "uO" and not dtype.is_float and (low < -2 ** 63 or high >= 2 ** 63):
        raise ValueRangeError("Overflow when unpacking long long: a value of the data does not fit in int64")
    check_fits(low, dtype)
    check_fits(high, dtype)


def _default_dtype(values: np.ndarray, data) -> DType:
    if isinstance(data, (np.ndarray, np.generic)):
        return as_dtype(values.dtype)
    kinds = {"f": dt.float32, "i": dt.int64, "u": dt.int64, "b": dt.bool_}   # as PyTorch does
    items = values.reshape(-1).tolist() if values.dtype.kind == "O" else ()
    if items and all(isinstance(v, (int, float)) for v in items):
        # Python ints beyond uint64 (numpy's objects): with a float, float32; else int64,
        # which _check_data_fits refuses
        return dt.float32 if any(isinstance(v, float) for v in items) else dt.int64
    if values.dtype.kind not in kinds:
        raise TypeError(f"cannot make a tensor from {type(data).__name__} of {values.dtype}")
    return kinds[values.dtype.kind]


def tensor(data, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """A new tensor from data (nested lists, numbers, numpy arrays, or another tensor); a
    tensor's values are copied without its history (a new leaf), as in PyTorch."""
    if isinstance(data, Tensor):
        data = data.detach()
        # A copy made where the data is (device -> device stays on the device, no wait).
        copy = data.clone() if Device(device) == data.device else data.to(device)
        return _leaf(copy if dtype is None else copy.to(dtype), requires_grad)
    values = np.asarray(data)
    dtype = as_dtype(dtype) if dtype is not None else _default_dtype(values, data)
    if not isinstance(data, np.ndarray):
        _check_data_fits(values, dtype)
    return _leaf(from_numpy_values(values, dtype, device), requires_grad)


def zeros(*shape, dtype=dt.float32, device="cpu", requires_grad=False) -> Tensor:
    return full(shape_args(shape), 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones(*shape, dtype=dt.float32, device="cpu", requires_grad=False) -> Tensor:
    return full(shape_args(shape), 1, dtype=dtype, device=device, requires_grad=requires_grad)


def full(shape, value, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """A tensor of `shape` with every element `value`, of `dtype` or, as in PyTorch, of the
    value's: bool for a bool, int64 for an int, float32 for a float. On CUDA the value's
    bits are written on the device (memsets or a fill kernel: the backend's "fill"), with no
    copy of a host array: as fast for a big tensor as for a small one, and allowed inside a
    CUDA graph capture."""
    dtype = as_dtype(dtype) if dtype is not None else _number_dtype(value)
    check_fits(value, dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ShapeError(f"negative dimension in shape {shape}")
    device = device if type(device) is Device else Device(device)
    if device.type == "cuda":
        t = empty(shape, dtype=dtype, device=device)      # (refuses a device that does not exist)
        with device_guard(device.index):                  # queued on the stream of t's own device
            return _leaf(call("fill", t, value), requires_grad)
    return _leaf(from_numpy_values(np.full(shape, value), dtype, device), requires_grad)


def _number_dtype(value) -> DType:
    if isinstance(value, (bool, np.bool_)):
        return dt.bool_
    if isinstance(value, (int, np.integer)):
        return dt.int64
    if isinstance(value, (float, np.floating)):
        return dt.float32
    raise TypeError(f"full: the fill value must be a number, got {type(value).__name__}")


def _arange_length(start, stop, step) -> int:
    if step == 0:
        raise ArgumentError("arange: step must be nonzero")
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        return len(range(int(start), int(stop), int(step)))
    span = (stop - start) / step
    if not math.isfinite(span):
        raise ArgumentError(f"arange: unsupported range {start} to {stop} by {step}")
    return max(0, math.ceil(span))


def arange(start, stop=None, step=1, dtype=None, device="cpu", requires_grad=False) -> Tensor:
    """start, start + step, ... up to stop (excluded). Computed on the tensor's device (the
    backend's "arange": in int64 where every argument is an int and the dtype an integer,
    else start + i * step in float64), then cast to the dtype: int64 for int arguments,
    float32 otherwise, as in PyTorch."""
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("end", stop), ("step", step)):
        if not isinstance(v, (int, float, np.number)) or isinstance(v, bool):
            raise TypeError(f"arange: {name} must be a number, got {v!r}")
    integers = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    kind = as_dtype(dtype) if dtype else (dt.int64 if integers else dt.float32)
    natural = dt.int64 if integers and not kind.is_float else dt.float64
    values = (int(start), int(step)) if natural is dt.int64 else (float(start), float(step))
    device = device if type(device) is Device else Device(device)
    t = empty(_arange_length(start, stop, step), dtype=natural, device=device)
    if t.numel():
        with device_guard(device.index) if device.type == "cuda" else contextlib.nullcontext():
            t = call("arange", t, *values)
    return _leaf(t if natural is kind else t.to(kind), requires_grad)


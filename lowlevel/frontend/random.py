"""Layer 1: random tensors. rand (uniform on [0, 1)), randn (standard normal), randint
(integers in [low, high)), and their *_like forms, drawn by the device the tensor is on
(Philox4x32-10: backends/philox.py on the CPU, ptx/philox.ptx on CUDA), never made on the
host and copied.

A Generator is a seed and a count of the draws made: draw number d uses the Philox
counters (block, d) under the key `seed`, so the numbers depend on the seed and on how
many draws came before, not on the device, the stream or the launch's shape:

    ll.manual_seed(0); a = ll.rand(5)
    ll.manual_seed(0); b = ll.rand(5, device="cuda")       # the same five numbers

`generator=` takes a lowlevel Generator, or a numpy Generator (drawn on the host by numpy,
then copied: the old way, kept for code that seeds numpy itself).
"""
import os
import threading

import numpy as np

from ..dispatch import call
from . import dtypes as dt
from .creation import empty, from_numpy_values
from .device import Device, on_their_device
from .dtypes import as_dtype
from .shapes import shape_args

call = on_their_device(call)          # CUDA work on its tensor's device
# random bits per float: what rounds to the dtype exactly, so that no draw becomes 1.0
_BITS = {"float32": 24, "float16": 11, "bfloat16": 8}


class Generator:
    """A Philox key (the seed) and the number of draws made with it."""

    def __init__(self, seed=None):
        self._lock = threading.Lock()
        self.manual_seed(int.from_bytes(os.urandom(8), "little") if seed is None else seed)

    def manual_seed(self, seed) -> "Generator":
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"manual_seed: the seed must be an int, got {seed!r}")
        with self._lock:
            self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF          # as torch: a negative seed wraps
            self.draws = 0
        return self

    def initial_seed(self) -> int:
        return self.seed

    def next_stream(self) -> int:
        """The stream (the counter's high 64 bits) of the next draw."""
        with self._lock:
            stream, self.draws = self.draws, self.draws + 1
        return stream


default_generator = Generator()


def manual_seed(seed) -> Generator:
    """Make rand, randn and randint repeatable (on every device)."""
    return default_generator.manual_seed(seed)


def initial_seed() -> int:
    return default_generator.seed


def _new(shape, device, natural):
    """An uninitialised tensor of `natural` (the dtype the kernels draw) on device."""
    return empty(tuple(shape_args(shape)), dtype=natural, device=device)


def _draw(op: str, t, *args, generator=None):
    gen = default_generator if generator is None else generator
    if t.numel() == 0:
        return t
    return call(op, t, *args, gen.next_stream(), gen.seed)


def _finish(t, dtype, requires_grad):
    t = t if t.dtype is dtype else t.to(dtype)
    return t.requires_grad_(True) if requires_grad else t


def _numpy_generator(generator, make, shape, dtype, device, requires_grad):
    values = make(generator)(tuple(shape_args(shape)))
    return _finish(from_numpy_values(values, as_dtype(dtype), device), as_dtype(dtype), requires_grad)


def rand(*shape, dtype=dt.float32, device="cpu", generator=None, requires_grad=False):
    """Uniform on [0, 1), drawn on the tensor's device."""
    dtype = as_dtype(dtype)
    if isinstance(generator, np.random.Generator):
        return _numpy_generator(generator, lambda g: g.random, shape, dtype, device, requires_grad)
    if not dtype.is_float:
        raise TypeError(f"rand: needs a floating-point dtype, got {dtype.name}")
    natural = dt.float64 if dtype is dt.float64 else dt.float32
    t = _draw("random_uniform", _new(shape, device, natural), _BITS.get(dtype.name, 24), generator=generator)
    return _finish(t, dtype, requires_grad)


def randn(*shape, dtype=dt.float32, device="cpu", generator=None, requires_grad=False):
    """Standard normal (Box-Muller on Philox words), drawn on the tensor's device; float64
    normals are the float32 ones widened (exact, but of float32's resolution)."""
    dtype = as_dtype(dtype)
    if isinstance(generator, np.random.Generator):
        return _numpy_generator(generator, lambda g: g.standard_normal, shape, dtype, device, requires_grad)
    if not dtype.is_float:
        raise TypeError(f"randn: needs a floating-point dtype, got {dtype.name}")
    t = _draw("random_normal", _new(shape, device, dt.float32), generator=generator)
    return _finish(t, dtype, requires_grad)


def randint(low, high=None, size=None, *, dtype=dt.int64, device="cpu", generator=None, requires_grad=False):
    """Integers uniform on [low, high) (randint(high, size) starts at 0), int64 unless dtype
    says otherwise, drawn on the tensor's device."""
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint: expected randint(low, high, size) or randint(high, size), with size a tuple")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"randint: {name} must be an int, got {v!r}")
    low, high = int(low), int(high)
    if high <= low:
        raise ValueError(f"randint: the range [{low}, {high}) is empty (random_ expects 'from' to be less than 'to')")
    dtype = as_dtype(dtype)
    span = high - low
    if span > 1 << 64:
        raise ValueError(f"randint: the range [{low}, {high}) is wider than 2^64")
    t = _draw("random_integers", _new(size, device, dt.int64), low, span, generator=generator)
    return _finish(t, dtype, requires_grad)


def _like(x, dtype, device):
    return x.shape, (x.dtype if dtype is None else as_dtype(dtype)), (x.device if device is None else Device(device))


def rand_like(x, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like(x, dtype, device)
    return rand(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _like(x, dtype, device)
    return randn(shape, dtype=dtype, device=device, requires_grad=requires_grad)


def randint_like(x, low, high=None, dtype=None, device=None):
    shape, dtype, device = _like(x, dtype, device)
    return randint(low, high, shape, dtype=dtype, device=device)

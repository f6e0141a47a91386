"""Layer 1: the tensor. Metadata (shape, strides, offset, dtype, device) over a storage.

A CUDA tensor's storage is a block from the caching allocator; a CPU tensor's is a numpy
byte buffer. Views (reshape, transpose, slicing, expand) share the storage and only change
the metadata; ops go through the dispatcher (lowlevel/ops.py). Nothing here waits for the
GPU except what must hand values to Python: item(), numpy(), repr and to("cpu").
"""
import functools
import math

import numpy as np

from . import dtypes as dt
from .dtypes import DType, as_dtype


class Device:
    """Where a tensor lives: Device("cpu"), Device("cuda"), Device("cuda:1"), or a device
    type a registered backend handles."""

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index
        kind, _, number = str(spec).partition(":")
        self.type = kind
        self.index = int(number) if number else (index if index is not None else (0 if kind != "cpu" else None))

    def __eq__(self, other):
        other = Device(other) if isinstance(other, str) else other
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class Storage:
    """The bytes behind one or more tensors."""

    def __init__(self, nbytes: int, device: Device):
        self.nbytes = nbytes
        self.device = device
        self.block = None
        self.host = None
        if device.type == "cuda":
            from ..cuda import current_stream
            from ..cuda.allocator import get_allocator
            _check_ordinal(device)
            self.allocator = get_allocator()
            self.block = self.allocator.allocate(max(1, nbytes), current_stream())
        else:
            # A whole number of 8-byte words, so the bytes can be viewed as any element type.
            self.host = np.zeros(max(8, nbytes + (-nbytes % 8)), np.uint8)

    @property
    def ptr(self) -> int:
        return self.block.address          # refused once the device's context was reset

    def __del__(self):
        # The block goes back to the allocator at the next safe point, not here: the
        # collector may run this inside the allocator's own lock (see release_later).
        if self.block is not None:
            try:
                from ..cuda.context import release_later
                release_later(functools.partial(self.allocator.free, self.block))
            except Exception:       # at interpreter teardown the modules may be gone
                pass


def _check_ordinal(device: Device) -> None:
    """A CUDA device that exists: "cuda:7" on a one-GPU machine is an error (as PyTorch's
    "invalid device ordinal"), not a tensor that claims device 7 and lives on device 0."""
    if device.index == 0:
        return              # always there: a driver is used only when it has a device
    from ..cuda import device_count
    count = device_count()
    if not 0 <= device.index < count:
        known = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise ValueError(f"invalid device ordinal: {device} does not exist (the CUDA devices are {known})")


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


class Tensor:
    def __init__(self, storage: Storage, shape, strides, offset: int, dtype: DType):
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.dtype = dtype
        self.device = storage.device

    # -- metadata ----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def is_contiguous(self) -> bool:
        expected = _contiguous_strides(self.shape)
        return all(st == ex for st, ex, sz in zip(self.strides, expected, self.shape) if sz != 1)

    @property
    def data_ptr(self) -> int:
        """The device address of the first element (CUDA tensors)."""
        return self.storage.ptr + self.offset * self.dtype.itemsize

    def _host_view(self) -> np.ndarray:
        """The elements as a strided numpy view over host storage (non-CUDA devices)."""
        base = self.storage.host.view(self.dtype.storage)
        item = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(base[self.offset:], self.shape, [s * item for s in self.strides])

    # -- views -------------------------------------------------------------------------------
    def _view(self, shape, strides, offset=None) -> "Tensor":
        return Tensor(self.storage, shape, strides, self.offset if offset is None else offset, self.dtype)

    def view(self, *shape) -> "Tensor":
        """The same elements in a new shape; only for layouts where no copy is needed."""
        shape = _infer_shape(_shape_args(shape), self.numel())
        if not self.is_contiguous():
            raise RuntimeError(f"view{shape}: the tensor {self.shape} with strides {self.strides} is not "
                               f"contiguous; use reshape() (which copies) or contiguous() first")
        return self._view(shape, _contiguous_strides(shape))

    def reshape(self, *shape) -> "Tensor":
        """A view when the layout allows, else a contiguous copy."""
        shape = _infer_shape(_shape_args(shape), self.numel())
        source = self if self.is_contiguous() else self.contiguous()
        return source._view(shape, _contiguous_strides(shape))

    def permute(self, *dims) -> "Tensor":
        dims = _shape_args(dims)
        if sorted(d % self.ndim for d in dims) != list(range(self.ndim)):
            raise ValueError(f"permute{tuple(dims)}: not a permutation of the {self.ndim} dimensions")
        dims = [d % self.ndim for d in dims]
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def transpose(self, d0: int, d1: int) -> "Tensor":
        order = list(range(self.ndim))
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(order)

    @property
    def T(self) -> "Tensor":
        return self.permute(list(reversed(range(self.ndim))))

    def expand(self, *shape) -> "Tensor":
        """Broadcast size-1 dimensions to `shape` without copying (their stride becomes 0)."""
        shape = _shape_args(shape)
        if len(shape) < self.ndim:
            raise ValueError(f"expand{tuple(shape)}: fewer dimensions than the tensor's {self.shape}")
        lead = len(shape) - self.ndim
        new_strides = []
        for i, size in enumerate(shape):
            if i < lead:
                new_strides.append(0)
                continue
            own, stride = self.shape[i - lead], self.strides[i - lead]
            if size == -1 or size == own:
                new_strides.append(stride)
            elif own == 1:
                new_strides.append(0)
            else:
                raise ValueError(f"expand: dimension {i} of size {own} cannot become {size} (shape {self.shape})")
        shape = [self.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
        return self._view(shape, new_strides)

    def __getitem__(self, index) -> "Tensor":
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = self.ndim - (len(index) - 1 - sum(i is None for i in index))
            index = index[:at] + (slice(None),) * fill + index[at + 1:]
        shape, strides, offset, dim = [], [], self.offset, 0
        for i in index:
            if i is None:
                shape.append(1)
                strides.append(0)
                continue
            if dim >= self.ndim:
                raise IndexError(f"too many indices for a tensor of shape {self.shape}")
            size, stride = self.shape[dim], self.strides[dim]
            if isinstance(i, (int, np.integer)):
                j = int(i) + size if i < 0 else int(i)
                if not 0 <= j < size:
                    raise IndexError(f"index {i} is out of range for dimension {dim} of size {size}")
                offset += j * stride
            elif isinstance(i, slice):
                start, stop, step = i.indices(size)
                if step <= 0:
                    raise ValueError("slices with step <= 0 are not supported")
                shape.append(len(range(start, stop, step)))
                strides.append(stride * step)
                offset += start * stride if shape[-1] else 0
            else:
                raise TypeError(f"unsupported index {i!r} (ints, slices, None and ... are)")
            dim += 1
        shape += self.shape[dim:]
        strides += self.strides[dim:]
        return self._view(shape, strides, offset)

    # -- data movement -----------------------------------------------------------------------
    def contiguous(self) -> "Tensor":
        if self.is_contiguous():
            return self
        from . import ops
        return ops.contiguous(self)

    def to(self, target) -> "Tensor":
        """A copy on another device ("cpu", "cuda", ...) or in another dtype; self if same."""
        from . import ops
        if isinstance(target, (DType, np.dtype, type)) or (isinstance(target, str) and target in dt._BY_NAME):
            dtype = as_dtype(target)
            return self if dtype is self.dtype else ops.cast(self, dtype)
        device = Device(target)
        return self if device == self.device else ops.copy_to_device(self, device)

    def cuda(self) -> "Tensor":
        return self.to("cuda")

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def numpy(self) -> np.ndarray:
        """The values as a new numpy array (waits for the GPU for a CUDA tensor)."""
        host = self if self.device.type == "cpu" else self.to("cpu")
        return host.dtype.to_numpy_values(np.array(host._host_view()))

    def __array__(self, dtype=None, copy=None):
        if self.device.type != "cpu":
            raise TypeError(f"a {self.device} tensor is not a numpy array; call .numpy() to copy it to the host")
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item() needs exactly one element, the tensor has {self.numel()} (shape {self.shape})")
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __repr__(self):
        values = np.array2string(self.numpy(), separator=", ", precision=4, threshold=64)
        return f"tensor({values}, dtype={self.dtype.name}, device={self.device})"

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError(f"the truth value of a tensor with {self.numel()} elements is ambiguous "
                             f"(shape {self.shape}); use .item() on a single element")
        return bool(self.item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- interchange -------------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device.type != "cuda":
            raise AttributeError("__cuda_array_interface__ exists for CUDA tensors only")
        if self.dtype.typestr is None:
            raise TypeError(f"{self.dtype.name} has no __cuda_array_interface__ typestr")
        from ..cuda import current_stream
        s = current_stream()
        item = self.dtype.itemsize
        return {
            "shape": self.shape,
            "typestr": self.dtype.typestr,
            "data": (self.data_ptr if self.numel() else 0, False),
            "strides": None if self.is_contiguous() else tuple(st * item for st in self.strides),
            "version": 3,
            # The stream the data is valid on: 1 is the legacy default stream (0 is not allowed).
            "stream": 1 if s is None else s.handle,
        }

    def __dlpack__(self, stream=None, **kwargs):
        from .interop import to_dlpack
        return to_dlpack(self, stream)

    def __dlpack_device__(self):
        from .interop import device_code
        return device_code(self.device)

    # -- operators ---------------------------------------------------------------------------
    def __add__(self, other): return _ops().add(self, other)
    def __radd__(self, other): return _ops().add(other, self)
    def __sub__(self, other): return _ops().sub(self, other)
    def __rsub__(self, other): return _ops().sub(other, self)
    def __mul__(self, other): return _ops().mul(self, other)
    def __rmul__(self, other): return _ops().mul(other, self)
    def __truediv__(self, other): return _ops().div(self, other)
    def __rtruediv__(self, other): return _ops().div(other, self)
    def __neg__(self): return _ops().neg(self)
    def __matmul__(self, other): return _ops().matmul(self, other)
    def __rmatmul__(self, other): return _ops().matmul(other, self)

    def sum(self, dim=None, keepdim=False): return _ops().sum(self, dim, keepdim)
    def mean(self, dim=None, keepdim=False): return _ops().mean(self, dim, keepdim)
    def max(self, dim=None, keepdim=False): return _ops().max(self, dim, keepdim)
    def softmax(self, dim=-1): return _ops().softmax(self, dim)
    def relu(self): return _ops().relu(self)
    def exp(self): return _ops().exp(self)


def _ops():
    from . import ops
    return ops


def _shape_args(args) -> list:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


def _infer_shape(shape, numel: int) -> tuple:
    if shape.count(-1) > 1:
        raise ValueError("only one dimension can be -1")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise ValueError(f"shape {tuple(shape)} is invalid for {numel} elements")
        shape = [numel // known if s == -1 else s for s in shape]
    if math.prod(shape) != numel:
        raise ValueError(f"shape {tuple(shape)} is invalid for {numel} elements")
    return tuple(shape)


# ---- creation -------------------------------------------------------------------------------
def empty(*shape, dtype=dt.float32, device="cpu") -> Tensor:
    shape = tuple(_shape_args(shape))
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    dtype, device = as_dtype(dtype), Device(device)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= 1 << 64:
        raise ValueError(f"empty: shape {shape} of {dtype.name} is {nbytes} bytes, more than a 64-bit "
                         f"address space holds")
    storage = Storage(nbytes, device)
    return Tensor(storage, shape, _contiguous_strides(shape), 0, dtype)


def from_numpy_values(values: np.ndarray, dtype: DType, device) -> Tensor:
    """A tensor holding `values` (converted to dtype) on `device`."""
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into a 1-d one.
    host = np.array(dtype.from_numpy_values(values), order="C")
    device = Device(device)
    if device.type == "cuda":
        from ..cuda import current_stream, memcpy_htod_async
        t = empty(host.shape, dtype=dtype, device=device)
        if host.nbytes:
            # From pageable memory the driver stages the bytes, so `host` may go at once.
            memcpy_htod_async(t.data_ptr, host, current_stream())
        return t
    t = empty(host.shape, dtype=dtype, device=device)
    t.storage.host[:host.nbytes] = host.reshape(-1).view(np.uint8)
    return t


def _default_dtype(values: np.ndarray, data) -> DType:
    if isinstance(data, (np.ndarray, np.generic)):
        return as_dtype(values.dtype)
    kinds = {"f": dt.float32, "i": dt.int64, "u": dt.int64, "b": dt.bool_}   # as PyTorch does
    if values.dtype.kind not in kinds:
        raise TypeError(f"cannot make a tensor from {type(data).__name__} of {values.dtype}")
    return kinds[values.dtype.kind]


def tensor(data, dtype=None, device="cpu") -> Tensor:
    """A new tensor from data (nested lists, numbers, numpy arrays, or another tensor)."""
    if isinstance(data, Tensor):
        # A copy made where the data is (device -> device stays on the device, no wait).
        from . import ops
        copy = ops.contiguous(data.to(device)) if Device(device) == data.device else data.to(device)
        return copy if dtype is None else copy.to(dtype)
    values = np.asarray(data)
    dtype = as_dtype(dtype) if dtype is not None else _default_dtype(values, data)
    return from_numpy_values(values, dtype, device)


def zeros(*shape, dtype=dt.float32, device="cpu") -> Tensor:
    return full(_shape_args(shape), 0, dtype=dtype, device=device)


def ones(*shape, dtype=dt.float32, device="cpu") -> Tensor:
    return full(_shape_args(shape), 1, dtype=dtype, device=device)


def full(shape, value, dtype=dt.float32, device="cpu") -> Tensor:
    dtype = as_dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return from_numpy_values(np.full(shape, value), dtype, device)


def arange(start, stop=None, step=1, dtype=None, device="cpu") -> Tensor:
    if stop is None:
        start, stop = 0, start
    values = np.arange(start, stop, step)
    return from_numpy_values(values, as_dtype(dtype) if dtype else (dt.int64 if values.dtype.kind in "iu"
                                                                     else dt.float32), device)


_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Make rand and randn repeatable."""
    global _generator
    _generator = np.random.default_rng(seed)


def rand(*shape, dtype=dt.float32, device="cpu", generator=None) -> Tensor:
    """Uniform on [0, 1), drawn on the host (seed with manual_seed or pass a numpy Generator)."""
    rng = generator or _generator
    return from_numpy_values(rng.random(tuple(_shape_args(shape))), as_dtype(dtype), device)


def randn(*shape, dtype=dt.float32, device="cpu", generator=None) -> Tensor:
    rng = generator or _generator
    return from_numpy_values(rng.standard_normal(tuple(_shape_args(shape))), as_dtype(dtype), device)

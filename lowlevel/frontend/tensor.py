"""Layer 1: the tensor. Metadata (shape, strides, offset, dtype, device) over a storage.

A CUDA tensor's storage is a block from the caching allocator; a CPU tensor's is a numpy
byte buffer. Views (reshape, transpose, slicing, expand) share the storage and only change
the metadata. Nothing here waits for the GPU except what must hand values to Python:
item(), numpy(), repr and to("cpu").

The methods that run an op are attached to Tensor by the modules that define the ops, which
need Tensor themselves (so this module imports none of them and there is no import cycle).
Where to find each, once lowlevel.frontend is imported:

    ops.py             the operators (+ - * / @, comparisons, unary -, abs, **) and the op
                       methods: relu exp sqrt ... argmax to contiguous clone
                       (+ - * / and relu are fast_ops.py's one-frame paths, with ops.py's checks)
    division.py        // and % (floor_divide, remainder, their reflected and in-place forms)
    reductions.py      sum mean max min softmax (over ops.py's kernels: max(dim) as (values,
                       indices)), amax amin prod cumsum cumprod var std logsumexp norm all any,
                       sort argsort topk kthvalue
    indexing.py        gather scatter scatter_add index_select masked_fill nonzero (and _ forms)
    advanced_indexing.py  t[i] and t[i] = v: integer tensors and lists, masks, then ops.py's views
    inplace.py         add_ sub_ mul_ div_ clamp_ fill_ zero_ copy_, += -= *= /=, t[i] = v
    joining.py         unsqueeze squeeze flatten, half float double, float(t) int(t)
    autograd/record.py backward detach requires_grad_ is_leaf
    interop.py         __dlpack__ __dlpack_device__ __cuda_array_interface__
    formatting.py      __repr__, as PyTorch prints a tensor
    methods.py         long int bool t stride add(alpha=) & | ^ ~ chunk split to(...) retain_grad ...
"""
import functools
import math

import numpy as np

from ..cuda import current_stream
from ..cuda.allocator import get_allocator
from ..cuda.context import release_later
from ..cuda.graph import refuse_while_capturing
from .device import Device, check_ordinal, device_guard
from .dtypes import DType
from .errors import ShapeError
from .shapes import contiguous_strides, infer_shape, shape_args

# Set by frontend/autograd when it loads: view_hook(base, view, how) records a view of a
# tensor that requires grad (views change only metadata, so they never reach the dispatcher).
view_hook = None


class Storage:
    """The bytes behind one or more tensors. `version` counts the in-place writes to them
    (every view shares it): autograd compares it with the version a node saved."""

    version = 0                 # class default: Storage.foreign makes instances without __init__
    block = host = keeper = None
    # The number whose shared 0-d constant these bytes are (creation.scalar_tensor), or None:
    # in-place writes refuse them, since every op with that number reads them.
    constant = None

    def __init__(self, nbytes: int, device: Device):
        self.nbytes = nbytes
        self.device = device
        self.block = None           # CUDA: a block of the caching allocator
        self.host = None            # CPU: a numpy byte buffer
        self.keeper = None          # foreign memory: what keeps its owner's bytes alive
        if device.type == "cuda":
            check_ordinal(device)
            with device_guard(device.index):            # the memory of the tensor's own device
                self.allocator = get_allocator()
                self.block = self.allocator.allocate(max(1, nbytes), current_stream())
        else:
            # A whole number of 8-byte words, so the bytes can be viewed as any element type.
            self.host = np.zeros(max(8, nbytes + (-nbytes % 8)), np.uint8)

    @classmethod
    def foreign(cls, nbytes: int, device: Device, *, host=None, block=None, allocator=None,
                keeper=None) -> "Storage":
        """Bytes another library owns (DLPack): `keeper` holds them; `allocator.free` is
        what dropping the storage calls for a device `block`."""
        storage = cls.__new__(cls)
        storage.nbytes, storage.device = nbytes, device
        storage.host, storage.block, storage.keeper = host, block, keeper
        if block is not None:
            storage.allocator = allocator
        return storage

    @classmethod
    def host_bytes(cls, nbytes: int, device: Device) -> "Storage":
        """Host storage for an op that writes all `nbytes` itself: as __init__ for a host
        device, but not zeroed first (np.empty; the padding to 8 bytes is never read)."""
        storage = cls.__new__(cls)
        storage.nbytes, storage.device = nbytes, device
        storage.host = np.empty(max(8, nbytes + (-nbytes % 8)), np.uint8)
        return storage

    @property
    def ptr(self) -> int:
        return self.block.address          # refused once the device's context was reset

    def __del__(self):
        # The block goes back to the allocator at a safe point, not here: the collector may
        # run this inside the allocator's own lock (see release_later). The caching allocator
        # keeps it until its next allocation (free_later); any other, until lowlevel's next
        # safe point.
        if self.block is not None:
            try:
                try:
                    self.allocator.returned.append(self.block)   # CachingAllocator.free_later, inline
                except AttributeError:                           # not the caching allocator (DLPack's)
                    release_later(functools.partial(self.allocator.free, self.block))
            except Exception:       # at interpreter teardown the modules may be gone
                pass


class ArrayStorage:
    """Host storage made as one array of the elements (np.empty(shape, dtype): a single numpy
    call, where bytes then a typed view of them are three), for a new tensor that an op
    writes whole. Its bytes (`host`, what views and interop read) are a view of the array,
    made the first time something asks for them: most results are read only through the
    array (the tensor's host view). Only for a whole number of 8-byte words, as Storage's
    own bytes are (so that they can be viewed as any element type). Made by Tensor.new_host,
    which sets `array`, `nbytes` and `device` itself (no __init__ frame per op).

    Read as a Storage is (nbytes, device, host, block, keeper, version), but not a subclass
    of it: it holds no device memory, so it has no finalizer to run (Storage.__del__, a
    Python call at every result's end)."""

    version = 0                 # as Storage's: the in-place writes to the bytes
    block = keeper = constant = None

    @functools.cached_property
    def host(self) -> np.ndarray:
        return self.array.reshape(-1).view(np.uint8)      # a view: the array is contiguous


class Tensor:
    # The Python number a 0-d tensor made by creation.scalar_tensor stands for (None for
    # every other tensor): kernels may take it as an argument instead of reading memory.
    scalar_value = None
    # Autograd's state as class defaults, for tensors made by new_on_block and new_host
    # (see __init__).
    requires_grad = False
    grad = grad_fn = view_base = None
    # Computed on first use and kept: a tensor's shape, strides, offset and storage never
    # change after it is made (a view is a new tensor).
    contiguous_cache = None
    host_view_cache = None

    def __init__(self, storage: Storage, shape, strides, offset: int, dtype: DType):
        self.storage = storage
        self.shape = tuple(map(int, shape))
        self.strides = tuple(map(int, strides))
        self.offset = int(offset)
        self.dtype = dtype
        self.device = storage.device
        # Autograd's state (frontend/autograd): requires_grad puts the Autograd key in the key
        # set of every call on this tensor; grad_fn is the node that made it (None: a leaf).
        self.requires_grad = False
        self.grad = None
        self.grad_fn = None
        self.view_base = None       # the tensor this one is a view of (None: not a view)

    @classmethod
    def new_on_block(cls, block, nbytes: int, device: Device, allocator, shape: tuple, strides: tuple,
                     dtype: DType) -> "Tensor":
        """A contiguous tensor at offset 0 of a block a CUDA backend has just taken from
        `allocator` (the one of the context current now) for `device`, whose ordinal its
        operands' creation checked: the storage and the tensor in one frame (the backend's
        hot path), the layout as the op's plan computed it (tuples of ints, not converted
        again as __init__ converts them). The autograd state is the class defaults (no grad,
        not a view) until something sets it."""
        storage = Storage.__new__(Storage)
        storage.nbytes, storage.device, storage.block, storage.allocator = nbytes, device, block, allocator
        t = cls.__new__(cls)
        t.storage, t.shape, t.strides, t.offset, t.dtype, t.device = storage, shape, strides, 0, dtype, device
        return t

    @classmethod
    def new_host(cls, shape: tuple, strides: tuple, nbytes: int, dtype: DType, device: Device) -> "Tensor":
        """A new contiguous tensor of `shape` (with its `strides` and `nbytes`, as a plan
        computed them) in host storage that the caller writes whole (not zeroed first), with
        its host view made at once: the array of an ArrayStorage where the bytes are a
        whole number of 8-byte words, else a view of Storage.host_bytes."""
        if nbytes >= 8 and not nbytes % 8:
            view = np.empty(shape, dtype.storage)
            storage = ArrayStorage.__new__(ArrayStorage)
            storage.array, storage.nbytes, storage.device = view, nbytes, device
        else:
            storage = Storage.host_bytes(nbytes, device)
            view = storage.host[:nbytes].view(dtype.storage).reshape(shape)
        t = cls.__new__(cls)
        t.storage, t.shape, t.strides, t.offset, t.dtype, t.device = storage, shape, strides, 0, dtype, device
        t.contiguous_cache = True
        t.host_view_cache = view
        return t

    # -- metadata ----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def is_contiguous(self) -> bool:
        found = self.contiguous_cache
        if found is None:
            expected = contiguous_strides(self.shape)
            found = self.contiguous_cache = all(st == ex for st, ex, sz in zip(self.strides, expected, self.shape)
                                           if sz != 1)
        return found

    @property
    def data_ptr(self) -> int:
        """The device address of the first element (CUDA tensors)."""
        # storage.block.address is Storage.ptr, read without its property (once per operand
        # per op): refused once the device's context was reset
        offset = self.offset
        address = self.storage.block.address
        return address + offset * self.dtype.itemsize if offset else address

    def host_view(self) -> np.ndarray:
        """The elements as a strided numpy view over host storage (non-CUDA devices): what
        a host backend computes on. Made once per tensor (its layout never changes)."""
        view = self.host_view_cache
        if view is None:
            base = self.storage.host.view(self.dtype.storage)
            if self.is_contiguous():
                # a slice and a reshape: the same view as as_strided's, at a fraction of its cost
                view = base[self.offset:self.offset + self.numel()].reshape(self.shape)
            else:
                item = self.dtype.itemsize
                view = np.lib.stride_tricks.as_strided(base[self.offset:], self.shape,
                                                       [s * item for s in self.strides])
            self.host_view_cache = view
        return view

    # -- views -------------------------------------------------------------------------------
    def _view(self, shape, strides, offset=None, how=None) -> "Tensor":
        """A view of self; `how` says which (("reshape",), ("permute", dims), ("expand",),
        ("index", index)) so that autograd can send a gradient back through it."""
        out = Tensor(self.storage, shape, strides, self.offset if offset is None else offset, self.dtype)
        out.view_base = self if self.view_base is None else self.view_base
        if self.requires_grad and view_hook is not None:
            view_hook(self, out, how)
        return out

    def view(self, *shape) -> "Tensor":
        """The same elements in a new shape; only for layouts where no copy is needed."""
        shape = infer_shape(shape_args(shape), self.numel())
        if not self.is_contiguous():
            raise RuntimeError(f"view{shape}: the tensor {self.shape} with strides {self.strides} is not "
                               f"contiguous; use reshape() (which copies) or contiguous() first")
        return self._view(shape, contiguous_strides(shape), how=("reshape",))

    def reshape(self, *shape) -> "Tensor":
        """A view when the layout allows, else a contiguous copy."""
        shape = infer_shape(shape_args(shape), self.numel())
        if not self.is_contiguous():
            return self.contiguous().view(shape)
        return self._view(shape, contiguous_strides(shape), how=("reshape",))

    def permute(self, *dims) -> "Tensor":
        dims = shape_args(dims)
        if sorted(d % self.ndim for d in dims) != list(range(self.ndim)):
            raise ShapeError(f"permute{tuple(dims)}: not a permutation of the {self.ndim} dimensions")
        dims = [d % self.ndim for d in dims]
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims], how=("permute", dims))

    def transpose(self, d0: int, d1: int) -> "Tensor":
        order = list(range(self.ndim))
        order[d0], order[d1] = order[d1], order[d0]
        return self.permute(order)

    @property
    def T(self) -> "Tensor":
        return self.permute(list(reversed(range(self.ndim))))

    def expand(self, *shape) -> "Tensor":
        """Broadcast size-1 dimensions to `shape` without copying (their stride becomes 0)."""
        shape = shape_args(shape)
        if len(shape) < self.ndim:
            raise ShapeError(f"expand{tuple(shape)}: fewer dimensions than the tensor's {self.shape}")
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
                raise ShapeError(f"expand: dimension {i} of size {own} cannot become {size} (shape {self.shape})")
        shape = [self.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
        return self._view(shape, new_strides, how=("expand",))

    def __getitem__(self, index) -> "Tensor":
        if not isinstance(index, tuple):
            index = (index,)
        asked = index
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
        return self._view(shape, strides, offset, how=("index", asked))

    # -- data movement (to() and contiguous() are attached by ops.py) ---------------------
    def cuda(self) -> "Tensor":
        return self.to("cuda")

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def _refuse_in_capture(self, op: str) -> None:
        """`op` hands a CUDA tensor's values to Python: it cannot be part of a graph capture."""
        if self.device.type == "cuda":
            refuse_while_capturing(op)

    def numpy(self) -> np.ndarray:
        """The values as a new numpy array (waits for the GPU for a CUDA tensor)."""
        self._refuse_in_capture("numpy()")
        host = self if self.device.type == "cpu" else self.to("cpu")
        return host.dtype.to_numpy_values(np.array(host.host_view()))

    def __array__(self, dtype=None, copy=None):
        if self.device.type != "cpu":
            raise TypeError(f"a {self.device} tensor is not a numpy array; call .numpy() to copy it to the host")
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ShapeError(f"item() needs exactly one element, the tensor has {self.numel()} (shape {self.shape})")
        self._refuse_in_capture("item()")
        return self.numpy().reshape(()).item()

    def tolist(self):
        self._refuse_in_capture("tolist()")
        return self.numpy().tolist()

    def __bool__(self):
        # PyTorch's messages and exception type: `if t:` only means something for one element.
        if self.numel() > 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous "
                               f"(shape {self.shape}); use .any() / .all() or .item() on one element")
        if self.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        self._refuse_in_capture("bool() of a tensor")
        return bool(self.item())

    # ops.py defines ==, <, ... as elementwise comparisons returning bool tensors; a tensor
    # still hashes by identity (as in PyTorch), so it can be a dict key or a set member.
    __hash__ = object.__hash__

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

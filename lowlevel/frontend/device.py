"""Where a tensor lives: Device("cpu"), Device("cuda"), Device("cuda:1"), or a device type
that a backend registered from user code handles.

A CUDA tensor's memory and the work on it belong to its device: `device_guard(index)` makes
that device the current one (lowlevel.cuda's per-thread current device) for a block, and
`on_their_device(call)` runs a dispatch with the device of the first CUDA tensor among its
arguments current, as PyTorch's device guard does. The thread's current stream is used only
for its own device; another device's tensors go to that device's legacy default stream.
"""
import contextlib
import functools

from ..cuda import GPU
from ..cuda import device_count
from ..cuda.context import current_device_ordinal
from ..dispatch import backend_for
from ..dispatch.keys import backend_keys
from .errors import DeviceError


_interned: dict = {}          # (spec, index) -> the Device made for them
_MAX_INTERNED = 256
# True until a Device of a CUDA device other than 0 is made: until then every CUDA tensor is on
# device 0, so an op has no device to switch to while device 0 is current (on_their_device)
only_cuda_0 = True


class Device:
    """A device type and, except for the CPU, an index (0 when none is given).

    Device("cuda") made twice is one object (a device never changes), so that the ops'
    same-device check is usually an identity test."""

    def __new__(cls, spec="cpu", index: int | None = None):
        key = (spec, index) if type(spec) is str and cls is Device else None
        found = _interned.get(key) if key is not None else None
        if found is not None:
            return found
        self = super().__new__(cls)
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index
        kind, _, number = str(spec).partition(":")
        self.type = kind
        self.index = int(number) if number else (index if index is not None else (0 if kind != "cpu" else None))
        backend = backend_keys.get(kind)
        if backend is not None:
            self.key_bit = backend.bit          # else looked up when first read (see key_bit below)
        if kind == "cuda" and self.index != 0:
            global only_cuda_0
            only_cuda_0 = False
        if key is not None and len(_interned) < _MAX_INTERNED:
            _interned[key] = self
        return self

    @functools.cached_property
    def key_bit(self) -> int:
        """The bit of the dispatch key of this device type's backend, which the dispatcher
        reads for every tensor argument: set when the Device is made, or, for a device type
        whose backend is registered later, looked up when first read (an unregistered type
        raises backend_for's error, as the dispatcher's own lookup did). A backend key, once
        registered, never changes."""
        return backend_for(self.type).bit

    def __eq__(self, other):
        if other is self:
            return True
        other = Device(other) if isinstance(other, str) else other
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        # copy, deepcopy and pickle make a Device from its spec: object's own way would call
        # Device.__new__ without one (the interned CPU Device) and overwrite its type and index
        return (Device, (self.type, self.index))

    def __repr__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


def check_ordinal(device: Device) -> None:
    """A CUDA device that exists: "cuda:7" on a one-GPU machine is an error (as PyTorch's
    "invalid device ordinal"), not a tensor that claims device 7 and lives on device 0."""
    if device.index == 0:
        return              # always there: a driver is used only when it has a device
    count = device_count()
    if not 0 <= device.index < count:
        known = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise DeviceError(f"invalid device ordinal: {device} does not exist (the CUDA devices are {known})")


@contextlib.contextmanager
def device_guard(index: int | None):
    """Make CUDA device `index` the current one inside the block (None: leave it)."""
    previous = current_device_ordinal()
    if index is None or index == previous:
        yield
        return
    GPU(index).set_current()
    try:
        yield
    finally:
        GPU(previous).set_current()


def cuda_index(values) -> int | None:
    """The device index of the first CUDA tensor (or CUDA Device) among `values`."""
    for v in values:
        d = v if isinstance(v, Device) else getattr(v, "device", None)
        if isinstance(d, Device) and d.type == "cuda":
            return d.index or 0
    return None


def on_their_device(dispatch):
    """`dispatch` (the dispatcher's call or redispatch), run on the device of its CUDA
    operands (the ops check first that they share one)."""
    @functools.wraps(dispatch)
    def guarded(*args, **kwargs):
        if only_cuda_0 and current_device_ordinal() == 0:
            return dispatch(*args, **kwargs)          # every CUDA tensor is on the current device
        index = cuda_index(args)
        if index is None and kwargs:
            index = cuda_index(kwargs.values())
        if index is None or index == current_device_ordinal():
            return dispatch(*args, **kwargs)
        with device_guard(index):
            return dispatch(*args, **kwargs)
    return guarded


def cpu_scalar_to_device(a, b):
    """Two tensors of a binary op, where a 0-d CPU tensor beside a tensor of another device
    goes there (one element, and its history with it), as PyTorch lets a CPU scalar take
    part in a CUDA op; others as they are (the op's checks then name any mismatch)."""
    if a.device != b.device:
        if not b.shape and b.device.type == "cpu":
            return a, b.to(a.device)
        if not a.shape and a.device.type == "cpu":
            return a.to(b.device), b
    return a, b

"""Dispatch keys, key sets, and the registry of keys.

A key's priority is also its bit: a KeySet is an int with bit p set for the key of priority
p, so the highest key of a set is its highest bit (int.bit_length), "the keys below k" is a
mask, and a new key never moves the bits of the keys there are.

    CPU (10), CUDA (20)       backend keys, chosen by the device type of the arguments
    Autograd (50)             in the key set of a call when an argument requires grad: records
                              the op for backward, then redispatches below itself
    Profiler (100)            a functionality key, added by the thread's include set
    register_backend(...)     a backend key for a new device type (user code)
    register_key(...)         a functionality key (wrappers, tracers) for include()
"""


class DispatchKey:
    """A key in the routing table. Higher priority keys are tried first."""

    __slots__ = ("name", "priority", "device_type", "bit")

    def __init__(self, name: str, priority: int, device_type: str | None = None):
        if not isinstance(priority, int) or priority < 0:
            raise ValueError(f"dispatch key {name}: priority must be an int >= 0, got {priority!r}")
        self.name = name
        self.priority = priority
        self.device_type = device_type          # set for backend keys
        self.bit = 1 << priority

    def __repr__(self):
        return f"DispatchKey.{self.name}"


_keys: dict[str, DispatchKey] = {}
_by_priority: dict[int, DispatchKey] = {}
backend_keys: dict[str, DispatchKey] = {}    # device type -> backend key (register_backend adds)


class KeySet:
    """An ordered set of dispatch keys, highest priority first (held as a bit mask)."""

    __slots__ = ("bits",)

    def __init__(self, keys=(), bits: int = 0):
        for k in keys:
            bits |= k.bit
        self.bits = bits

    @property
    def keys(self) -> tuple:
        """The keys, highest priority first."""
        out, bits = [], self.bits
        while bits:
            top = bits.bit_length() - 1
            out.append(_by_priority[top])
            bits ^= 1 << top
        return tuple(out)

    def below(self, key: DispatchKey) -> "KeySet":
        """The keys of lower priority than `key`: where a redispatch from `key` goes."""
        return KeySet(bits=self.bits & (key.bit - 1))

    def __iter__(self):
        return iter(self.keys)

    def __contains__(self, key):
        return bool(self.bits & key.bit)

    def __eq__(self, other):
        return isinstance(other, KeySet) and other.bits == self.bits

    def __hash__(self):
        return hash(self.bits)

    def __repr__(self):
        return "KeySet(" + ", ".join(k.name for k in self.keys) + ")"


def add_key(key: DispatchKey) -> DispatchKey:
    """Enter `key` in the registry (names and priorities are unique)."""
    if key.name in _keys:
        raise ValueError(f"dispatch key {key.name} exists already")
    if key.priority in _by_priority:
        raise ValueError(f"priority {key.priority} is taken; choose another for {key.name}")
    _keys[key.name] = key
    _by_priority[key.priority] = key
    if key.device_type is not None:
        backend_keys[key.device_type] = key
    return key


def register_key(name: str, priority: int) -> DispatchKey:
    """A new functionality key (no device type): it acts where include() adds it."""
    return add_key(DispatchKey(name, priority))


def register_backend(name: str, device_type: str, priority: int | None = None) -> DispatchKey:
    """A new backend key for tensors whose device type is `device_type`. No op table changes:
    the new key has nothing registered yet, and its bit moves no other key's."""
    if device_type in backend_keys:
        raise ValueError(f"device type {device_type!r} already has backend {backend_keys[device_type].name}")
    if priority is None:
        priority = 1 + max(k.priority for k in _keys.values() if k.device_type is not None)
    return add_key(DispatchKey(name, priority, device_type))


def backend_for(device_type: str) -> DispatchKey:
    try:
        return backend_keys[device_type]
    except KeyError:
        raise RuntimeError(f"no backend is registered for device type {device_type!r}") from None


CPU = add_key(DispatchKey("CPU", 10, "cpu"))
CUDA = add_key(DispatchKey("CUDA", 20, "cuda"))
Autograd = add_key(DispatchKey("Autograd", 50))
Profiler = add_key(DispatchKey("Profiler", 100))

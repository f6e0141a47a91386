"""Layer 3, the dispatcher: which kernel runs an op, decided by dispatch keys.

Every call computes a key set: the backend key of each tensor argument's device ("cpu" ->
CPU, "cuda" -> CUDA, or a backend registered from user code), plus the thread's include set
(e.g. Profiler while profiling), minus its exclude set. The keys are tried from the highest
priority down. For each key the op's table gives a kernel (chosen by dtype inside a
backend), a fallthrough (skip to the next key), or nothing; a key may also have a fallback
that serves every op (Profiler's records the call, then redispatches below itself).

    register_kernel("add", CPU, fn, dtypes=[float32])   a kernel for an op and key
    register_backend("MyDevice", "mydevice")            a new backend key with its device type
    register_fallthrough(key, "add")                     let an op pass through a key
    explain("add", a, b)                                 the route, as text
"""
import threading
from contextlib import contextmanager


class DispatchKey:
    """A key in the routing table. Higher priority keys are tried first."""

    def __init__(self, name: str, priority: int, device_type: str | None = None):
        self.name = name
        self.priority = priority
        self.device_type = device_type          # set for backend keys

    def __repr__(self):
        return f"DispatchKey.{self.name}"


class KeySet:
    """An ordered set of dispatch keys, highest priority first."""

    def __init__(self, keys=()):
        self.keys = tuple(sorted(set(keys), key=lambda k: -k.priority))

    def below(self, key: DispatchKey) -> "KeySet":
        """The keys of lower priority than `key`: where a redispatch from `key` goes."""
        return KeySet(k for k in self.keys if k.priority < key.priority)

    def __iter__(self):
        return iter(self.keys)

    def __contains__(self, key):
        return key in self.keys

    def __repr__(self):
        return "KeySet(" + ", ".join(k.name for k in self.keys) + ")"


_keys: dict[str, DispatchKey] = {}
_backends: dict[str, DispatchKey] = {}       # device type -> backend key


def _add_key(key: DispatchKey) -> DispatchKey:
    if key.name in _keys:
        raise ValueError(f"dispatch key {key.name} exists already")
    if any(k.priority == key.priority for k in _keys.values()):
        raise ValueError(f"priority {key.priority} is taken; choose another for {key.name}")
    _keys[key.name] = key
    if key.device_type is not None:
        _backends[key.device_type] = key
    return key


def register_backend(name: str, device_type: str, priority: int | None = None) -> DispatchKey:
    """A new backend key for tensors whose device type is `device_type`."""
    if device_type in _backends:
        raise ValueError(f"device type {device_type!r} already has backend {_backends[device_type].name}")
    if priority is None:
        priority = 1 + max(k.priority for k in _keys.values() if k.device_type is not None)
    return _add_key(DispatchKey(name, priority, device_type))


def backend_for(device_type: str) -> DispatchKey:
    try:
        return _backends[device_type]
    except KeyError:
        raise RuntimeError(f"no backend is registered for device type {device_type!r}") from None


CPU = _add_key(DispatchKey("CPU", 10, "cpu"))
CUDA = _add_key(DispatchKey("CUDA", 20, "cuda"))
Profiler = _add_key(DispatchKey("Profiler", 100))


# ---- the tables -------------------------------------------------------------------------
class _Op:
    def __init__(self, name: str):
        self.name = name
        self.kernels: dict[DispatchKey, dict] = {}      # key -> {dtype name or "*": fn}
        self.fallthrough: set[DispatchKey] = set()


_ops: dict[str, _Op] = {}
_fallbacks: dict[DispatchKey, object] = {}             # key -> fn(op, keyset, args, kwargs)
_fallthrough_keys: set[DispatchKey] = set()            # keys every op passes through


def _op(name: str) -> _Op:
    op = _ops.get(name)
    if op is None:
        op = _ops[name] = _Op(name)
    return op


def register_kernel(op: str, key: DispatchKey, fn=None, dtypes=None):
    """Register `fn` for `op` under `key`, for the given dtypes (default: any). Usable as a
    decorator: @register_kernel("add", CPU)."""
    def register(fn):
        table = _op(op).kernels.setdefault(key, {})
        for d in (dtypes or ["*"]):
            table[d if isinstance(d, str) else d.name] = fn
        return fn
    return register(fn) if fn is not None else register


def register_fallthrough(key: DispatchKey, op: str | None = None) -> None:
    """Let `op` (or every op, if None) skip `key` and go on to the next key."""
    if op is None:
        _fallthrough_keys.add(key)
    else:
        _op(op).fallthrough.add(key)


def register_fallback(key: DispatchKey, fn) -> None:
    """A kernel for every op at `key`: fn(op_name, keys_below, args, kwargs); it continues
    the call with redispatch(op_name, keys_below, *args, **kwargs)."""
    _fallbacks[key] = fn


# ---- thread-local include and exclude sets ----------------------------------------------------
_tls = threading.local()


def _tls_sets():
    if not hasattr(_tls, "include"):
        _tls.include, _tls.exclude = set(), set()
    return _tls.include, _tls.exclude


@contextmanager
def _tls_with(which: int, key: DispatchKey):
    chosen = _tls_sets()[which]
    added = key not in chosen
    chosen.add(key)
    try:
        yield
    finally:
        if added:
            chosen.discard(key)


def include(key: DispatchKey):
    """Add `key` to every dispatch on this thread inside the `with` block."""
    return _tls_with(0, key)


def exclude(key: DispatchKey):
    """Remove `key` from every dispatch on this thread inside the `with` block."""
    return _tls_with(1, key)


def keyset_for(args, kwargs=None) -> KeySet:
    """The key set of a call: the tensors' backends, plus include, minus exclude."""
    keys = set()
    for a in [*args, *(kwargs or {}).values()]:
        device = getattr(a, "device", None)
        if device is not None and hasattr(device, "type"):
            keys.add(backend_for(device.type))
    inc, exc = _tls_sets()
    return KeySet((keys | inc) - exc)


def _dtype_of(args) -> str | None:
    for a in args:
        d = getattr(a, "dtype", None)
        if d is not None and hasattr(d, "name"):
            return d.name
    return None


def _resolve(op: _Op, key: DispatchKey, dtype: str | None):
    """What `key` does for this call: ("kernel", fn) | ("fallback", fn) | ("fallthrough",) | None."""
    if key in op.fallthrough or key in _fallthrough_keys:
        return ("fallthrough",)
    table = op.kernels.get(key)
    if table:
        fn = table.get(dtype) or table.get("*")
        if fn is not None:
            return ("kernel", fn)
        return ("missing-dtype", sorted(table))
    if key in _fallbacks:
        return ("fallback", _fallbacks[key])
    return None


class NotImplementedForKey(NotImplementedError):
    pass


def _walk(op_name: str, keyset: KeySet, dtype: str | None):
    """(key, what it does) for each key of `keyset` in order, up to the one that ends the
    call: a kernel, or a backend lacking this dtype. `what` is as _resolve returns it."""
    op = _ops.get(op_name)
    for key in keyset:
        what = _resolve(op, key, dtype) if op else None
        yield key, what
        if what is not None and what[0] in ("kernel", "missing-dtype"):
            return


def redispatch(op_name: str, keyset: KeySet, *args, **kwargs):
    """Run `op_name` with the highest key of `keyset` that has something for it."""
    if op_name not in _ops:
        raise NotImplementedForKey(f"no kernels are registered for op {op_name!r}")
    dtype = _dtype_of(args)
    for key, what in _walk(op_name, keyset, dtype):
        if what is None or what[0] == "fallthrough":
            continue
        if what[0] == "kernel":
            return what[1](*args, **kwargs)
        if what[0] == "fallback":
            return what[1](op_name, keyset.below(key), args, kwargs)
        raise NotImplementedForKey(f"{op_name} has no {key.name} kernel for dtype {dtype} "
                                   f"(it has: {', '.join(what[1])})")
    raise NotImplementedForKey(f"{op_name} has no kernel for any key in {keyset!r} (dtype {dtype})")


def call(op_name: str, *args, **kwargs):
    """Dispatch a call: compute its key set, then run the highest key's kernel."""
    return redispatch(op_name, keyset_for(args, kwargs), *args, **kwargs)


def explain(op_name: str, *args, **kwargs) -> str:
    """The route a call would take, key by key, without running it; also printed."""
    keyset = keyset_for(args, kwargs)
    dtype = _dtype_of(args)
    lines = [f"{op_name}: key set {keyset!r}, dtype {dtype}"]
    ends = False
    for key, what in _walk(op_name, keyset, dtype):
        if what is None:
            lines.append(f"  {key.name:10s} nothing registered: skipped")
        elif what[0] == "fallthrough":
            lines.append(f"  {key.name:10s} fallthrough: skipped")
        elif what[0] == "fallback":
            lines.append(f"  {key.name:10s} fallback {_name(what[1])}: runs, then redispatches below {key.name}")
        elif what[0] == "missing-dtype":
            lines.append(f"  {key.name:10s} no kernel for {dtype} (has {', '.join(what[1])}): error")
            ends = True
        else:
            lines.append(f"  {key.name:10s} kernel {_name(what[1])}  <- chosen")
            ends = True
    if not ends:
        lines.append("  no kernel: the call would raise NotImplementedError")
    text = "\n".join(lines)
    print(text)
    return text


def _name(fn) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def route_through(op_name: str, keyset: KeySet, dtype: str | None) -> list[str]:
    """The names of the keys of `keyset` that act on the call (fallbacks, then the kernel's)."""
    return [key.name for key, what in _walk(op_name, keyset, dtype)
            if what is not None and what[0] != "fallthrough"]


def route(op_name: str, *args, **kwargs) -> list[str]:
    """The keys a call would visit that do something (fallbacks, then the kernel's)."""
    return route_through(op_name, keyset_for(args, kwargs), _dtype_of(args))

"""The dispatcher: call, redispatch, explain and route, over the tables of table.py.

Every call computes a key set: the backend key of each tensor argument's device ("cpu" ->
CPU, "cuda" -> CUDA, or a backend registered from user code), Autograd when an argument
has `requires_grad` set, plus the thread's include set
(e.g. Profiler while profiling), minus its exclude set. The op's table, computed when its
kernels were registered, already knows which keys act on the op; the highest of those in
the key set runs: a kernel (chosen by dtype), or a fallback that serves every op
(Profiler's records the call, then redispatches below itself).

Arguments are read duck-typed: a `device` with a `type`, a `dtype` with a `name`; the
dispatcher knows nothing of tensors.
"""
import threading
from contextlib import contextmanager

from . import table
from .keys import Autograd, KeySet, backend_for, backend_keys


class NotImplementedForKey(NotImplementedError):
    pass


# ---- thread-local include and exclude sets ----------------------------------------------------
class _Local(threading.local):
    include = 0          # bits of the keys added to every dispatch on this thread
    exclude = 0          # bits of the keys removed from it


_tls = _Local()
AUTOGRAD_BIT = Autograd.bit
# How many include/exclude blocks (of every thread) have added a key: while none has, every
# thread's sets are empty and a call reads neither. A thread counts its block in before it
# dispatches inside it and out after it has emptied its set again, so that it never skips
# its own sets; another thread's count changes nothing for a thread whose sets are empty.
_blocks = 0
_blocks_lock = threading.Lock()


def _count_block(step: int) -> None:
    global _blocks
    with _blocks_lock:
        _blocks += step


@contextmanager
def _tls_with(which: str, key):
    bits = getattr(_tls, which)
    added = not bits & key.bit
    if added:
        _count_block(1)
    setattr(_tls, which, bits | key.bit)
    try:
        yield
    finally:
        if added:
            setattr(_tls, which, getattr(_tls, which) & ~key.bit)
            _count_block(-1)


def include(key):
    """Add `key` to every dispatch on this thread inside the `with` block."""
    return _tls_with("include", key)


def exclude(key):
    """Remove `key` from every dispatch on this thread inside the `with` block."""
    return _tls_with("exclude", key)


def is_excluded(key) -> bool:
    """Whether `key` is in this thread's exclude set (inside an `exclude(key)` block)."""
    return bool(_tls.exclude & key.bit)


# ---- the key set of a call ----------------------------------------------------------------------
# Argument types that carry neither a device nor a dtype: skipped without a getattr (which,
# for an attribute that is not there, raises and catches AttributeError inside).
_PLAIN = frozenset({int, float, bool, str, type(None)})


def _device_bits(values) -> int:
    bits = 0
    for a in values:
        if type(a) in _PLAIN:
            continue
        kind = getattr(getattr(a, "device", None), "type", None)
        if kind is not None:
            key = backend_keys.get(kind)
            bits |= key.bit if key is not None else backend_for(kind).bit     # backend_for raises
            if getattr(a, "requires_grad", False) is True:
                bits |= AUTOGRAD_BIT      # as a PyTorch tensor that requires grad carries the key
    return bits


def keyset_bits(args, kwargs=None) -> int:
    """The key set of a call as bits: the tensors' backends, plus include, minus exclude."""
    bits = _device_bits(args)
    if kwargs:
        bits |= _device_bits(kwargs.values())
    return (bits | _tls.include) & ~_tls.exclude


def keyset_for(args, kwargs=None) -> KeySet:
    """The key set of a call: the tensors' backends, plus include, minus exclude."""
    return KeySet(bits=keyset_bits(args, kwargs))


def dtype_of(args) -> str | None:
    """The dtype name of the first argument that has one: what chooses a backend's kernel."""
    for a in args:
        if type(a) in _PLAIN:
            continue
        name = getattr(getattr(a, "dtype", None), "name", None)
        if name is not None:
            return name
    return None


# ---- running a call -------------------------------------------------------------------------------
def _top_entry(op_name: str, bits: int):
    """(the op's table, the entry of its highest acting key in `bits`); entry None when no
    key acts (op None when nothing is registered for the op)."""
    op = table.tables.get(op_name)
    acting = bits & op.acting if op is not None else 0
    return op, (op.entries[acting.bit_length() - 1] if acting else None)


def _kernel_of(entry, dtype: str | None):
    """The Registration of the kernel that `entry` (a key's, or None) runs for `dtype`;
    None where the key has a fallback instead, or no kernel for the dtype."""
    return None if entry is None or entry.fallback is not None else entry.kernel_for(dtype)


def _remember(op_name: str, bits: int, dtype: str | None, fn):
    """Keep `fn` as what a call of (op, key set, dtype) runs (the repeat call's one lookup)."""
    if len(table.resolved) >= table.RESOLVED_LIMIT:
        table.resolved.clear()
    table.resolved[(op_name, bits, dtype)] = fn
    return fn


def _run(op_name: str, bits: int, args, kwargs):
    """One lookup: the highest acting key of the op's table in `bits`, then its entry."""
    op, entry = _top_entry(op_name, bits)
    decomposition = table.decompositions.get(op_name)
    if decomposition is not None:
        dtype = dtype_of(args)
        kernel = _kernel_of(entry, dtype)
        fn = _remember(op_name, bits, dtype, decomposition.fn if kernel is None else kernel.fn)
        return fn(*args, **kwargs)
    if op is None:
        raise NotImplementedForKey(f"no kernels are registered for op {op_name!r}")
    if entry is None:
        raise NotImplementedForKey(f"{op_name} has no kernel for any key in {KeySet(bits=bits)!r} "
                                   f"(dtype {dtype_of(args)})")
    if entry.fallback is not None:
        return entry.fallback.fn(op_name, KeySet(bits=bits & (entry.key.bit - 1)), args, kwargs)
    dtype = dtype_of(args)
    kernel = entry.kernel_for(dtype)
    if kernel is None:
        raise NotImplementedForKey(f"{op_name} has no {entry.key.name} kernel for dtype {dtype} "
                                   f"(it has: {', '.join(entry.dtypes())})")
    return _remember(op_name, bits, dtype, kernel.fn)(*args, **kwargs)


_resolved = table.resolved          # the same dict (emptied in place by registrations)


def call(op_name: str, *args, **kwargs):
    """Dispatch a call: compute its key set, then run the highest acting key (a repeat call:
    one lookup of what the same op, key set and dtype ran before).

    The key set and the dtype come from one pass over the positional arguments (what
    _device_bits and dtype_of compute, in this frame). A lowlevel Device carries its backend
    key's bit (`key_bit`): a tensor costs three attribute reads (requires_grad a plain one:
    a class default); any other argument (a device with only a `type`, or no device) is
    read as _device_bits reads it."""
    bits, dtype = 0, None
    for a in args:
        if type(a) in _PLAIN:
            continue
        try:
            bit = a.device.key_bit
        except AttributeError:
            bits |= _device_bits((a,))
        else:
            bits |= bit
            try:
                if a.requires_grad is True:
                    bits |= AUTOGRAD_BIT      # as a PyTorch tensor that requires grad carries the key
            except AttributeError:
                pass
        if dtype is None:
            try:
                dtype = a.dtype.name
            except AttributeError:
                pass
    if kwargs:
        for v in kwargs.values():               # mostly numbers (dim=1): no call for them
            if type(v) not in _PLAIN:
                bits |= _device_bits((v,))
    if _blocks:                                  # some thread has an include or exclude set
        bits = (bits | _tls.include) & ~_tls.exclude
    fn = _resolved.get((op_name, bits, dtype))
    if fn is None:
        return _run(op_name, bits, args, kwargs)
    return fn(*args, **kwargs) if kwargs else fn(*args)


def call_known(op_name: str, bits: int, dtype: str | None, *args):
    """call() for a caller that has computed what call's pass over the arguments would: the
    bits of its tensors' backend keys (and Autograd's, where one requires grad) and the
    dtype name of the first. The thread's include and exclude sets are applied here, as
    call applies them; the rest is call's one lookup."""
    if _blocks:
        bits = (bits | _tls.include) & ~_tls.exclude
    fn = _resolved.get((op_name, bits, dtype))
    if fn is None:
        return _run(op_name, bits, args, {})
    return fn(*args)


def redispatch(op_name: str, keyset: KeySet, *args, **kwargs):
    """Run `op_name` with the highest key of `keyset` that has something for it."""
    bits = keyset.bits
    fn = _resolved.get((op_name, bits, dtype_of(args)))
    if fn is not None:
        return fn(*args, **kwargs)
    return _run(op_name, bits, args, kwargs)


def resolve(op_name: str, keyset: KeySet, args):
    """The function redispatch(op_name, keyset, *args) would run (the kernel of the highest
    acting key), looked up as redispatch looks it up; None where a fallback runs instead or
    the call is an error (redispatch then decides, and raises)."""
    dtype = dtype_of(args)
    fn = _resolved.get((op_name, keyset.bits, dtype))
    if fn is not None:
        return fn
    _, entry = _top_entry(op_name, keyset.bits)
    kernel = _kernel_of(entry, dtype)
    return None if kernel is None else kernel.fn


# ---- explaining a call ----------------------------------------------------------------------------
def _walk(op_name: str, keyset: KeySet, dtype: str | None):
    """(key, what it does, the registration) for each key of `keyset` in order, up to the
    one that ends the call; `what` is "nothing", "fallthrough", "fallback", "kernel" or
    "missing-dtype" (then the registration is the KeyEntry, for the dtypes it has)."""
    op = table.tables.get(op_name)
    for key in keyset:
        if op is None or not key.bit & (op.acting | op.fallthrough):
            yield key, "nothing", None
        elif key.bit & op.fallthrough:
            yield key, "fallthrough", None
        else:
            entry = op.entries[key.priority]
            if entry.fallback is not None:
                yield key, "fallback", entry.fallback
                continue
            kernel = entry.kernel_for(dtype)
            yield (key, "kernel", kernel) if kernel is not None else (key, "missing-dtype", entry)
            return


class Explanation(str):
    """explain()'s text: a str whose repr is the text itself, so that a REPL shows the route
    once, as lines, where a str would show one quoted line of "\\n"s (print() it in a script)."""

    def __repr__(self) -> str:
        return str(self)


def explain(op_name: str, *args, **kwargs) -> Explanation:
    """The route a call would take, key by key, without running it. Returned, not printed
    (a REPL shows it; a script prints it): an Explanation, a str."""
    keyset = keyset_for(args, kwargs)
    dtype = dtype_of(args)
    lines = [f"{op_name}: key set {keyset!r}, dtype {dtype}"]
    decomposition = table.decompositions.get(op_name)
    if decomposition is not None and _kernel_of(_top_entry(op_name, keyset.bits)[1], dtype) is None:
        lines.append(f"  decomposition {decomposition.where}: runs {op_name} as other ops, each dispatched in full")
        return Explanation("\n".join(lines))
    ends = False
    for key, what, found in _walk(op_name, keyset, dtype):
        if what == "nothing":
            lines.append(f"  {key.name:10s} nothing registered: skipped")
        elif what == "fallthrough":
            lines.append(f"  {key.name:10s} fallthrough: skipped")
        elif what == "fallback":
            lines.append(f"  {key.name:10s} fallback {found.where}: runs, then redispatches below {key.name}")
        elif what == "missing-dtype":
            lines.append(f"  {key.name:10s} no kernel for {dtype} (has {', '.join(found.dtypes())}): error")
            ends = True
        else:
            lines.append(f"  {key.name:10s} kernel {found.where}  <- chosen")
            ends = True
    if not ends:
        lines.append("  no kernel: the call would raise NotImplementedError")
    return Explanation("\n".join(lines))


def route_through(op_name: str, keyset: KeySet, dtype: str | None) -> list[str]:
    """The names of the keys of `keyset` that act on the call (fallbacks, then the kernel's)."""
    return [key.name for key, what, _ in _walk(op_name, keyset, dtype) if what not in ("nothing", "fallthrough")]


def route(op_name: str, *args, **kwargs) -> list[str]:
    """The keys a call would visit that do something (fallbacks, then the kernel's)."""
    return route_through(op_name, keyset_for(args, kwargs), dtype_of(args))

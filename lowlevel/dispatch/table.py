"""The per-op dispatch tables, computed when something registers (as PyTorch's are).

What was registered is kept as it was given: kernels per (op, key, dtype), fallthroughs per
op or for every op, and fallbacks per key. From it each op's OpTable is computed, and
recomputed whenever a registration could change it, so that a call only looks up:

    OpTable.acting        the bits of the keys that do something for the op (a kernel
                          table or a fallback), fallthroughs taken out
    OpTable.fallthrough   the bits of the keys the op passes through (for explain)
    OpTable.entries       priority -> KeyEntry: that key's kernels by dtype, or its fallback

Every Registration records where its function was defined ("module.name"), which is what
explain() prints.
"""
from dataclasses import dataclass, field

from .keys import DispatchKey

ANY_DTYPE = "*"


@dataclass(frozen=True)
class Registration:
    """A registered function and where it was defined."""

    fn: object
    where: str

    @classmethod
    def of(cls, fn, name: str | None = None) -> "Registration":
        """`name` (default fn.__qualname__) labels a function made by a factory, whose
        qualified name would be the factory's ("_binary.<locals>.kernel")."""
        label = name or getattr(fn, "__qualname__", None) or repr(fn)
        return cls(fn, f"{getattr(fn, '__module__', '?')}.{label}")


@dataclass(frozen=True)
class KeyEntry:
    """What one key does for one op: run a kernel chosen by dtype, or run its fallback."""

    key: DispatchKey
    kernels: dict = field(default_factory=dict)      # dtype name -> Registration
    default: Registration | None = None              # for any dtype without its own kernel
    fallback: Registration | None = None             # only when the key has no kernels

    def kernel_for(self, dtype: str | None) -> Registration | None:
        return self.kernels.get(dtype, self.default)

    def dtypes(self) -> list[str]:
        """The dtypes with a kernel, as error messages list them."""
        return sorted(self.kernels) + ([ANY_DTYPE] if self.default else [])


@dataclass(frozen=True)
class OpTable:
    name: str
    acting: int
    fallthrough: int
    entries: dict          # key priority -> KeyEntry


# ---- what was registered ---------------------------------------------------------------------
_kernels: dict[str, dict[DispatchKey, dict[str, Registration]]] = {}   # op -> key -> dtype -> kernel
_op_fallthrough: dict[str, int] = {}           # op -> bits of the keys it passes through
_all_fallthrough = 0                           # bits of the keys every op passes through
_fallbacks: dict[DispatchKey, Registration] = {}
tables: dict[str, OpTable] = {}                # op -> its computed table: what a call reads
# op -> what runs it where its table's highest acting key has no kernel of the call's dtype
# (or is a fallback): the op rewritten as other ops, each dispatched in full (as PyTorch's
# CompositeImplicitAutograd kernels are, below a backend's own kernel for the op)
decompositions: dict[str, Registration] = {}
# (op, key set bits, dtype) -> the kernel function a call with them ran: the dispatcher's one
# lookup for a repeat call. Only kernels are kept (a fallback, or an error, takes the full
# route every time), and any registration empties it, since it may change any answer.
resolved: dict = {}
RESOLVED_LIMIT = 4096


def _compute(op: str) -> OpTable:
    fallthrough = _op_fallthrough.get(op, 0) | _all_fallthrough
    entries, acting = {}, 0
    by_key = _kernels.get(op, {})
    for key in {*by_key, *_fallbacks}:
        if key.bit & fallthrough:
            continue                           # a fallthrough wins over a kernel or a fallback
        table = by_key.get(key)
        if table:
            named = {d: reg for d, reg in table.items() if d != ANY_DTYPE}
            entries[key.priority] = KeyEntry(key, named, table.get(ANY_DTYPE))
        else:
            entries[key.priority] = KeyEntry(key, fallback=_fallbacks[key])
        acting |= key.bit
    return OpTable(op, acting, fallthrough, entries)


def _recompute(ops) -> None:
    resolved.clear()
    for op in ops:
        tables[op] = _compute(op)


def _known_ops() -> set:
    return {*_kernels, *_op_fallthrough}


# ---- registering ---------------------------------------------------------------------------------
def register_kernel(op: str, key: DispatchKey, fn=None, dtypes=None, name: str | None = None):
    """Register `fn` for `op` under `key`, for the given dtypes (default: any). Usable as a
    decorator: @register_kernel("add", CPU). `name` labels a kernel made by a factory."""
    def register(fn):
        registration = Registration.of(fn, name)
        table = _kernels.setdefault(op, {}).setdefault(key, {})
        for d in (dtypes or [ANY_DTYPE]):
            table[d if isinstance(d, str) else d.name] = registration
        _recompute([op])
        return fn
    return register(fn) if fn is not None else register


def register_decomposition(op: str, fn, name: str | None = None) -> None:
    """Let `fn(*args)` run `op` as other ops wherever no kernel of the op's highest acting
    key takes the call: no key has one, the key has none for the dtype, or the key is a
    fallback's (Autograd and Profiler then see the ops `fn` makes, not `op`)."""
    decompositions[op] = Registration.of(fn, name)
    resolved.clear()


def register_fallthrough(key: DispatchKey, op: str | None = None) -> None:
    """Let `op` (or every op, if None) skip `key` and go on to the next key."""
    global _all_fallthrough
    if op is None:
        _all_fallthrough |= key.bit
        _recompute(_known_ops())
    else:
        _op_fallthrough[op] = _op_fallthrough.get(op, 0) | key.bit
        _recompute([op])


def register_fallback(key: DispatchKey, fn) -> None:
    """A kernel for every op at `key`: fn(op_name, keys_below, args, kwargs); it continues
    the call with redispatch(op_name, keys_below, *args, **kwargs)."""
    _fallbacks[key] = Registration.of(fn)
    _recompute(_known_ops())


def op_table(op: str) -> OpTable | None:
    """The computed table of `op`, or None when nothing was registered for it."""
    return tables.get(op)

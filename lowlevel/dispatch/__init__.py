"""Layer 3, the dispatcher: which kernel runs an op, decided by dispatch keys.

    keys.py         DispatchKey, KeySet (a bit mask: a key's priority is its bit), the
                    registry: CPU, CUDA, Autograd, Profiler, register_backend, register_key
    table.py        what was registered (kernels per op, key and dtype; fallthroughs;
                    fallbacks) and each op's table, recomputed at every registration
    dispatcher.py   call, redispatch, explain, route; the thread's include/exclude sets
    profiler.py     the Profiler key: `with lowlevel.profile() as p:` records each op and a timeline

    register_kernel("add", CPU, fn, dtypes=[float32])   a kernel for an op and key
    register_backend("MyDevice", "mydevice")            a new backend key with its device type
    register_fallthrough(key, "add")                     let an op pass through a key
    register_fallback(key, fn)                           a kernel for every op at a key
    register_decomposition("mul.Scalar", fn)             an op as other ops, where no kernel takes it
    explain("add", a, b)                                 the route, as text

A call is one key-set computation and one lookup in the op's table. The dispatcher reads
its arguments duck-typed (`.device.type`, `.dtype.name`) and imports nothing of the
frontend or the backends.
"""
from .dispatcher import (AUTOGRAD_BIT, NotImplementedForKey, call, call_known, dtype_of, exclude, explain, include, is_excluded,
                         keyset_bits, keyset_for, redispatch, route, route_through)
from .keys import (CPU, CUDA, Autograd, DispatchKey, KeySet, Profiler, add_key, backend_for, register_backend,
                   register_key)
from .profiler import profile
from .table import op_table, register_decomposition, register_fallback, register_fallthrough, register_kernel

__all__ = [
    "AUTOGRAD_BIT", "CPU", "CUDA", "Autograd", "DispatchKey", "KeySet", "NotImplementedForKey", "Profiler", "add_key", "backend_for",
    "call", "call_known", "dtype_of", "exclude", "explain", "include", "is_excluded", "keyset_bits", "keyset_for", "op_table", "profile",
    "redispatch", "register_backend", "register_decomposition", "register_fallback", "register_fallthrough", "register_kernel",
    "register_key", "route", "route_through",
]

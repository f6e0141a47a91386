"""The atomics on the half types (the step functions of memops.py's and vecatom.py's atom
and red):

    atom/red.add.noftz.{f16,bf16,f16x2,bf16x2}   each thread's add rounds to nearest even in
                                                 the element type, subnormals kept (.noftz);
                                                 the lanes of a pair add independently

They reach engine/atomics.py as a step function over the raw bits, so the engine keeps
serializing the threads of one address exactly; the add itself is half.py's `hop` (exact
sum, one rounding).
"""
from __future__ import annotations

from .half import hop, x2
from .operands import unsupported

HALF_ATOMIC_TYPES = {"f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}


def half_add_step(ptype: str):
    """The new bits of one thread's atom.add.noftz.<ptype> (old and b: raw bits)."""
    kind = ptype[:-2] if ptype.endswith("x2") else ptype
    if ptype.endswith("x2"):
        return lambda old, b: x2(hop, ("add", kind, "rn", False, False, False), old, b)
    return lambda old, b: hop("add", kind, "rn", False, False, False, old, b)


def half_minmax_step(op: str, ptype: str):
    """The new bits of one thread's vector-element atom.min/max.noftz.<ptype> (sm_90 takes
    these only in vector form, vecatom.py): the min/max of the two values as min/max on
    the half types (a NaN loses to a number, -0 below +0), subnormals kept; the lanes of a
    pair independently."""
    kind = ptype[:-2] if ptype.endswith("x2") else ptype
    if ptype.endswith("x2"):
        return lambda old, b: x2(hop, (op, kind, "rn", False, False, False), old, b)
    return lambda old, b: hop(op, kind, "rn", False, False, False, old, b)


def half_atomic(ins, op: str, ptype: str):
    """(step function, raw bit type) for an atom/red with .noftz, or refuse it by name."""
    if op != "add" or ptype not in HALF_ATOMIC_TYPES:
        raise unsupported(ins, f".noftz with .{op}.{ptype} (only add on f16, bf16 and pairs)")
    return half_add_step(ptype), HALF_ATOMIC_TYPES[ptype]



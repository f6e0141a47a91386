"""The carry flag of add.cc addc sub.cc subc mad.cc madc (addmul.py writes those): its
register, and the runtime helpers that add and subtract with it.

The carry flag CC.CF is a hidden predicate register `%__cc`, created the first time a
kernel uses it; after sub.cc/subc it holds the borrow, as the ISA defines subc as
d = a - (b + CC.CF).
"""
from __future__ import annotations

import numpy as np

from ..ptx.ir import Reg
from .registry import provide


def add_carry(a, b, cin):
    """a + b + cin (unsigned, wrapping) and the carry out."""
    s = a + b
    c1 = s < a
    if cin is None:
        return s, c1
    s2 = s + cin.astype(s.dtype) if isinstance(cin, np.ndarray) else s + s.dtype.type(bool(cin))
    return s2, c1 | (s2 < s)


def sub_borrow(a, b, bin_):
    """a - (b + bin) (unsigned, wrapping) and the borrow out."""
    if bin_ is None:
        return a - b, a < b
    t = bin_.astype(a.dtype) if isinstance(bin_, np.ndarray) else a.dtype.type(bool(bin_))
    return a - b - t, (a < b) | ((a == b) & bin_)


_CC = "%__cc"


def cc_register(g) -> Reg:
    """The hidden carry-flag predicate register of this kernel (created on first use)."""
    k = g.ck.kernel
    if _CC not in g.ck.slots:
        k.registers[_CC] = "pred"
        g.ck.slots[_CC] = len(g.ck.slot_dtypes)
        g.ck.slot_dtypes.append(np.bool_)
    return Reg(_CC)


provide(_add_carry=add_carry, _sub_borrow=sub_borrow)

"""Device printf: `vprintf(fmt, args)` (what `call vprintf` becomes, isa/calls.py) is the
pseudo instruction `_vprintf`: per active thread, in thread order, it reads the format
string and the argument buffer through generic addresses (global/local memory: see
engine/spaces.py) and formats with C printf rules; the text goes to the launch's printed
output, which tools/printf.py writes to stdout when the kernel completes.
"""
from __future__ import annotations

import math
import re
import struct

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Reg
from .calls import param_reg
from .registry import family, provide


def emit_vprintf(g, ins):
    ret, fmt, args = ins.operands
    guard = g.guard(ins)
    sizes = getattr(g.ck.kernel, "param_vars", {})
    for s in (fmt, args):
        if s.name not in sizes or sizes[s.name] < 8:
            raise PtxError(ins.line, f"vprintf argument {s.name} is not a 64-bit .param: {ins.text}")
    f = g.read(ins, Reg(param_reg(fmt.name, 0)), "u64")
    a = g.read(ins, Reg(param_reg(args.name, 0)), "u64")
    iid = g.ns["_register_instruction"](ins)
    r = g.fresh()
    g.emit(f"{r} = _printf(C, {f}, {a}, {iid}, {guard if guard is not None else 'None'})")
    if ret is not None:
        if ret.name not in sizes:
            raise PtxError(ins.line, f"vprintf result {ret.name} is not a .param: {ins.text}")
        g.write(ins, Reg(param_reg(ret.name, 0)), r, "u64", guard)


FAMILY = family("printf", __name__)
FAMILY.declare("_vprintf", emit=emit_vprintf)


_SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|L|q|j|z|t)?([diouxXeEfFgGaAcspn%])")


def _load(C, addr, size, iid, mask):
    """Values of `size` bytes at per-lane generic addresses (lanes where mask)."""
    n = C.n
    addr = np.broadcast_to(np.asarray(addr, np.uint64), (n,)).copy()
    v = C.load_space("generic", addr, size, 1, iid, mask)
    return np.broadcast_to(np.asarray(v), (n,))


def strings(C, addr, iid, mask, limit=None):
    """NUL-terminated strings at per-lane addresses: dict lane -> bytes."""
    n = C.n
    addr = np.broadcast_to(np.asarray(addr, np.uint64), (n,))
    out = {int(i): bytearray() for i in np.flatnonzero(mask)}
    reading = mask.copy()
    k = 0
    while reading.any():
        if limit is not None and k >= limit:
            break
        b = _load(C, addr + np.uint64(k), 1, iid, reading)
        for i in np.flatnonzero(reading):
            c = int(b[i])
            if c == 0:
                reading[i] = False
            else:
                out[int(i)].append(c)
        k += 1
        if k > 1 << 16:
            break
    return {i: bytes(s) for i, s in out.items()}


def _convert(conv, length, flags, width, prec, value, text=None):
    """One C conversion, formatted with Python's printf-style operator."""
    spec = "%" + flags + (str(width) if width is not None else "") + \
        ("." + str(prec) if prec is not None else "")
    if conv in "di":
        bits = {"hh": 8, "h": 16}.get(length, 64 if length in ("l", "ll", "q", "j", "z", "t") else 32)
        v = int(value) & ((1 << bits) - 1)
        if v >> (bits - 1):
            v -= 1 << bits
        return (spec + "d") % v
    if conv in "ouxX":
        bits = {"hh": 8, "h": 16}.get(length, 64 if length in ("l", "ll", "q", "j", "z", "t") else 32)
        v = int(value) & ((1 << bits) - 1)
        return (spec + ("d" if conv == "u" else conv)) % v
    if conv in "eEfFgG":
        x = struct.unpack("<d", struct.pack("<Q", int(value)))[0]
        if math.isnan(x):
            s = ("-" if math.copysign(1, x) < 0 else "") + ("NAN" if conv.isupper() else "nan")
            return (("%" + flags.replace("0", "") + (str(width) if width else "")) + "s") % s
        return (spec + conv) % x
    if conv in "aA":
        x = struct.unpack("<d", struct.pack("<Q", int(value)))[0]
        s = float.hex(x)
        return s.upper() if conv == "A" else s
    if conv == "c":
        return (spec + "c") % chr(int(value) & 0xFF)
    if conv == "p":
        v = int(value)
        return (("%" + flags.replace("#", "") + (str(width) if width else "") + "s")
                % ("(nil)" if v == 0 else f"0x{v:x}"))
    if conv == "s":
        s = "(null)" if text is None else text.decode("utf-8", errors="replace")
        return (spec + "s") % s
    return ""


def printf(C, fmt_addr, args_addr, iid, guard):
    """vprintf for the current lanes; appends each active thread's text to the launch's
    output in thread order and returns the number of arguments per lane."""
    n = C.n
    active = C.active if C.active is not None else np.ones(n, bool)
    if guard is not None:
        active = active & (guard if isinstance(guard, np.ndarray) else bool(guard))
    if not np.any(active):
        return np.uint64(0)
    fmts = np.broadcast_to(np.asarray(fmt_addr, np.uint64), (n,))
    args = np.broadcast_to(np.asarray(args_addr, np.uint64), (n,))
    texts: dict = {}
    nargs = np.zeros(n, np.uint64)
    for f in np.unique(fmts[active]):
        group = active & (fmts == f)
        first = int(np.flatnonzero(group)[0])
        one = np.zeros(n, bool)
        one[first] = True
        fmt = strings(C, fmts, iid, one)[first].decode("utf-8", errors="replace")
        pieces, count = _pieces(C, fmt, args, iid, group)
        nargs[group] = count
        for i in np.flatnonzero(group):
            texts[int(i)] = _lane_text(pieces, int(i))
    records = [texts[i] for i in sorted(texts)]
    fifo = C.printf_fifo      # the context's printf FIFO (driver/limits.py), or None
    C.stats.printed += "".join(records if fifo is None else fifo.take(records))
    return nargs


def _pieces(C, fmt: str, args, iid, group) -> tuple[list, int]:
    """The format split into literal strings and one tuple per conversion holding its
    argument column (every lane of `group` read at once), and how many arguments it takes."""
    pieces = []
    off = 0
    pos = 0
    count = 0

    def arg(size):
        nonlocal off
        off = -(-off // size) * size
        v = _load(C, args + np.uint64(off), size, iid, group)
        off += size
        return v

    for mt in _SPEC.finditer(fmt):
        pieces.append(fmt[pos:mt.start()])
        pos = mt.end()
        flags, width, prec, length, conv = mt.groups()
        if conv == "%":
            pieces.append("%")
            continue
        if conv == "n":
            continue
        wcol = arg(4) if width == "*" else None
        pcol = arg(4) if prec == "*" else None
        if conv in "eEfFgGaA" or conv in "sp":
            size = 8
        elif conv == "c":
            size = 4
        else:
            size = 8 if length in ("l", "ll", "q", "j", "z", "t") else 4
        col = arg(size)
        count += 1
        strs = strings(C, col.astype(np.uint64), iid, group & (col != 0)) if conv == "s" else None
        pieces.append((conv, length, flags, width, prec, col, wcol, pcol, strs))
    pieces.append(fmt[pos:])
    return pieces, count


def _lane_text(pieces: list, i: int) -> str:
    """What lane `i` prints: each conversion applied to its value in the lane's column."""
    out = []
    for p in pieces:
        if isinstance(p, str):
            out.append(p)
            continue
        conv, length, flags, width, prec, col, wcol, pcol, strs = p
        w = width
        if wcol is not None:
            w = int(np.int32(np.uint32(wcol[i])))
            if w < 0:
                flags, w = flags + "-", -w
        elif w is not None:
            w = int(w)
        pr = prec
        if pcol is not None:
            pr = int(np.int32(np.uint32(pcol[i])))
            pr = None if pr < 0 else pr
        elif pr is not None:
            pr = int(pr or 0)
        text = strs.get(i) if strs is not None else None
        out.append(_convert(conv, length or "", flags, w, pr, col[i], text))
    return "".join(out)


provide(_printf=printf)


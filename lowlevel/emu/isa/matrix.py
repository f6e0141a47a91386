"""ldmatrix: a warp loads 8x8 matrices of 16-bit elements from shared memory into the
thread-to-element fragment layout the PTX ISA specifies for mma.

    ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 d, [a];

Lanes 8j .. 8j+7 give the addresses of rows 0..7 of matrix j (each row 16 contiguous
bytes, 16-byte aligned); register j of lane l receives row l/4, columns 2(l%4) and
2(l%4)+1 of matrix j (the lower column in the lower half), or with .trans the same
elements of the transposed matrix. The instruction is warp-collective (.aligned): the
emulator runs it only with every lane of full warps converged, and refuses anything else
with a launch fault naming it. mma, stmatrix and movmatrix stay refused by name at load.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Vec
from .memops import address, take_space
from .operands import Mods, operands, unsupported
from .registry import provide, register

WARP = 32


def ldmatrix(C, addrs, count: int, trans: bool, iid: int, text: str):
    """The `count` registers (uint32, one array each) of every lane."""
    if C.lanes is not None or C.active is not None or C.n % WARP:
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"ldmatrix is warp-collective (.aligned): it needs every lane of "
                          f"full, converged warps here ({text})")
    lane = np.arange(C.n) % WARP
    used = lane < 8 * count                     # only these lanes' addresses are read
    addrs = np.broadcast_to(np.asarray(addrs).astype(np.uint64), (C.n,))
    rows = C.load_space("shared", addrs, 2, 8, iid, used)          # (n, 8) uint16
    rows = np.asarray(rows, np.uint32).reshape(C.n // WARP, WARP, 8)
    group, pair = np.arange(WARP) // 4, np.arange(WARP) % 4
    out = []
    for j in range(count):
        mat = rows[:, 8 * j:8 * j + 8, :]                          # (warps, row, column)
        if trans:
            mat = mat.transpose(0, 2, 1)
        lo, hi = mat[:, group, 2 * pair], mat[:, group, 2 * pair + 1]
        out.append((lo | (hi << 16)).reshape(C.n).astype(np.uint32))
    return out


provide(_ldmatrix=ldmatrix)


def emit_ldmatrix(g, ins):
    m = Mods(ins)
    if not (m.take("sync") and m.take("aligned") and m.take("m8n8")):
        raise unsupported(ins, "shape (only .sync.aligned.m8n8)")
    num = m.take("x1", "x2", "x4")
    trans = m.take("trans") is not None
    space = take_space(ins, m, "shared") or "shared"
    m.take("b16")
    m.done()
    if num is None or "b16" not in ins.mods:
        raise PtxError(ins.line, f"ldmatrix needs .x1/.x2/.x4 and .b16: {ins.text}")
    count = int(num[1])
    d, a = operands(ins, 2)
    dests = d.elems if isinstance(d, Vec) else [d]
    if len(dests) != count or any(e is None for e in dests):
        raise PtxError(ins.line, f"ldmatrix.{num} needs {count} destination registers: {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated ldmatrix")
    g.ck.uses_shared = True
    addr = address(g, ins, a, space)
    iid = g.ns["_register_instruction"](ins)
    tmp = g.fresh()
    g.emit(f"{tmp} = _ldmatrix(C, {addr}, {count}, {trans}, {iid}, {ins.text!r})")
    for j, e in enumerate(dests):
        g.write(ins, e, f"{tmp}[{j}]", "u32", None)


register(emit_ldmatrix, "ldmatrix")

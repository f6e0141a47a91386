"""stmatrix and movmatrix: the inverse of ldmatrix, and a transpose within registers.

    stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 [a], r;    (sm_90)
    movmatrix.sync.aligned.m8n8.trans.b16 d, a;                                  (sm_75)

Both use ldmatrix's fragment of an 8x8 matrix of 16-bit elements: register j of lane l
holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix j (the lower column in the lower
half). stmatrix writes matrix j's row r to the 16 bytes at the address lane 8j + r gives
(with .trans, the fragment holds the transposed matrix, so its columns are written as
rows); movmatrix returns, in every lane, the same fragment of the transposed matrix. Both
are warp-collective (.aligned) and run only with full, converged warps, as ldmatrix.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Vec
from .warpmask import converged
from .addressing import address, take_space
from .operands import Mods, operands, unsupported
from .registry import family, provide

WARP = 32


def _fragment_matrix(reg, n: int):
    """(warps, 8, 8) uint16 matrices from one register of every lane."""
    r = np.broadcast_to(np.asarray(reg, np.uint32), (n,)).reshape(n // WARP, 8, 4)
    lo, hi = (r & 0xFFFF).astype(np.uint16), (r >> 16).astype(np.uint16)
    return np.stack([lo, hi], axis=3).reshape(n // WARP, 8, 8)      # row l/4, col 2(l%4)+h


def _fragment_registers(mat):
    """The inverse of _fragment_matrix: one uint32 per lane."""
    pairs = mat.reshape(mat.shape[0], 8, 4, 2).astype(np.uint32)
    return (pairs[..., 0] | (pairs[..., 1] << 16)).reshape(-1)


def stmatrix(C, addrs, regs, trans: bool, iid: int, text: str) -> None:
    converged(C, "stmatrix", text)
    count = len(regs)
    lane = np.arange(C.n) % WARP
    used = lane < 8 * count                     # only these lanes' addresses are written
    addrs = np.broadcast_to(np.asarray(addrs).astype(np.uint64), (C.n,))
    rows = np.zeros((C.n // WARP, WARP, 8), np.uint16)
    for j, reg in enumerate(regs):
        mat = _fragment_matrix(reg, C.n)
        rows[:, 8 * j:8 * j + 8] = mat.transpose(0, 2, 1) if trans else mat
    rows = rows.reshape(C.n, 8)
    C.store_space("shared", addrs, 2, 8, [rows[:, c] for c in range(8)], iid, used)


def movmatrix(C, reg, text: str):
    converged(C, "movmatrix", text)
    return _fragment_registers(_fragment_matrix(reg, C.n).transpose(0, 2, 1))


provide(_stmatrix=stmatrix, _movmatrix=movmatrix)


def emit_stmatrix(g, ins):
    m = Mods(ins)
    if not (m.take("sync") and m.take("aligned") and m.take("m8n8")):
        raise unsupported(ins, "shape (only .sync.aligned.m8n8)")
    num = m.take("x1", "x2", "x4")
    trans = m.take("trans") is not None
    space = take_space(ins, m, "shared") or "shared"
    b16 = m.take("b16")
    m.done()
    if num is None or b16 is None:
        raise PtxError(ins.line, f"stmatrix needs .x1/.x2/.x4 and .b16: {ins.text}")
    if g.ck.kernel.binary_version < 90:
        raise PtxError(ins.line, f"stmatrix requires sm_90 or later "
                                 f"(target sm_{g.ck.kernel.binary_version}): {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated stmatrix")
    count = int(num[1])
    a, r = operands(ins, 2)
    srcs = r.elems if isinstance(r, Vec) else [r]
    if len(srcs) != count or any(e is None for e in srcs):
        raise PtxError(ins.line, f"stmatrix.{num} takes {count} source registers: {ins.text}")
    g.ck.uses_shared = True
    addr = address(g, ins, a, space)
    iid = g.ns["_register_instruction"](ins)
    vals = ", ".join(g.read(ins, e, "u32") for e in srcs)
    g.emit(f"_stmatrix(C, {addr}, [{vals}], {trans}, {iid}, {ins.text!r})")


def emit_movmatrix(g, ins):
    m = Mods(ins)
    form = [m.take("sync"), m.take("aligned"), m.take("m8n8"), m.take("trans"), m.take("b16")]
    m.done()
    if None in form:
        raise unsupported(ins, "form (only movmatrix.sync.aligned.m8n8.trans.b16)")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated movmatrix")
    d, a = operands(ins, 2)
    g.write(ins, d, f"_movmatrix(C, {g.read(ins, a, 'u32')}, {ins.text!r})", "u32", None)


FAMILY = family("matrix_store", __name__)
FAMILY.declare("stmatrix", emit=emit_stmatrix)
FAMILY.declare("movmatrix", emit=emit_movmatrix)

"""Two small integer instructions of sm_70+/sm_90:

    elect.sync d|p, membermask    (sm_90) the leader of the mask: the member with the least
                                  laneid; d its laneid in every participant (or the `_`
                                  sink), p true in the leader only; the member rule of every
                                  .sync warp instruction applies (warp.py's check_members)
    szext.{clamp,wrap}.{u32,s32} d, a, b
                                  (sm_70+) the low N bits of a, zero- or sign-extended to 32
                                  bits; N = b modulo 32 (.wrap) or b clamped to 32 (.clamp);
                                  N = 0 gives 0 (the ISA's pseudo-code)
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import PredPair, Reg
from .operands import Mods, operands, unsupported
from .registry import family, provide
from .warpmask import sync_kind
from .warp import elect

U32 = np.uint32


def szext(mode: str, signed: bool, a, b):
    """The ISA's szext pseudo-code over u32 arrays (or scalars) a, b."""
    a = np.asarray(a, U32)
    b = np.asarray(b, U32)
    b1 = b & U32(0x1F)
    too_large = (b >= U32(32)) & (mode == "clamp")
    # mask: the bits above the N kept (all of them when b1 = 0, so .wrap of a multiple
    # of 32 gives 0; none when .clamp saw N >= 32, so a is kept whole)
    mask = np.where(too_large, U32(0), (U32(0xFFFFFFFF) << b1).astype(U32))
    sign_pos = (b1 - U32(1)) & U32(0x1F)
    sign = ((a >> sign_pos) & U32(1)).astype(bool) & (b1 != 0) & ~too_large & signed
    d = (a & ~mask) | np.where(sign, mask, U32(0))
    return d.astype(U32)


provide(_szext=szext, _elect=elect)


def emit_szext(g, ins):
    m = Mods(ins)
    mode = m.take("clamp", "wrap")
    t = m.one_type({"u32", "s32"})
    m.done()
    if mode is None:
        raise PtxError(ins.line, f"szext needs .clamp or .wrap: {ins.text}")
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    expr = f"_szext({mode!r}, {t == 's32'}, {g.read(ins, a, 'u32')}, {g.read(ins, b, 'u32')})"
    g.write(ins, d, expr, "u32", guard)


def emit_elect(g, ins):
    m = Mods(ins)
    if not m.take("sync"):
        raise unsupported(ins, "elect without .sync")
    m.done()
    dp, mask = operands(ins, 2)
    if not isinstance(dp, PredPair) or dp.q is None:
        raise PtxError(ins.line, f"elect.sync takes d|p, membermask: {ins.text}")
    d = None if isinstance(dp.p, Reg) and dp.p.name == "_" else dp.p     # the `_` sink
    guard = g.guard(ins)
    gexpr = guard if guard is not None else "None"
    iid = g.ns["_register_instruction"](ins)
    r = g.fresh()
    g.emit(f"{r} = _elect(C, {g.read(ins, mask, 'u32')}, {gexpr}, {iid})")
    g.write(ins, d, f"{r}[0]", "u32", guard)
    g.write(ins, dp.q, f"{r}[1]", "pred", guard)


FAMILY = family("electszext", __name__)
FAMILY.declare("szext", emit=emit_szext)
FAMILY.declare("elect", emit=emit_elect, warp_sync=sync_kind)

__all__ = ["emit_elect", "emit_szext", "szext"]

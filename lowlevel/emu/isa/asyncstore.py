"""Asynchronous stores and reductions into a cluster peer's shared memory (sm_90, PTX 8.1),
completed on the peer's mbarrier: their modifiers, addresses and run time (memops.py's
emit_st_async and atom.py's emit_red_async write the instructions):

    st.async{.weak}{.shared::cluster}.mbarrier::complete_tx::bytes{.v2,.v4}.type
                                                            [a], b, [mbar];
        .type = .b32 .b64 .u32 .u64 .s32 .s64 .f32 .f64   (at most 128 bits)
    red.async.relaxed.cluster{.shared::cluster}.mbarrier::complete_tx::bytes.op.type
                                                            [a], b, [mbar];
        .inc/.dec .u32; .min/.max .u32 .s32; .add .u32 .s32 .u64; .and/.or/.xor .b32

Each thread's store (or reduction) targets a .shared::cluster address, and performs
complete_tx of its size in bytes on the mbarrier at `mbar`, which must lie in the same CTA.
As for cp.async.bulk (bulkcopy.py, whose machinery this shares), the complete_tx happens
at issue and the store or the reduction lands when a wait on that barrier sees the counted
phase over, so a reader that does not wait reads the old bytes. The address is aligned to
the access size (CUDA_ERROR_MISALIGNED_ADDRESS) and inside the target CTA's window.
"""
from __future__ import annotations

import numpy as np

from ..engine.atomics import atomic_rmw
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Addr, Instruction
from .bulkcopy import complete_tx
from .addressing import address, take_space
from .operands import Mods
from .registry import provide

_COMPLETE = "mbarrier::complete_tx::bytes"
_U64 = np.uint64
ST_TYPES = {"b32", "b64", "u32", "u64", "s32", "s64", "f32", "f64"}
RED_TYPES = {"inc": {"u32"}, "dec": {"u32"}, "min": {"u32", "s32"}, "max": {"u32", "s32"},
              "add": {"u32", "s32", "u64"}, "and": {"b32"}, "or": {"b32"}, "xor": {"b32"}}


def async_modifiers(ins: Instruction, m: Mods) -> None:
    """Take the space and completion every form has."""
    m.take("async")
    if take_space(ins, m, "shared", cluster_ok=True) not in (None, "shared::cluster"):
        raise PtxError(ins.line, f"{ins.opcode}.async writes .shared::cluster: {ins.text}")
    if m.take(_COMPLETE) is None:
        raise PtxError(ins.line, f"{ins.opcode}.async completes through .{_COMPLETE}: {ins.text}")


def async_addresses(g, ins, ops):
    a, b, mbar = ops
    if not isinstance(a, Addr) or not isinstance(mbar, Addr):
        raise PtxError(ins.line, f"{ins.opcode}.async takes [a], b, [mbar]: {ins.text}")
    g.ck.uses_shared = True
    return address(g, ins, a, "shared::cluster"), b, address(g, ins, mbar, "shared::cluster")


# --- runtime ---------------------------------------------------------------------------

def _selected(C, guard):
    active, any_active = C.active_with(guard)
    if not any_active:
        return None
    return np.ones(C.n, bool) if active is None else np.asarray(active, bool).copy()


def st_async(C, a, mb, values, size: int, iid: int, guard) -> None:
    sel = _selected(C, guard)
    if sel is None:
        return
    nbytes = size * len(values)
    cols = [np.broadcast_to(np.asarray(v, np.dtype(f"u{size}")), (C.n,)) for v in values]
    rows = np.stack(cols, axis=1)[sel].copy().view(np.uint8)      # each lane's bytes

    def write(C, dst, m):
        C.smem[dst[:, None] + np.arange(nbytes)] = rows[m]
    complete_tx(C, _full(C, a), _full(C, mb), np.full(C.n, nbytes, _U64), sel, write, iid,
                unit=nbytes)


def red_async(C, a, mb, value, op: str, ptype: str, iid: int, guard) -> None:
    sel = _selected(C, guard)
    if sel is None:
        return
    size, kind = TYPES[ptype]
    vdt = np.dtype(f"i{size}") if kind == "s" else np.dtype(f"u{size}")
    vals = np.broadcast_to(np.asarray(value, np.dtype(f"u{size}")), (C.n,))[sel].view(vdt)

    def write(C, dst, m):            # in lane order, as one atomic instruction serializes
        atomic_rmw(C.smem.view(vdt), dst // size, op, np.ascontiguousarray(vals[m]))
    complete_tx(C, _full(C, a), _full(C, mb), np.full(C.n, size, _U64), sel, write, iid,
                unit=size)


def _full(C, x):
    return np.broadcast_to(np.asarray(x, _U64), (C.n,))


provide(_st_async=st_async, _red_async=red_async)

__all__ = ["RED_TYPES", "ST_TYPES", "async_addresses", "async_modifiers", "red_async", "st_async"]

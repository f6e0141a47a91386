"""Bulk asynchronous copies completed through an mbarrier (sm_90; TMA-less, not .tensor):
what `cuda::memcpy_async` and CUTLASS emit on Hopper for contiguous tiles.

    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{.multicast::cluster}
        {.L2::cache_hint}           [dstMem], [srcMem], size, [mbar]{, ctaMask}{, policy};
    cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes ...   (PTX 8.6)
    cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes
                                    [dstMem], [srcMem], size, [mbar];
    cp.async.bulk.prefetch.L2.global{.L2::cache_hint}  [srcMem], size{, policy};

Each issuing thread copies `size` bytes (a multiple of 16; both addresses 16-aligned) into
the shared memory of a CTA of its cluster (a .shared::cluster address, mapa; with
.multicast::cluster to the same offset in every CTA whose bit is set in the 16-bit
ctaMask), and performs complete_tx of `size` bytes on the mbarrier at `mbar`, which must
lie in the destination CTA (for multicast, the same offset in each destination CTA).

When the copy lands: the source is read at issue and the complete_tx is applied at issue
(so the barrier's phase completes by the ISA's rules: pending arrivals and tx-count both
zero), but the bytes reach shared memory only when a thread's wait on that barrier
succeeds for the phase the copy was counted in (complete_tx hands the write to
mbarrier.land_on_completion, and mbarrier.py lands it). A kernel that
reads the destination without waiting on the barrier reads what was there before, as it
may on a GPU, instead of seeing a copy that is not guaranteed to have arrived.

Faults (named, with the thread and PTX line): size not a positive multiple of 16
(CUDA_ERROR_LAUNCH_FAILED, undefined in the ISA), a misaligned address
(CUDA_ERROR_MISALIGNED_ADDRESS), a source outside one allocation or a destination outside
the CTA's shared window (CUDA_ERROR_ILLEGAL_ADDRESS), an mbarrier in another CTA than the
destination, and what mbarrier.py faults on (an object mbarrier.init did not set up, a
tx-count out of range).

cp.async.bulk.tensor (TMA), cp.reduce.async.bulk.tensor and the bulk groups
(cp.async.bulk.commit_group / wait_group): tma.py (asyncopy.py hands them there). Refused by name (valid sm_90 PTX the
emulator does not run): the non-tensor bulk-group forms (shared to global) and
cp.reduce.async.bulk.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Imm, Instruction
from . import mbarrier
from .addressing import OFFSET_MASK, RANK_SHIFT, address, operands_less_policy
from .operands import unsupported
from .registry import provide

_U64 = np.uint64
_COMPLETE = "mbarrier::complete_tx::bytes"
_HINTS = {"L2::cache_hint"}


# --- emitters ----------------------------------------------------------------------------

def emit_bulk(g, ins: Instruction, m) -> None:
    """cp.async.bulk... (called by asyncopy.emit_cp with `async` and `bulk` taken)."""
    if m.take("reduce"):
        raise unsupported(ins, "cp.reduce.async.bulk: not implemented by the emulator")
    if m.take("prefetch"):
        _emit_prefetch(g, ins, m)
        return
    spaces = [x for x in ins.mods if x in ("global", "shared::cluster", "shared::cta", "shared")]
    for x in spaces:
        m.take(x)
    if m.take("bulk_group"):
        raise unsupported(ins, "the bulk-group completion (shared to global copies): not "
                               "implemented by the emulator")
    if m.take(_COMPLETE) is None:
        raise PtxError(ins.line, f"cp.async.bulk to shared memory completes through "
                                 f".{_COMPLETE}: {ins.text}")
    multicast = m.take("multicast::cluster") is not None
    hint = bool(m.take_all(_HINTS))
    m.done()
    if spaces not in (["shared::cluster", "global"], ["shared::cta", "global"],
                      ["shared::cluster", "shared::cta"]):
        raise PtxError(ins.line, f"cp.async.bulk copies .global to .shared::cluster (or "
                                 f".shared::cta), or .shared::cta to .shared::cluster: {ins.text}")
    if multicast and spaces[1] != "global":
        raise PtxError(ins.line, f".multicast::cluster copies from .global: {ins.text}")
    ops = operands_less_policy(g, ins, 4 + multicast) if hint else list(ins.operands)
    if len(ops) != 4 + multicast:
        raise PtxError(ins.line, f"cp.async.bulk takes [dstMem], [srcMem], size, [mbar]"
                                 f"{', ctaMask' if multicast else ''}: {ins.text}")
    dst, src, size, mbar = ops[:4]
    if not all(isinstance(x, Addr) for x in (dst, src, mbar)):
        raise PtxError(ins.line, f"cp.async.bulk needs [dstMem], [srcMem] and [mbar] "
                                 f"addresses: {ins.text}")
    g.ck.uses_shared = True
    space = "shared::cluster" if spaces[0] == "shared::cluster" else "shared"
    d, mb = address(g, ins, dst, space), address(g, ins, mbar, space)
    s = address(g, ins, src, "global" if spaces[1] == "global" else "shared")
    n = _integer(g, ins, size)
    mask = _integer(g, ins, ops[4], "u16") if multicast else "None"
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_bulk_copy(C, {d}, {s}, {n}, {mb}, {spaces[1] == 'global'}, {mask}, {iid}, "
           f"{guard if guard is not None else 'None'})")


def _integer(g, ins, op, ptype="u32"):
    if isinstance(op, Imm) and op.is_float:
        raise PtxError(ins.line, f"cp.async.bulk takes integer operands: {ins.text}")
    return g.read(ins, op, ptype)


def _emit_prefetch(g, ins, m) -> None:
    """A prefetch into L2 changes no result: its operands are read and it does nothing."""
    m.take("L2")
    m.take("global")
    hint = bool(m.take_all(_HINTS))
    m.done()
    ops = operands_less_policy(g, ins, 2) if hint else list(ins.operands)
    if len(ops) != 2 or not isinstance(ops[0], Addr):
        raise PtxError(ins.line, f"cp.async.bulk.prefetch takes [srcMem], size: {ins.text}")
    address(g, ins, ops[0], "global")
    _integer(g, ins, ops[1])


# --- runtime -----------------------------------------------------------------------------

def _fault(C, code: str, lane: int, iid: int, what: str):
    ins = C.ck.instructions[iid]
    raise KernelFault(code, f"{C.name}: {what} by {C.who_batch(lane)}, PTX line {ins.line}: "
                            f"{ins.text}")


def bulk_copy(C, dst, src, size, mbar, from_global: bool, mask, iid: int, guard) -> None:
    """The copies of the current lanes whose guard holds: source read now, complete_tx
    now, bytes pending until a wait on the barrier sees its phase over."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    act = np.ones(C.n, bool) if active is None else np.asarray(active, bool)
    lanes = C.batch_lanes(active, None)
    full = {k: np.broadcast_to(np.asarray(v, _U64), (C.n,)) for k, v in
            (("d", dst), ("s", src), ("n", size), ("m", mbar))}
    d, s, n, mb = (full[k][act] for k in "dsnm")
    _check(C, d, s, n, lanes, iid)
    data, offs = _sources(C, s, n, from_global, act, lanes, iid)
    sizes = n.astype(np.int64)
    for rank_bits, who in _targets(C, d, mask, act):
        sel = np.zeros(C.n, bool)
        sel[np.flatnonzero(act)[who]] = True
        d_t = np.where(sel, _with_rank(full["d"], rank_bits), _U64(0))
        m_t = np.where(sel, _with_rank(full["m"], rank_bits), _U64(0))
        complete_tx(C, d_t, m_t, full["n"], sel, _copy_write(data, offs[who], sizes[who]), iid)


def _sources(C, s, n, from_global: bool, act, lanes, iid):
    """The source bytes of every thread, read at issue (one flat array), and where each
    thread's start in it."""
    sizes = n.astype(np.int64)
    offs = np.cumsum(sizes) - sizes
    if from_global and s.size:
        hit = C.memory.find(int(s.min()))
        if hit is not None and int((s + n).max()) <= hit[0] + hit[1]:   # one allocation
            return C.memory.u8[_spans(s.astype(np.int64) + C.memory.shift, sizes)], offs
    elif s.size:                    # the CTA's own shared memory (::cta), checked at once
        try:
            first = C.window_index("shared", s, 16, 1, iid, "load", act, None)
            big = n > _U64(16)
            if big.any():
                C.window_index("shared", (s + n - _U64(16))[big], 16, 1, iid, "load", act, big)
            return C.smem[_spans(first, sizes)], offs
        except KernelFault:         # the lane-by-lane reads below name the first at fault
            pass
    data = [_read(C, int(s[j]), int(n[j]), from_global, act, j, lanes, iid) for j in range(s.size)]
    return (np.concatenate(data) if data else np.zeros(0, np.uint8)), offs


def _spans(starts, sizes):
    """The byte indices of the spans [starts[k], starts[k] + sizes[k]), one after another."""
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(starts, sizes) + within


def _copy_write(data, offs, sizes):
    """The pending writes of copies: write(C, dst, m) lands the copies selected by mask m
    at destination byte indices dst."""
    def write(C, dst, m):
        C.smem[_spans(dst, sizes[m])] = data[_spans(offs[m], sizes[m])]
    return write


def _check(C, d, s, n, lanes, iid) -> None:
    bad = (n == 0) | ((n & _U64(15)) != 0)
    if bad.any():
        j = int(np.argmax(bad))
        _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(lanes[j]), iid,
               f"cp.async.bulk size {int(n[j])}, not a positive multiple of 16 (undefined "
               f"behaviour on a GPU)")
    for what, a in (("destination", d), ("source", s)):
        bad = (a & _U64(15)) != 0
        if bad.any():
            j = int(np.argmax(bad))
            _fault(C, "CUDA_ERROR_MISALIGNED_ADDRESS", int(lanes[j]), iid,
                   f"misaligned cp.async.bulk {what} {int(a[j]):#x} (16-byte alignment)")


def _read(C, s: int, n: int, from_global: bool, act, j: int, lanes, iid):
    """The n source bytes of one thread, read at issue."""
    if from_global:
        hit = C.memory.find(s)
        if hit is None or s + n > hit[0] + hit[1]:
            _fault(C, "CUDA_ERROR_ILLEGAL_ADDRESS", int(lanes[j]), iid,
                   f"out-of-bounds {n}-byte cp.async.bulk global read at {s:#x}")
        off = s + C.memory.shift
        return C.memory.u8[off:off + n].copy()
    start = _window(C, s, n, act, j, iid, "load", remote=False)   # the CTA's own (::cta)
    return C.smem[start:start + n].copy()


def _window(C, a: int, n: int, act, j: int, iid, kind="store", remote=True, unit=16) -> int:
    """The batch's shared-memory byte index of shared(::cluster) address `a` of lane j
    of the active lanes, checking the n bytes lie in one CTA's window (and `a` is aligned
    to `unit`)."""
    one = np.zeros(C.n, bool)
    one[np.flatnonzero(act)[j]] = True
    first = C.window_index("shared", np.array([a], _U64), unit, 1, iid, kind, one, None, remote=remote)
    if n > unit:    # the last bytes in the window too (same CTA: the rank bits do not change)
        C.window_index("shared", np.array([a + n - unit], _U64), unit, 1, iid, kind, one, None,
                       remote=remote)
    return int(first[0])


def _targets(C, d, mask, act):
    """[(rank bits to put in the destination, indices of the active lanes copying there)]:
    the destination's own CTA, or with .multicast::cluster each CTA set in ctaMask."""
    if mask is None:
        return [(None, np.arange(d.size))]
    m = np.broadcast_to(np.asarray(mask, np.uint16), (C.n,))[act]
    out = []
    for rank in range(16):
        who = np.flatnonzero((m >> np.uint16(rank)) & np.uint16(1))
        if who.size:
            out.append((rank, who))
    return out


def _with_rank(a, rank):
    if rank is None:
        return a
    return ((a & _U64(OFFSET_MASK)) | (_U64(rank + 1) << _U64(RANK_SHIFT))).astype(_U64)


def complete_tx(C, d, mb, n, sel, write, iid, unit=16) -> None:
    """complete_tx of each selected lane's size `n` on its barrier `mb`, and its write
    pending until a wait sees that phase over: write(C, dst, m) lands the writes of the
    selected lanes picked by mask m (in lane order) at destination byte indices dst.
    d, mb, n: over the current lanes."""
    lanes_j = np.flatnonzero(sel)
    b = ((_U64(0) - n) & _U64(0xFFFFFFFF)) << _U64(32)
    old = mbarrier.mbar_update(C, "arrive", "cluster", mb, b, False, iid, sel)
    phases = np.broadcast_to(mbarrier.decode(old)[3], (C.n,))[lanes_j]
    try:
        dst, bar = _indices(C, d, mb, n, sel, iid, unit)
    except KernelFault:             # the lane-by-lane checks name the first lane at fault
        dst = bar = None
    if dst is None or (bar // C.smem_stride != dst // C.smem_stride).any():
        _each_lane(C, d, mb, n, sel, iid, unit)
    mbarrier.land_on_completion(C, bar, phases, dst, write)


def _indices(C, d, mb, n, sel, iid, unit):
    """Destination and barrier byte indices of the selected lanes, all at once."""
    ds, ns = d[sel], n[sel]
    dst = C.window_index("shared", ds, unit, 1, iid, "store", sel, None, remote=True)
    big = ns > _U64(unit)
    if big.any():                   # the last bytes in the window too
        C.window_index("shared", (ds + ns - _U64(unit))[big], unit, 1, iid, "store", sel, big,
                       remote=True)
    bar = C.window_index("shared", mb[sel], 8, 1, iid, "atomic", sel, None, remote=True)
    return dst, bar


def _each_lane(C, d, mb, n, sel, iid, unit) -> None:
    """The checks of _indices lane by lane, in lane order, faulting on the first."""
    for k, lane in enumerate(np.flatnonzero(sel)):
        dst = _window(C, int(d[lane]), int(n[lane]), sel, k, iid, unit=unit)
        bar = _bar_index(C, mb, sel, k, iid)
        if bar // C.smem_stride != dst // C.smem_stride:
            _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(C.batch_lanes(sel, None)[k]), iid,
                   "cp.async.bulk completes on an mbarrier outside the destination's CTA")
    raise AssertionError("the checks at once faulted where lane by lane did not")


def _bar_index(C, mb, sel, k, iid) -> int:
    one = np.zeros(C.n, bool)
    one[np.flatnonzero(sel)[k]] = True
    return int(C.window_index("shared", mb[one], 8, 1, iid, "atomic", one, None, remote=True)[0])


provide(_bulk_copy=bulk_copy)

__all__ = ["emit_bulk", "bulk_copy", "complete_tx"]

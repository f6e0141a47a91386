"""Warp-level instructions and the special registers computed on the fly.

shfl.sync, vote.sync, activemask, match.sync, redux.sync work on the (warps, 32) view of
the batch: each CTA of a batch is padded to whole warps, so batch lane L is lane L % 32 of
warp L // 32. Which lanes take part is what the engine says runs now:

- converged path (`C.lanes is None`): every lane of the batch except exited/padding
  lanes (`C.active`, None = all);
- divergent path: only the gathered lanes `C.lanes` (batch lane numbers) run; the
  generated block sees arrays over those lanes only.

The member mask is checked by warpmask.check_members (the PTX ISA's rule; on sm_70 and
later lanes named in the mask that are elsewhere are waited for, as a GPU does).

Each lane's own member mask decides what it sees (PTX ISA): redux and vote reduce over the
non-exited lanes of it, match compares within it, and lanes of one warp may run the same
instruction at once as separate groups, each with its own mask (CUB's logical warps).

A guard predicate removes a lane as if it were inactive. A shuffle whose source lane is
not active, predicated off, or not in the reading lane's member mask reads an undefined
value on hardware (PTX ISA); here it reads the reading lane's own value: deterministic,
never a crash, and never the source's value that a buggy kernel could come to rely on.

Special registers computed on the fly (%clock, %lanemask_*, %smid ...): specials.py.
"""
from __future__ import annotations


import numpy as np

from .operands import Mods, operands, unsupported
from ..ptx.errors import PtxError
from ..ptx.ir import PredPair
from .registry import family, provide
from .warpmask import sync_kind, check_members, current_lanes, participating, to_batch, words

WARP = 32
U32, U64, I64 = np.uint32, np.uint64, np.int64

_LANE32 = np.arange(WARP, dtype=I64)

# --- lane bookkeeping (current_lanes, participating, to_batch, words: warpmask.py) ---

def _warp_view(C, a, part, partners=None):
    """(values, on) of the current lanes as (warps, 32) arrays over the batch: a value per
    lane, and whether the lane takes part now; `partners` (check_members) add the values
    that lanes paired at another instruction left."""
    a = _full(a, C.n, type(a) if not isinstance(a, np.ndarray) else a.dtype)
    vals = to_batch(C, a, 0, a.dtype)
    on = to_batch(C, part, False, bool)
    if partners is not None:
        vals, on = vals.copy(), on.copy()
        vals[partners[0]] = partners[1].astype(vals.dtype)
        on[partners[0]] = True
    return vals.reshape(-1, WARP), on.reshape(-1, WARP)


def _ballot_words(C, bits, partners=None, their_bits=None):
    """Per-warp u32 ballot of a bool array over the current lanes; returns the word of
    each current lane's warp. `partners` (check_members) add their bits (`their_bits`, or
    all set)."""
    full = to_batch(C, bits, False, bool)
    if partners is not None:
        full = full.copy()
        full[partners[0]] = True if their_bits is None else their_bits
    w = words(full)
    if C.lanes is None:
        return np.repeat(w, WARP).astype(U32)
    return w[C.lanes // WARP].astype(U32)


def warp_sync(C, mask, iid, guard):
    """bar.warp.sync: the lanes that pass it run together here and memory is sequentially
    consistent, so only the member mask is checked (the wait for named lanes elsewhere is
    the scheduler's: warpmask.py)."""
    check_members(C, "bar.warp.sync", mask, guard, iid)


def _full(x, n, dtype):
    if isinstance(x, np.ndarray):
        return x
    return np.full(n, x, dtype)


# --- runtime helpers ---------------------------------------------------------------------

def _in_mask(mask, lane):
    """Whether `lane` (an array of lane numbers 0..31) is named in `mask` (a number, or an
    array of per-lane masks of the same length)."""
    m = np.asarray(mask).astype(U32, copy=False)
    return ((m >> np.asarray(lane).astype(U32)) & U32(1)) != 0


def shfl(C, mode, a, b, c, mask, guard, iid):
    """shfl.sync: (value, in-range predicate) per current lane (ISA pseudo-code). A source
    lane that is inactive, predicated off or not in the reading lane's member mask gives an
    undefined value (PTX ISA): here the reading lane's own value."""
    partners = check_members(C, "shfl.sync", mask, guard, iid, a)
    if partners is not None:
        return _shfl_paired(C, mode, a, b, c, mask, guard, partners)
    n = C.n
    uniform_bc = not isinstance(b, np.ndarray) and not isinstance(c, np.ndarray)
    if C.lanes is None and uniform_bc:
        lane = _LANE32                       # every warp looks the same: compute once
    else:
        lane = current_lanes(C) % WARP
    bval = (np.asarray(b).astype(I64) & 31)
    cval = (np.asarray(c).astype(I64) & 31)
    segmask = (np.asarray(c).astype(I64) >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        pval = j >= max_lane
    elif mode == "down":
        j = lane + bval
        pval = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        pval = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask)
        pval = j <= max_lane
    j = np.where(pval, j, lane)
    every_source_defined = (C.lanes is None and C.active is None and guard is None
                            and not isinstance(mask, np.ndarray) and bool(_in_mask(mask, j).all()))
    if C.lanes is None and uniform_bc:
        pred = np.tile(pval, n // WARP)
        if not isinstance(a, np.ndarray):
            return a, pred
        if every_source_defined:
            return a.reshape(-1, WARP)[:, j].reshape(-1), pred
        j = np.tile(j, n // WARP)
        lane = np.tile(lane, n // WARP)
        pval = pred
    elif not isinstance(a, np.ndarray):
        return a, np.broadcast_to(pval, (n,)).copy()
    j = np.broadcast_to(j, (n,))
    src = current_lanes(C) - lane + j                  # batch lane of each source
    on = to_batch(C, participating(C, guard), False, bool)
    defined = on[src] & _in_mask(mask, j)
    if C.lanes is None:
        return np.where(defined, a[src], a), pval
    pos = np.full(C.n_lanes, -1, I64)
    pos[C.lanes] = np.arange(n)
    idx = pos[src]                                      # a source that runs now is current
    return np.where(defined, a[np.maximum(idx, 0)], a), pval


def _shfl_paired(C, mode, a, b, c, mask, guard, partners):
    """shfl.sync on the divergent path where some source lanes were paired at another
    shfl.sync with the same qualifiers and mask: their values are those they left."""
    n = C.n
    lane = current_lanes(C) % WARP
    bval = np.asarray(b).astype(I64) & 31
    cval = np.asarray(c).astype(I64) & 31
    segmask = (np.asarray(c).astype(I64) >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask)
    j = {"up": lane - bval, "down": lane + bval, "bfly": lane ^ bval}.get(
        mode, (lane & segmask) | (bval & ~segmask))
    pval = j >= max_lane if mode == "up" else j <= max_lane
    j = np.where(pval, j, lane)
    mine = _full(a, n, U32).astype(U32)
    V, O = _warp_view(C, mine, participating(C, guard), partners)
    src = current_lanes(C) - lane + j
    defined = O.reshape(-1)[src] & _in_mask(mask, j)
    return np.where(defined, V.reshape(-1)[src], mine), np.broadcast_to(pval, (n,)).copy()


def vote(C, mode, p, mask, guard, iid=None):
    part = participating(C, guard)
    if mode == "activemask":
        return _ballot_words(C, part)
    partners = check_members(C, "vote.sync", mask, guard, iid, p)
    act = _ballot_words(C, part, partners)
    theirs = None if partners is None else partners[1] != 0
    pb = _ballot_words(C, part & p if isinstance(p, np.ndarray) else part & bool(p),
                       partners, theirs)
    m = act & np.asarray(mask, U32)
    if mode == "ballot":
        return pb & np.asarray(mask, U32)
    if mode == "all":
        return (m & ~pb) == 0
    if mode == "any":
        return (m & pb) != 0
    t = m & pb                                   # uni: all or none of the members
    return (t == 0) | (t == m)


def _mask_view(C, mask):
    """The per-lane member masks (an array over the current lanes) as a (warps, 32) u32
    array over the batch (lanes not current hold 0)."""
    return to_batch(C, mask.astype(U32, copy=False), 0, U32).reshape(-1, WARP)


def _per_lane(C, r):
    """A (warps, 32) array over the batch as an array over the current lanes."""
    r = r.reshape(-1)
    return r if C.lanes is None else r[C.lanes]


def match(C, mode, a, mask, guard, iid):
    """match.sync (PTX ISA): .any gives the lanes of the member mask that take part and
    hold the same value; .all gives the lanes of the member mask that take part if they
    all hold the same value (else 0), and whether they do."""
    part = participating(C, guard)
    partners = check_members(C, "match.sync", mask, guard, iid, a)
    V, O = _warp_view(C, a, part, partners)
    eq = (V[:, :, None] == V[:, None, :]) & O[:, None, :]          # (W, 32 me, 32 other)
    words = np.packbits(eq, axis=2, bitorder="little").view("<u4")[:, :, 0].reshape(-1)
    actw = np.packbits(O, axis=1, bitorder="little").view("<u4")[:, 0]
    if C.lanes is not None:
        words = words[C.lanes]
        actw = actw[C.lanes // WARP]
    else:
        actw = np.repeat(actw, WARP)
    m = np.asarray(mask, U32)
    same = words & m
    if mode == "any":
        return same.astype(U32), None
    members = actw & m
    ok = same == members
    return np.where(ok, members, U32(0)).astype(U32), ok


def _reduce(op, V, sel, axis):
    """`op` of the values V where sel is True, along `axis` (V broadcast to sel)."""
    V = np.broadcast_to(V, sel.shape)
    if op == "add":
        return np.where(sel, V.astype(I64), 0).sum(axis=axis).astype(V.dtype)
    if op in ("min", "max"):
        info = np.iinfo(V.dtype)
        fill = V.dtype.type(info.max if op == "min" else info.min)
        return (np.min if op == "min" else np.max)(np.where(sel, V, fill), axis=axis)
    ident = ~V.dtype.type(0) if op == "and" else V.dtype.type(0)
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return fn.reduce(np.where(sel, V, ident), axis=axis)


def redux(C, op, a, mask, guard, iid):
    """redux.sync: each participant gets `op` over the lanes of its own member mask that
    take part (PTX ISA: across all non-exited threads in the membermask; check_members has
    made sure every one of those runs it now, with the same mask)."""
    part = participating(C, guard)
    partners = check_members(C, "redux.sync", mask, guard, iid, a)
    V, O = _warp_view(C, a, part, partners)
    if not isinstance(mask, np.ndarray):        # one mask: one result per warp
        r = _reduce(op, V, O & _in_mask(mask, _LANE32), axis=1)
        return np.repeat(r, WARP) if C.lanes is None else r[C.lanes // WARP]
    M = _mask_view(C, mask)
    sel = O[:, None, :] & _in_mask(M[:, :, None], _LANE32)    # (W, 32 me, 32 member)
    return _per_lane(C, _reduce(op, V[:, None, :], sel, axis=2))


def elect(C, mask, guard, iid):
    """elect.sync (PTX ISA): the leader is the member of the mask with the least laneid
    among the lanes that execute it (predicated on); each participant gets the leader's
    laneid, and True where it is the leader. check_members has made sure every member of
    the mask that has not exited runs it now, each lane in its own mask."""
    partners = check_members(C, "elect.sync", mask, guard, iid, 0)
    part = participating(C, guard)
    words = (_ballot_words(C, part, partners) & np.asarray(mask, U32)).astype(U64)
    lowest = words & (~words + U64(1))                     # the least set bit alone
    leader = np.log2(np.maximum(lowest, U64(1)).astype(np.float64)).astype(U32)   # exact: 2**k
    lane = (current_lanes(C) % WARP).astype(U32)
    return leader, part & (lane == leader)


provide(_shfl=shfl, _vote=vote, _match=match, _redux=redux, _warp_sync=warp_sync)

# --- emitters ------------------------------------------------------------------------------


def _guard_expr(g, ins):
    guard = g.guard(ins)
    return guard, (guard if guard is not None else "None")


def _write_pair(g, ins, d, p, r, guard):
    """Write the (value, predicate) pair `r` that shfl and match return to d and p (if
    the instruction has the |p destination)."""
    g.write(ins, d, f"{r}[0]", "u32", guard)
    if p is not None:
        g.write(ins, p, f"{r}[1]", "pred", guard)


def emit_shfl(g, ins):
    m = Mods(ins)
    if not m.take("sync"):
        raise unsupported(ins, "shfl without .sync (removed for sm_70 and later)")
    mode = m.take("up", "down", "bfly", "idx")
    m.one_type({"b32"})
    m.done()
    if mode is None:
        raise PtxError(ins.line, f"shfl.sync needs .up/.down/.bfly/.idx: {ins.text}")
    d, a, b, c, mask = operands(ins, 5)
    guard, gexpr = _guard_expr(g, ins)
    p = q = None
    if isinstance(d, PredPair):
        d, p = d.p, d.q
    iid = g.ns["_register_instruction"](ins)
    r = g.fresh()
    g.emit(f"{r} = _shfl(C, {mode!r}, {g.read(ins, a, 'u32')}, {g.read(ins, b, 'u32')}, "
           f"{g.read(ins, c, 'u32')}, {g.read(ins, mask, 'u32')}, {gexpr}, {iid})")
    _write_pair(g, ins, d, p, r, guard)
    del q


def emit_vote(g, ins):
    m = Mods(ins)
    if not m.take("sync"):
        raise unsupported(ins, "vote without .sync (removed for sm_70 and later)")
    mode = m.take("all", "any", "uni", "ballot")
    t = m.one_type({"pred", "b32"})
    m.done()
    if mode is None or (mode == "ballot") != (t == "b32"):
        raise PtxError(ins.line, f"vote.sync needs .all/.any/.uni with .pred or .ballot.b32: {ins.text}")
    d, a, mask = operands(ins, 3)
    guard, gexpr = _guard_expr(g, ins)
    iid = g.ns["_register_instruction"](ins)
    expr = f"_vote(C, {mode!r}, {g.read(ins, a, 'pred')}, {g.read(ins, mask, 'u32')}, {gexpr}, {iid})"
    g.write(ins, d, expr, "u32" if t == "b32" else "pred", guard)


def emit_activemask(g, ins):
    m = Mods(ins)
    m.one_type({"b32"})
    m.done()
    (d,) = operands(ins, 1)
    guard, gexpr = _guard_expr(g, ins)
    g.write(ins, d, f"_vote(C, 'activemask', True, 0, {gexpr})", "u32", guard)


def emit_match(g, ins):
    m = Mods(ins)
    mode = m.take("any", "all")
    if not m.take("sync"):
        raise unsupported(ins, "match without .sync")
    t = m.one_type({"b32", "b64"})
    m.done()
    if mode is None:
        raise PtxError(ins.line, f"match.sync needs .any or .all: {ins.text}")
    d, a, mask = operands(ins, 3)
    p = None
    if isinstance(d, PredPair):
        if mode == "any":
            raise PtxError(ins.line, f"match.any has no predicate destination: {ins.text}")
        d, p = d.p, d.q
    guard, gexpr = _guard_expr(g, ins)
    iid = g.ns["_register_instruction"](ins)
    r = g.fresh()
    g.emit(f"{r} = _match(C, {mode!r}, {g.read(ins, a, 'u' + t[1:])}, "
           f"{g.read(ins, mask, 'u32')}, {gexpr}, {iid})")
    _write_pair(g, ins, d, p, r, guard)


def emit_redux(g, ins):
    m = Mods(ins)
    if not m.take("sync"):
        raise unsupported(ins, "redux without .sync")
    op = m.take("add", "min", "max", "and", "or", "xor")
    t = m.one_type({"u32", "s32", "b32"})
    m.done()
    if op is None or (op in ("and", "or", "xor")) != (t == "b32"):
        raise PtxError(ins.line, f"redux.sync needs .add/.min/.max with .u32/.s32 or "
                                 f".and/.or/.xor with .b32: {ins.text}")
    d, a, mask = operands(ins, 3)
    guard, gexpr = _guard_expr(g, ins)
    vt = "u32" if t == "b32" else t
    iid = g.ns["_register_instruction"](ins)
    g.write(ins, d, f"_redux(C, {op!r}, {g.read(ins, a, vt)}, {g.read(ins, mask, 'u32')}, "
                    f"{gexpr}, {iid})", vt, guard)


def emit_nanosleep(g, ins):
    """nanosleep: a hint; every thread of the emulator makes progress anyway."""
    m = Mods(ins)
    m.one_type({"u32"})
    m.done()
    (t,) = operands(ins, 1)
    g.read(ins, t, "u32")
    g.guard(ins)


FAMILY = family("warp", __name__)
for _opcode, _emitter in {"shfl": emit_shfl, "vote": emit_vote, "match": emit_match, "redux": emit_redux}.items():
    FAMILY.declare(_opcode, emit=_emitter, warp_sync=sync_kind)
FAMILY.declare("activemask", emit=emit_activemask)
FAMILY.declare("nanosleep", emit=emit_nanosleep)

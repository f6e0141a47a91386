"""TMA: tensor copies between global memory and shared memory described by a tensor map (sm_90).

    cp.async.bulk.tensor.Nd.shared::cluster.global{.tile}.mbarrier::complete_tx::bytes
        {.multicast::cluster}{.L2::cache_hint}  [dstMem], [tensorMap, {c0..}], [mbar]{, ctaMask}{, policy};
    cp.async.bulk.tensor.Nd.shared::cta.global...                      (PTX 8.6, the CTA's own)
    cp.async.bulk.tensor.Nd.shared::cluster.global.im2col.mbarrier::complete_tx::bytes...
                                   [dstMem], [tensorMap, {c, w, h, d, n}], [mbar], {im2colOffsets}...
    cp.async.bulk.tensor.Nd.global.shared::cta{.tile}.bulk_group{.L2::cache_hint}
                                                [tensorMap, {c0..}], [srcMem]{, policy};
    cp.reduce.async.bulk.tensor.Nd.global.shared::cta.OP{.tile}.bulk_group{.L2::cache_hint}
                                                [tensorMap, {c0..}], [srcMem]{, policy};
        OP: add min max inc dec and or xor, on the map's element type as the ISA lists them
    cp.async.bulk.prefetch.tensor.Nd.L2.global{.tile}{.L2::cache_hint}  [tensorMap, {c0..}]{, policy};
    cp.async.bulk.commit_group;   cp.async.bulk.wait_group{.read} N;

N is 1..5 (.1d ... .5d), the map's rank. The map (isa/tensormap.py's encoding, 64-byte
aligned) is read at a generic address: a __grid_constant__ parameter (cvta.param of its
address, or the address `mov.b64 %rd, param` gives, which nvcc passes as it is), global or
shared memory. Coordinates are signed 32-bit, dimension 0 first.

The box: along dimension i, ceil(boxDim[i] / elementStrides[i]) elements at c[i], c[i] + e[i],
... (dimension 0 takes every element). Elements outside 0..globalDim[i]-1 (negative
coordinates too) are not read: a load fills them with zeros, or with NaN when the map asks
for NAN_REQUEST_ZERO_FMA; a store or reduction skips them. In shared memory the box is dense,
dimension 0 innermost (a box row narrower than the swizzle span is not padded to it: the
emulator's reading; Triton and CUTLASS use rows of the full span), and swizzled: byte b of the box lands at swizzle(dst + b) (swizzle.py,
on the shared address's bits, as the hardware does), so wgmma reads it back with the same mode.
The destination (source) in shared memory is 128-byte aligned (1024 with the 128B swizzle).

A load counts the box's bytes on the mbarrier (complete_tx) and its bytes land when a wait sees
that phase over (bulkcopy.complete_tx, through mbarrier.land_on_completion): a read before the
wait sees the old contents. With
.multicast::cluster the box goes to the same offset in each CTA whose bit is set in the 16-bit
ctaMask, each counted on the mbarrier at the same offset in that CTA. A store or reduction
reads shared memory and writes global memory when it issues (its bulk group completes at
once), so wait_group changes nothing here.

Faults, named with the thread and PTX line: a map that no driver call could have encoded (a
rank or type out of range, ...) or whose rank is not the instruction's, a map not 64-byte
aligned, a misaligned shared address, a box reaching outside the tensor's allocation or the
CTA's shared window, interleaved layouts (not emulated), a map of the other mode (tile/im2col).

im2col loads (N = 3..5, an NWC/NHWC/NDHWC tensor): pixelsPerColumn pixels of channelsPerPixel
channels (the box, channels innermost), read as `im2col_elements` says; this is the emulator's
reading of the ISA's description, which no GPU here has checked. Refused at load: im2col
stores/reductions (.im2col_no_offs), prefetches in im2col mode, and sm_100's modes
(.im2col::w, .tile::gather4/scatter4).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Imm, Instruction, Reg, Sym, TensorAddr, Vec
from . import bulkcopy, tensormap
from .addressing import OFFSET_MASK, PARAM_WINDOW, RANK_SHIFT, address, operands_less_policy
from .operands import needs_target, unsupported
from .paramaddr import parameter_offset
from .registry import provide
from .swizzle import swizzle
from .tmareduce import reduce_elements

_U64 = np.uint64
_DIMS = {"1d": 1, "2d": 2, "3d": 3, "4d": 4, "5d": 5}
_REDUCTIONS = {"add", "min", "max", "inc", "dec", "and", "or", "xor"}
_HINTS = {"L2::cache_hint"}
_COMPLETE = "mbarrier::complete_tx::bytes"


# --- emitters ----------------------------------------------------------------------------

def bulk_form_emitter(form: str):
    """The emitter of cp{.reduce}.async.bulk.{tensor, commit_group, wait_group}...: it is
    called with the modifiers asyncopy.emit_cp has not taken (.async, .bulk, `form`)."""
    def emit(g, ins: Instruction, m) -> None:
        if form == "tensor":
            emit_tensor(g, ins, m, m.take("reduce") is not None)
        elif m.take("reduce"):
            raise unsupported(ins, "cp.reduce.async.bulk form")
        else:
            emit_group(g, ins, m, form)
    return emit


def emit_tensor(g, ins: Instruction, m, reduce: bool) -> None:
    """cp{.reduce}.async.bulk{.prefetch}.tensor..."""
    dim = m.take(*_DIMS)
    if dim is None:
        raise PtxError(ins.line, f"cp.async.bulk.tensor needs a dimension .1d to .5d: {ins.text}")
    if m.take("im2col_no_offs", "im2col::w", "im2col::w::128", "tile::gather4", "tile::scatter4"):
        raise unsupported(ins, "this tensor copy mode is not emulated (tile and im2col loads are)")
    im2col = m.take("im2col") is not None
    if not im2col:
        m.take("tile")
    if im2col and (reduce or "prefetch" in ins.mods):
        raise unsupported(ins, "im2col reductions and prefetches are not emulated (loads are)")
    if im2col and _DIMS[dim] < 3:
        raise PtxError(ins.line, f"im2col copies are .3d to .5d: {ins.text}")
    hint = bool(m.take_all(_HINTS))
    prefetch = m.take("prefetch") is not None
    if prefetch:
        m.take("L2")
        m.take("global")
        m.done()
        ops = operands_less_policy(g, ins, 1) if hint else list(ins.operands)
        if len(ops) != 1:
            raise PtxError(ins.line, f"cp.async.bulk.prefetch.tensor takes [tensorMap, coords]: {ins.text}")
        tmap, coords = _tensor_operand(g, ins, ops[0], _DIMS[dim])
        g.emit(f"_tma_prefetch(C, {tmap}, {coords}, {_DIMS[dim]}, {_iid(g, ins)}, {_guard(g, ins)})")
        return
    dst_space = m.take("shared::cluster", "shared::cta", "global")
    src_space = m.take("global", "shared::cta")
    if dst_space == "global":
        if im2col:
            raise PtxError(ins.line, f"a tensor store in im2col mode is .im2col_no_offs: {ins.text}")
        op = m.take(*_REDUCTIONS) if reduce else None
        if reduce and op is None:
            raise PtxError(ins.line, f"cp.reduce.async.bulk.tensor needs a reduction: {ins.text}")
        _emit_store(g, ins, m, dim, src_space, op, hint)
        return
    if reduce:
        raise PtxError(ins.line, f"cp.reduce.async.bulk.tensor writes .global: {ins.text}")
    _emit_load(g, ins, m, dim, dst_space, src_space, hint, im2col)


def _emit_load(g, ins, m, dim, dst_space, src_space, hint, im2col) -> None:
    if src_space != "global" or dst_space not in ("shared::cluster", "shared::cta"):
        raise PtxError(ins.line, f"cp.async.bulk.tensor loads .global into .shared::cluster: {ins.text}")
    if m.take(_COMPLETE) is None:
        raise PtxError(ins.line, f"a cp.async.bulk.tensor load completes through .{_COMPLETE}: {ins.text}")
    multicast = m.take("multicast::cluster") is not None
    m.done()
    if dst_space == "shared::cta":
        needs_target(g, ins, 90, 86, "cp.async.bulk.tensor into .shared::cta")
    want = 3 + im2col + multicast
    ops = operands_less_policy(g, ins, want) if hint else list(ins.operands)
    if len(ops) != want:
        raise PtxError(ins.line, f"cp.async.bulk.tensor takes [dstMem], [tensorMap, coords], [mbar]"
                                 f"{', im2colOffsets' if im2col else ''}{', ctaMask' if multicast else ''}: "
                                 f"{ins.text}")
    g.ck.uses_shared = True
    space = "shared::cluster" if dst_space == "shared::cluster" else "shared"
    dst, mbar = address(g, ins, ops[0], space), address(g, ins, ops[2], space)
    tmap, coords = _tensor_operand(g, ins, ops[1], _DIMS[dim])
    offsets = _im2col_offsets(g, ins, ops[3], _DIMS[dim]) if im2col else "None"
    mask = _integer(g, ins, ops[-1], "u16") if multicast else "None"
    g.emit(f"_tma_load(C, {dst}, {tmap}, {coords}, {mbar}, {mask}, {_DIMS[dim]}, {_iid(g, ins)}, "
           f"{_guard(g, ins)}, {offsets})")


def _im2col_offsets(g, ins, op, rank: int) -> str:
    """The expression of im2colOffsets' tuple: rank - 2 16-bit offsets, W first."""
    if not isinstance(op, Vec) or len(op.elems) != rank - 2 or any(e is None for e in op.elems):
        raise PtxError(ins.line, f"a .{rank}d im2col load takes {rank - 2} im2colOffsets {{..}}: {ins.text}")
    return "(" + "".join(f"{_integer(g, ins, e, 'u16')}, " for e in op.elems) + ")"


def _emit_store(g, ins, m, dim, src_space, op, hint) -> None:
    if src_space != "shared::cta":
        raise PtxError(ins.line, f"cp.async.bulk.tensor stores .shared::cta into .global: {ins.text}")
    if m.take("bulk_group") is None:
        raise PtxError(ins.line, f"a cp.async.bulk.tensor store completes through .bulk_group: {ins.text}")
    m.done()
    ops = operands_less_policy(g, ins, 2) if hint else list(ins.operands)
    if len(ops) != 2:
        raise PtxError(ins.line, f"cp.async.bulk.tensor takes [tensorMap, coords], [srcMem]: {ins.text}")
    g.ck.uses_shared = True
    tmap, coords = _tensor_operand(g, ins, ops[0], _DIMS[dim])
    src = address(g, ins, ops[1], "shared")
    g.emit(f"_tma_store(C, {tmap}, {coords}, {src}, {op!r}, {_DIMS[dim]}, {_iid(g, ins)}, {_guard(g, ins)})")


def emit_group(g, ins: Instruction, m, form: str) -> None:
    """cp.async.bulk.commit_group / wait_group{.read} N: stores complete at issue here."""
    if form == "wait_group":
        m.take("read")
    m.done()
    want = 1 if form == "wait_group" else 0
    if len(ins.operands) != want:
        raise PtxError(ins.line, f"cp.async.bulk.{form} takes {want} operand(s): {ins.text}")
    if want:
        n = ins.operands[0]
        if not isinstance(n, Imm) or n.is_float or not 0 <= n.value <= 63:
            raise PtxError(ins.line, f"cp.async.bulk.wait_group takes an integer constant 0..63: {ins.text}")
    g.guard(ins)


def _tensor_operand(g, ins, op, rank: int):
    """(expression of the map's generic address, expression of the coordinates' tuple)."""
    if not isinstance(op, TensorAddr):
        raise PtxError(ins.line, f"expected [tensorMap, {{coordinates}}]: {ins.text}")
    if len(op.coords.elems) != rank or any(e is None for e in op.coords.elems):
        raise PtxError(ins.line, f"a .{rank}d tensor copy takes {rank} coordinates: {ins.text}")
    coords = "(" + "".join(f"{_integer(g, ins, e, 's32')}, " for e in op.coords.elems) + ")"
    base = op.base
    if isinstance(base, Sym) and parameter_offset(g.ck, base.name) is not None:
        raise PtxError(ins.line, f"state space mismatch between instruction and address (a parameter's "
                                 f"name; ptxas takes its address in a register): {ins.text}")
    if not isinstance(base, (Reg, Sym)):
        raise PtxError(ins.line, f"the tensor map is a register or a variable: {ins.text}")
    return address(g, ins, Addr(base, op.offset), "generic"), coords


def _integer(g, ins, op, ptype):
    if isinstance(op, Imm) and op.is_float or isinstance(op, Vec):
        raise PtxError(ins.line, f"cp.async.bulk.tensor takes integer operands: {ins.text}")
    return g.read(ins, op, ptype)


def _iid(g, ins) -> int:
    return g.ns["_register_instruction"](ins)


def _guard(g, ins) -> str:
    guard = g.guard(ins)
    return guard if guard is not None else "None"


# --- runtime: the map, the box -------------------------------------------------------------

def _fault(C, code: str, lane: int, iid: int, what: str):
    ins = C.ck.instructions[iid]
    raise KernelFault(code, f"{C.name}: {what} by {C.who_batch(lane)}, PTX line {ins.line}: {ins.text}")


def _issuers(C, guard):
    """(mask over the current lanes of the issuing threads, their batch lane numbers), or None."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return None
    act = np.ones(C.n, bool) if active is None else np.asarray(active, bool)
    return act, C.batch_lanes(active, None)


def _maps(C, tmap, act, lanes, rank, iid, guard, mode=tensormap.TILE) -> list:
    """The decoded map of each issuing thread, read at its generic address."""
    a = np.broadcast_to(np.asarray(tmap, _U64), (C.n,))
    bad = (a[act] % _U64(tensormap.MAP_ALIGN)) != 0
    if bad.any():
        j = int(np.argmax(bad))
        _fault(C, "CUDA_ERROR_MISALIGNED_ADDRESS", int(lanes[j]), iid,
               f"tensor map at {int(a[act][j]):#x}, not {tensormap.MAP_ALIGN}-byte aligned")
    # `mov.b64 %rd, param` gives the parameter's offset, which nvcc passes as the map's
    # address (ptxas takes it): read below 2^32 (no arena address is) as the parameter space
    a = np.where(a < _U64(1 << 32), a + _U64(PARAM_WINDOW), a)
    words = [C.load_space("generic", a + _U64(half), 8, 8, iid, guard) for half in (0, 64)]
    raw = np.concatenate(words, axis=1).astype(_U64)[act]
    out = []
    for j in range(raw.shape[0]):
        try:
            m = tensormap.decode(raw[j].tobytes())
        except ValueError as e:
            _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(lanes[j]), iid, f"an invalid tensor map ({e})")
        if m.rank != rank:
            _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(lanes[j]), iid,
                   f"a tensor map of rank {m.rank} used by a .{rank}d copy")
        if m.interleave:
            _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(lanes[j]), iid, "an interleaved tensor map (not emulated)")
        if m.mode != mode:
            names = {tensormap.TILE: "tile", tensormap.IM2COL: "im2col"}
            _fault(C, "CUDA_ERROR_LAUNCH_FAILED", int(lanes[j]), iid,
                   f"an {names[m.mode]} tensor map used by a copy in {names[mode]} mode")
        out.append(m)
    return out


def _coords(C, coords, act) -> np.ndarray:
    """(issuers, rank) int64 coordinates."""
    cols = [np.broadcast_to(np.asarray(c).astype(np.int32), (C.n,))[act] for c in coords]
    return np.stack(cols, axis=1).astype(np.int64)


def box_elements(m, c):
    """(byte offset in the tensor of each element of the box, in shared-memory order, and
    whether it lies inside the tensor)."""
    offs = np.zeros((1,), np.int64)
    inside = np.ones((1,), bool)
    for i in reversed(range(m.rank)):
        step = 1 if i == 0 else m.element_strides[i]
        x = c[i] + step * np.arange(-(-m.box[i] // step), dtype=np.int64)
        ok = (x >= 0) & (x < m.dims[i])
        offs = (offs[:, None] + x[None, :] * m.strides[i]).reshape(-1)
        inside = (inside[:, None] & ok[None, :]).reshape(-1)
    return offs, inside


def im2col_elements(m, c, offsets):
    """box_elements of an im2col load: pixelsPerColumn pixels, channelsPerPixel channels each
    from channel c[0]. The pixels walk the bounding box (lower .. globalDim - 1 + upper in
    each of W, H, D) from the pixel at c[1:] (W, H, D, N), W fastest, by the element strides,
    wrapping to the lower corner and on to the next image; each is read at its position plus
    the im2colOffsets (the filter tap)."""
    spatial = m.rank - 2
    lo = np.array(m.lower[:spatial], np.int64)
    hi = np.array([m.dims[1 + i] - 1 + m.upper[i] for i in range(spatial)], np.int64)
    step = np.array(m.element_strides[1:1 + spatial], np.int64)
    count = (hi - lo) // step + 1                 # positions per bounding-box row, column, ...
    start = (np.asarray(c[1:1 + spatial], np.int64) - lo) // step
    flat = 0
    for i in reversed(range(spatial)):            # the start's index in the walk, N outermost
        flat = flat * count[i] + start[i]
    flat = flat + int(c[-1]) * int(np.prod(count)) + np.arange(m.pixels, dtype=np.int64)
    pos = []
    for i in range(spatial):
        pos.append(lo[i] + (flat % count[i]) * step[i] + int(offsets[i]))
        flat = flat // count[i]
    image = flat
    chan = c[0] + np.arange(m.channels, dtype=np.int64)
    offs = chan[None, :] * m.strides[0] + image[:, None] * m.strides[m.rank - 1]
    inside = ((chan >= 0) & (chan < m.dims[0]))[None, :] & ((image >= 0) & (image < m.dims[-1]))[:, None]
    for i in range(spatial):
        offs = offs + pos[i][:, None] * m.strides[1 + i]
        inside = inside & ((pos[i] >= 0) & (pos[i] < m.dims[1 + i]))[:, None]
    return offs.reshape(-1), inside.reshape(-1)


def _global_bytes(C, m, offs, inside, lane, iid, kind):
    """Byte indices in the arena of the inside elements' bytes (all in one allocation)."""
    size = m.elem_bytes
    addrs = m.address + offs[inside]
    if addrs.size:
        lo, hi = int(addrs.min()), int(addrs.max()) + size
        hit = C.memory.find(lo)
        if hit is None or hi > hit[0] + hit[1]:
            _fault(C, "CUDA_ERROR_ILLEGAL_ADDRESS", lane, iid,
                   f"out-of-bounds tensor {kind} of global memory {lo:#x}..{hi:#x} (the tensor map's "
                   f"box reaches outside its allocation)")
    return (addrs + C.memory.shift)[:, None] + np.arange(size)


def _fill(m) -> np.ndarray:
    """The bytes of one out-of-bounds element."""
    size = m.elem_bytes
    if m.fill_nan:
        return np.frombuffer((((1 << (8 * size - 1)) - 1)).to_bytes(size, "little"), np.uint8)
    return np.zeros(size, np.uint8)


def _smem_offsets(dst_offset: int, nbytes: int, mode: int) -> np.ndarray:
    """Where byte b of the box lands, relative to the destination's shared offset."""
    return swizzle(np.arange(nbytes, dtype=np.int64) + dst_offset, mode) - dst_offset


def _check_smem(C, a: int, m, lane, iid, what):
    need = 1024 if m.swizzle == 3 else 128
    if (a & OFFSET_MASK) % need:
        _fault(C, "CUDA_ERROR_MISALIGNED_ADDRESS", lane, iid,
               f"tensor copy {what} {a:#x} in shared memory, not {need}-byte aligned")


# --- runtime: the instructions ------------------------------------------------------------

def tma_load(C, dst, tmap, coords, mbar, mask, rank, iid, guard, offsets=None) -> None:
    who = _issuers(C, guard)
    if who is None:
        return
    act, lanes = who
    mode = tensormap.TILE if offsets is None else tensormap.IM2COL
    maps = _maps(C, tmap, act, lanes, rank, iid, guard, mode)
    offs_by_lane = None if offsets is None else _coords(C, offsets, act)
    cs = _coords(C, coords, act)
    d = np.broadcast_to(np.asarray(dst, _U64), (C.n,))
    mb = np.broadcast_to(np.asarray(mbar, _U64), (C.n,))
    masks = None if mask is None else np.broadcast_to(np.asarray(mask, np.uint16), (C.n,))[act]
    for j, lane_index in enumerate(np.flatnonzero(act)):
        m, lane = maps[j], int(lanes[j])
        _check_smem(C, int(d[lane_index]), m, lane, iid, "destination")
        offs, inside = box_elements(m, cs[j]) if offsets is None else \
            im2col_elements(m, cs[j], offs_by_lane[j] & 0xFFFF)
        tile = np.broadcast_to(_fill(m), (offs.size, m.elem_bytes)).copy()
        tile[inside] = C.memory.u8[_global_bytes(C, m, offs, inside, lane, iid, "load")]
        tile = tile.reshape(-1)
        where = _smem_offsets(int(d[lane_index]) & OFFSET_MASK, tile.size, m.swizzle)
        ranks = [None] if masks is None else [r for r in range(16) if int(masks[j]) >> r & 1]
        for rank_to in ranks:
            sel = np.zeros(C.n, bool)
            sel[lane_index] = True
            dr, mr = (_with_rank(x, rank_to) for x in (d, mb))
            n = np.full(C.n, tile.size, _U64)
            bulkcopy.complete_tx(C, dr, mr, n, sel, _write_box(tile, where), iid)


def _with_rank(a, rank):
    if rank is None:
        return a
    return ((a & _U64(OFFSET_MASK)) | (_U64(rank + 1) << _U64(RANK_SHIFT))).astype(_U64)


def _write_box(tile, where):
    def write(C, dst, m):
        for start in np.asarray(dst)[np.asarray(m)]:
            C.smem[int(start) + where] = tile
    return write


def tma_store(C, tmap, coords, src, op, rank, iid, guard) -> None:
    who = _issuers(C, guard)
    if who is None:
        return
    act, lanes = who
    maps = _maps(C, tmap, act, lanes, rank, iid, guard)
    cs = _coords(C, coords, act)
    s = np.broadcast_to(np.asarray(src, _U64), (C.n,))
    for j, lane_index in enumerate(np.flatnonzero(act)):
        m, lane = maps[j], int(lanes[j])
        _check_smem(C, int(s[lane_index]), m, lane, iid, "source")
        offs, inside = box_elements(m, cs[j])
        nbytes = offs.size * m.elem_bytes
        one = np.zeros(C.n, bool)
        one[lane_index] = True
        start = C.window_index("shared", s[one], 16, 1, iid, "load", one, None)
        C.window_index("shared", s[one] + _U64(nbytes - 16), 16, 1, iid, "load", one, None)
        where = _smem_offsets(int(s[lane_index]), nbytes, m.swizzle)
        tile = C.smem[int(start[0]) + where].reshape(offs.size, m.elem_bytes)[inside]
        idx = _global_bytes(C, m, offs, inside, lane, iid, "store")
        if op is None:
            C.memory.u8[idx] = tile
        else:
            C.memory.u8[idx] = reduce_elements(m, op, C.memory.u8[idx], tile, lane, C, iid)


def tma_prefetch(C, tmap, coords, rank, iid, guard) -> None:
    """A prefetch into L2 changes no result: the map is read and checked, nothing else."""
    who = _issuers(C, guard)
    if who is not None:
        _maps(C, tmap, *who, rank, iid, guard)


provide(_tma_load=tma_load, _tma_store=tma_store, _tma_prefetch=tma_prefetch)

__all__ = ["bulk_form_emitter", "emit_tensor", "emit_group", "box_elements", "tma_load", "tma_store", "tma_prefetch"]

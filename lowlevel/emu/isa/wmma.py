"""WMMA, as NVRTC and nvcc emit it for nvcuda::wmma (cvt.rna.tf32.f32, which tf32 code
uses with it, is lowfloat.py's).

    wmma.load.{a,b,c}.sync.aligned.{row,col}.SHAPE{.global,.shared}.TYPE r, [p]{, stride};
    wmma.mma.sync.aligned.{row,col}.{row,col}.SHAPE.DTYPE{.ATYPE.BTYPE}.CTYPE d, a, b, c;
    wmma.store.d.sync.aligned.{row,col}.SHAPE{.global,.shared}.TYPE [p], r{, stride};

    wmma.mma.{xor,and}.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32 d, a, b, c;

Shapes and types: m16n16k16, m32n8k16 and m8n32k16 with f16 (f16 or f32 accumulators),
bf16 (f32) or s8/u8 (s32, .satfinite), m16n16k8 with tf32 (f32), m8n8k4 with f64 (f64,
.rn); the sub-byte ones (sm_75 on, as ptxas -arch=sm_90 takes them): m8n8k32 with s4 or
u4 (s32, .satfinite; A and B of one type), m8n8k128 with b1 (s32; .xor.popc, or .and.popc
from PTX 7.1; no .satfinite). For these A must be .row, B .col and the mma .row.col.

The PTX ISA leaves the fragment layout of wmma unspecified, and code must not depend on
it: a fragment is only for wmma.load, wmma.mma and wmma.store (and elementwise operations
that treat every element alike). This emulator uses the layout of the decomposition into
two mma.m16n8kK that Ampere and Hopper run: A is the m16n8kK A fragment (for f16, eight
registers: the four of mma, then the same four again, as the f16 fragment has 16 elements
for 8 distinct ones); B is the B fragments of columns 0-7, then of columns 8-15 (f16: then
the same again); C and D are the m16n8 accumulators of columns 0-7, then of 8-15 (s8/u8
likewise, with mma's m16n8k16 integer fragments). m8n8k4 f64, m8n8k32 s4/u4 and m8n8k128
b1 use mma's layouts of the same shapes (one register of 8 nibbles or 32 bits for A and
for B: A[g][e*t + j], B[e*t + j][g], two s32 for C: C[g][2t + i], g = lane/4, t = lane%4,
element j of a register in its bits 4j..4j+3 or bit j), and so mma's arithmetic.
m32n8k16 and m8n32k16 are striped: slot j of lane l holds element j*32 + l of the matrix in
row-major order (f16 A and B have 16 slots for fewer elements: slot j holds what slot
j - count holds). The arithmetic is mma's (see mma_shapes.py): exact products, summed in
float64 (int64), rounded once.

Memory: element (i, j) is at p + (i*stride + j)*size for .row, p + (j*stride + i)*size
for .col; stride (in elements) defaults to the matrix's leading dimension. For s4/u4 and
b1 the size is half a byte or a bit: element e of a row (.row A) or column (.col B) is in
byte e*bits/8 at its bit e*bits%8 (nibbles and bits lowest first, as in a register), so a
lane's register is the 32-bit word at p + (g*stride + e*t)*bits/8. As CUDA's
load_matrix_sync and store_matrix_sync require, p must be 256-bit aligned and stride a
multiple of 16 bytes (for s4/u4 32 elements, for b1 128); p and stride must be the same in
every lane of the warp, and the warp must be full and converged (.aligned). Anything else
is a launch fault naming it.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Vec
from . import mma_shapes
from .warpmask import converged
from .addressing import address, take_space
from .operands import Mods, operands, unsupported
from .registry import TENSOR, family, provide

WARP = 32
SHAPES = {"m16n16k16": ("f16", "bf16", "s8", "u8"), "m32n8k16": ("f16", "bf16", "s8", "u8"),
          "m8n32k16": ("f16", "bf16", "s8", "u8"), "m16n16k8": ("tf32",), "m8n8k4": ("f64",),
          "m8n8k32": ("s4", "u4"), "m8n8k128": ("b1",)}
SUB_BYTE = ("s4", "u4", "b1")               # A is .row, B .col, the mma .row.col
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "f32": 4, "s8": 1, "u8": 1, "s32": 4, "f64": 8,
                 "s4": 0.5, "u4": 0.5, "b1": 0.125}         # sub-byte: 4 bits, 1 bit
REG_TYPE = {"f16": "u32", "bf16": "u32", "tf32": "u32", "f32": "f32", "s8": "u32", "u8": "u32",
            "s32": "s32", "f64": "f64", "s4": "u32", "u4": "u32", "b1": "u32"}
ACCUMULATOR = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "s8": ("s32",),
               "u8": ("s32",), "f64": ("f64",), "s4": ("s32",), "u4": ("s32",), "b1": ("s32",)}


def _dims(shape):
    return mma_shapes.dims(shape)


def _matrix_dims(which: str, shape: str):
    m, n, k = _dims(shape)
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]


def _striped(which: str, shape: str, kind: str):
    rows, cols = _matrix_dims(which, shape)
    unique = rows * cols // WARP
    slots = 16 if kind == "f16" and which in ("a", "b") else unique
    flat = (np.arange(slots)[None, :] % unique) * WARP + np.arange(WARP)[:, None]
    return flat // cols, flat % cols


def fragment_positions(which: str, shape: str, kind: str):
    """(row, col) of each element of a lane's fragment, as (32, count) arrays, elements in
    register order (e per register, lowest bits first)."""
    if shape in ("m32n8k16", "m8n32k16"):
        return _striped(which, shape, kind)
    e = mma_shapes.PER_REG.get(kind, 1)
    if shape in ("m8n8k4", "m8n8k32", "m8n8k128"):        # mma's m8n8 layouts, one A/B register
        return {"a": mma_shapes.a_layout(8, e, 1), "b": mma_shapes.b_layout(e, 1)}.get(
            which, mma_shapes.c_layout(8))
    m, n, k = _dims(shape)
    if which == "a":
        rows, cols = mma_shapes.a_layout(16, e, k // (2 * e))
        halves = [(rows, cols)]
    elif which == "b":
        rows, cols = mma_shapes.b_layout(e, k // (4 * e))
        halves = [(rows, cols), (rows, cols + 8)]
    else:
        rows, cols = mma_shapes.c_layout(16)
        halves = [(rows, cols), (rows, cols + 8)]
    rows = np.concatenate([r for r, _ in halves], axis=1)
    cols = np.concatenate([c for _, c in halves], axis=1)
    if kind == "f16" and which in ("a", "b"):      # the f16 fragment holds every element twice
        rows, cols = np.concatenate([rows, rows], axis=1), np.concatenate([cols, cols], axis=1)
    return rows, cols


def per_register(kind: str) -> int:
    return max(1, int(4 // ELEMENT_BYTES[kind]))


def register_count(which: str, shape: str, kind: str) -> int:
    return fragment_positions(which, shape, kind)[0].shape[1] // per_register(kind)


def leading_dimension(which: str, layout: str, shape: str) -> int:
    m, n, k = _dims(shape)
    rows, cols = {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]
    return cols if layout == "row" else rows


def _warp_uniform(C, value, on, what: str, text: str) -> np.ndarray:
    v = np.broadcast_to(np.asarray(value).astype(np.uint64), (C.n,))
    per_warp = v.reshape(-1, WARP)
    differs = (per_warp != per_warp[:, :1]).any(axis=1)
    if on is not None:                      # warps that have exited hold stale registers
        differs &= on.reshape(-1, WARP)[:, 0]
    if differs.any():
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"wmma: {what} must be the same in every lane of a warp ({text})")
    return v


def _element_addresses(C, which, layout, shape, kind, addr, stride, text):
    on = converged(C, f"wmma.{'store' if which == 'd' else 'load'}", text)
    size = ELEMENT_BYTES[kind]
    addr = _warp_uniform(C, addr, on, "the address", text)
    stride = _warp_uniform(C, stride, on, "the stride", text)
    bits = np.uint64(8 * size)
    misaligned = addr % 32 != 0
    odd_stride = (stride * bits) % 128 != 0
    if on is not None:
        misaligned, odd_stride = misaligned & on, odd_stride & on
    if misaligned.any():
        raise KernelFault("CUDA_ERROR_MISALIGNED_ADDRESS",
                          f"wmma: the matrix address {int(addr[np.argmax(misaligned)]):#x} is "
                          f"not 256-bit aligned ({text})")
    if odd_stride.any():
        raise KernelFault("CUDA_ERROR_MISALIGNED_ADDRESS",
                          f"wmma: the stride ({int(stride[np.argmax(odd_stride)])} elements) is not a "
                          f"multiple of 16 bytes ({text})")
    rows, cols = fragment_positions("c" if which == "d" else which, shape, kind)
    lane = np.arange(C.n) % WARP
    r, c = rows[lane].astype(np.uint64), cols[lane].astype(np.uint64)      # (n, count)
    major, minor = (r, c) if layout == "row" else (c, r)
    # sub-byte: the byte of each element (the words loaded hold whole registers of them)
    return addr[:, None] + (major * stride[:, None] + minor) * bits // np.uint64(8)


def wmma_load(C, space, which, layout, shape, kind, addr, stride, iid, text):
    """The registers of the fragment (one array each: uint32, or float32 / int32 / float64
    for f32 / s32 / f64)."""
    addrs = _element_addresses(C, which, layout, shape, kind, addr, stride, text)
    size = ELEMENT_BYTES[kind]
    if kind in SUB_BYTE:        # a register's elements are one aligned word of the row/column
        addrs, size = addrs[:, ::per_register(kind)], 4
    vals = [np.asarray(C.load_space(space, np.ascontiguousarray(addrs[:, i]), size, 1, iid, None))
            for i in range(addrs.shape[1])]
    if kind in ("f32", "s32", "f64"):
        return [v.view({"f32": np.float32, "s32": np.int32, "f64": np.float64}[kind]) for v in vals]
    if kind in SUB_BYTE:
        return [v.astype(np.uint32) for v in vals]
    per = per_register(kind)
    out = []
    for r in range(len(vals) // per):
        word = np.zeros(C.n, np.uint32)
        for j in range(per):
            word |= vals[per * r + j].astype(np.uint32) << np.uint32(8 * size * j)
        out.append(word)
    return out


def wmma_store(C, space, layout, shape, kind, addr, regs, stride, iid, text) -> None:
    addrs = _element_addresses(C, "d", layout, shape, kind, addr, stride, text)
    size = ELEMENT_BYTES[kind]
    if kind in ("f32", "s32", "f64"):
        np_type = {"f32": np.float32, "s32": np.int32, "f64": np.float64}[kind]
        vals = [np.broadcast_to(np.asarray(r, np_type), (C.n,)).view(mma_uint(size)) for r in regs]
    else:
        words = [np.broadcast_to(np.asarray(r, np.uint32), (C.n,)) for r in regs]
        vals = [(w >> np.uint32(16 * h)).astype(np.uint16) for w in words for h in (0, 1)]
    for i, v in enumerate(vals):
        C.store_space(space, np.ascontiguousarray(addrs[:, i]), size, 1, np.ascontiguousarray(v), iid, None)


def mma_uint(size: int):
    return {4: np.uint32, 8: np.uint64}[size]


def _matrices(vals, which, shape, kind, exact):
    """Per-warp matrices (warps, rows, cols) from the lanes' elements (n, slots)."""
    rows, cols = _matrix_dims(which, shape)
    r, c = fragment_positions(which, shape, kind)
    warps = vals.shape[0] // WARP
    out = np.zeros((warps, rows * cols), exact)
    out[:, (r * cols + c).reshape(-1)] = vals.reshape(warps, -1)     # duplicates: the same element
    return out.reshape(warps, rows, cols)


def wmma_mma(C, shape, kinds, a, b, c, opts, text):
    """D = A B + C per warp, by mma's arithmetic; d's registers."""
    converged(C, "wmma.mma", text)
    atype, _, ctype = kinds
    n = C.n
    exact = np.int64 if ctype == "s32" else np.float64
    A = _matrices(mma_shapes.elements(a, atype, n), "a", shape, atype, exact)
    B = _matrices(mma_shapes.elements(b, atype, n), "b", shape, atype, exact)
    Cm = _matrices(mma_shapes.accumulator(c, ctype, n), "c", shape, ctype, exact)
    D = mma_shapes.multiply(A, B, Cm, kinds, opts)
    r, cc = fragment_positions("c", shape, ctype)
    cols = _matrix_dims("c", shape)[1]
    vals = np.take(D.reshape(D.shape[0], -1), (r * cols + cc).reshape(-1), axis=1).reshape(n, -1)
    if ctype == "f16":
        bits = vals.view(np.uint16).astype(np.uint32)
        return [bits[:, 2 * i] | (bits[:, 2 * i + 1] << 16) for i in range(vals.shape[1] // 2)]
    return [np.ascontiguousarray(vals[:, i]) for i in range(vals.shape[1])]


provide(_wmma_load=wmma_load, _wmma_store=wmma_store, _wmma_mma=wmma_mma)


# --- the emitters -----------------------------------------------------------------------

def _shape_and_kind(ins, m: Mods, kinds):
    shape = m.take(*SHAPES)
    kind = m.take(*kinds)
    ok = shape is not None and kind is not None and (
        kind in SHAPES[shape] or any(kind in ACCUMULATOR[t] for t in SHAPES[shape]))
    if not ok:
        raise unsupported(ins, "shape or type (m16n16k16, m32n8k16, m8n32k16 with .f16/.bf16/"
                               ".s8/.u8; m16n16k8 with .tf32; m8n8k4 with .f64; m8n8k32 with "
                               ".s4/.u4; m8n8k128 with .b1)")
    return shape, kind


def _vector(ins, op, n: int, what: str) -> list:
    elems = op.elems if isinstance(op, Vec) else [op]
    if len(elems) != n or any(e is None for e in elems):
        raise PtxError(ins.line, f"wmma {what} takes {n} registers: {ins.text}")
    return elems


def _access(g, ins, store: bool):
    """What load and store share: which matrix, layout, shape, type, space, address, stride."""
    m = Mods(ins)
    m.take("store" if store else "load")
    which = m.take("d") if store else m.take("a", "b", "c")
    form = [which, m.take("sync"), m.take("aligned")]
    layout = m.take("row", "col")
    space = take_space(ins, m, "global", "shared") or "generic"
    shape, kind = _shape_and_kind(ins, m, tuple(ELEMENT_BYTES))
    m.done()
    if None in form or layout is None:
        raise unsupported(ins, "form (wmma.load.{a,b,c} / wmma.store.d .sync.aligned.{row,col})")
    accumulator = which in ("c", "d")
    allowed = {x for t in SHAPES[shape] for x in ACCUMULATOR[t]} if accumulator else \
        set(SHAPES[shape])
    if kind not in allowed:
        raise PtxError(ins.line, f"wmma.{which}.{shape} cannot be .{kind}: {ins.text}")
    if kind in SUB_BYTE and layout != {"a": "row", "b": "col"}[which]:
        raise PtxError(ins.line, f"sub-byte wmma.load.{which} must be "
                                 f".{ {'a': 'row', 'b': 'col'}[which]}: {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated wmma")
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise PtxError(ins.line, f"wmma takes a fragment, an address and an optional stride: {ins.text}")
    addr_op, frag = (ops[0], ops[1]) if store else (ops[1], ops[0])
    if space == "shared":
        g.ck.uses_shared = True
    addr = address(g, ins, addr_op, space)
    stride = g.read(ins, ops[2], "u32") if len(ops) == 3 else \
        g.const(np.uint32(leading_dimension(which, layout, shape)))
    regs = _vector(ins, frag, register_count("c" if store else which, shape, kind), which)
    return which, layout, shape, kind, space, addr, stride, regs


def emit_wmma_load(g, ins):
    which, layout, shape, kind, space, addr, stride, regs = _access(g, ins, store=False)
    iid = g.ns["_register_instruction"](ins)
    tmp = g.fresh()
    g.emit(f"{tmp} = _wmma_load(C, {space!r}, {which!r}, {layout!r}, {shape!r}, {kind!r}, {addr}, "
           f"{stride}, {iid}, {ins.text!r})")
    for i, e in enumerate(regs):
        g.write(ins, e, f"{tmp}[{i}]", REG_TYPE[kind], None)


def emit_wmma_store(g, ins):
    _, layout, shape, kind, space, addr, stride, regs = _access(g, ins, store=True)
    iid = g.ns["_register_instruction"](ins)
    vals = ", ".join(g.read(ins, e, REG_TYPE[kind]) for e in regs)
    g.emit(f"_wmma_store(C, {space!r}, {layout!r}, {shape!r}, {kind!r}, {addr}, [{vals}], "
           f"{stride}, {iid}, {ins.text!r})")


def _mma_types(ins, m: Mods, shape: str):
    """(dtype, atype, ctype) of wmma.mma: .dtype.ctype for f16, else .dtype.atype.btype.ctype."""
    ts = [x for x in m.left if x in REG_TYPE]
    for x in ts:
        m.left.remove(x)
    kinds = SHAPES[shape]
    if len(ts) == 2 and "f16" in kinds and set(ts) <= {"f16", "f32"}:
        if ts[0] != ts[1]:
            raise unsupported(ins, "mixed f16/f32 accumulators")
        return ts[0], "f16", ts[1]
    if len(ts) == 4 and ts[1] == ts[2] and ts[1] in kinds and ts[1] != "f16" \
            and ts[0] == ts[3] and ts[0] in ACCUMULATOR[ts[1]]:
        return ts[0], ts[1], ts[3]
    raise unsupported(ins, f"types for .{shape} (f16: .f16.f16 or .f32.f32; .f32.bf16.bf16.f32, "
                           ".s32.s8.s8.s32, .s32.u8.u8.s32; .f32.tf32.tf32.f32 for m16n16k8; "
                           ".f64.f64.f64.f64 for m8n8k4; .s32.s4.s4.s32, .s32.u4.u4.s32 for m8n8k32; "
                           ".s32.b1.b1.s32 for m8n8k128)")


def _sub_byte_rules(ins, atype: str, layouts, bitop, popc) -> None:
    """b1 takes one of .xor.popc and .and.popc, nothing else does; sub-byte is .row.col."""
    if (atype == "b1") != (bitop is not None and popc is not None) or (popc is None) != (bitop is None):
        raise PtxError(ins.line, f".xor.popc or .and.popc is required by .b1 wmma.mma and "
                                 f"taken by nothing else: {ins.text}")
    if atype in SUB_BYTE and list(layouts) != ["row", "col"]:
        raise PtxError(ins.line, f"sub-byte wmma.mma must be .row.col: {ins.text}")


def emit_wmma_mma(g, ins):
    m = Mods(ins)
    bitop = m.take("xor", "and")        # b1: .xor.popc or .and.popc, before .sync
    popc = m.take("popc")
    form = [m.take("mma"), m.take("sync"), m.take("aligned"), m.take("row", "col"), m.take("row", "col")]
    shape = m.take(*SHAPES)
    if None in form or shape is None:
        raise unsupported(ins, "form (wmma.mma.sync.aligned.{row,col}.{row,col}.SHAPE)")
    satfinite = m.take("satfinite") is not None
    rnd = m.take("rn")                  # f64 only: the default (rz/rm/rp stay refused)
    dtype, atype, ctype = _mma_types(ins, m, shape)
    m.done()
    _sub_byte_rules(ins, atype, form[3:], bitop, popc)
    if satfinite and atype not in ("s8", "u8", "s4", "u4"):
        raise PtxError(ins.line, f".satfinite applies only to s8/u8/s4/u4 wmma: {ins.text}")
    if rnd is not None and atype != "f64":
        raise PtxError(ins.line, f"a rounding modifier applies only to .f64 wmma: {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated wmma")
    d, a, b, c = operands(ins, 4)
    nc = register_count("c", shape, ctype)
    d, c = _vector(ins, d, nc, "d"), _vector(ins, c, nc, "c")
    a = _vector(ins, a, register_count("a", shape, atype), "a")
    b = _vector(ins, b, register_count("b", shape, atype), "b")
    ab = "f64" if atype == "f64" else "u32"
    av = ", ".join(g.read(ins, x, ab) for x in a)
    bv = ", ".join(g.read(ins, x, ab) for x in b)
    cv = ", ".join(g.read(ins, x, REG_TYPE[ctype]) for x in c)
    tmp = g.fresh()
    g.emit(f"{tmp} = _wmma_mma(C, {shape!r}, {(atype, atype, ctype)!r}, [{av}], [{bv}], [{cv}], "
           f"{ {'satfinite': satfinite, 'bitop': bitop}!r}, {ins.text!r})")
    for i, e in enumerate(d):
        g.write(ins, e, f"{tmp}[{i}]", REG_TYPE[dtype], None)


def emit_wmma(g, ins):
    kind = ins.mods[0] if ins.mods else ""
    emitter = {"load": emit_wmma_load, "store": emit_wmma_store, "mma": emit_wmma_mma}.get(kind)
    if emitter is None:
        raise unsupported(ins)
    emitter(g, ins)


FAMILY = family("wmma", __name__)
FAMILY.declare("wmma", emit=emit_wmma, pipe=TENSOR)

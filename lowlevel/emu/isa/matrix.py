"""ldmatrix: a warp loads 8x8 matrices of 16-bit elements from shared memory into the
thread-to-element fragment layout the PTX ISA specifies for mma.

    ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 d, [a];

Lanes 8j .. 8j+7 give the addresses of rows 0..7 of matrix j (each row 16 contiguous
bytes, 16-byte aligned); register j of lane l receives row l/4, columns 2(l%4) and
2(l%4)+1 of matrix j (the lower column in the lower half), or with .trans the same
elements of the transposed matrix. The instruction is warp-collective (.aligned): the
emulator runs it only with every lane of full warps converged, and refuses anything else
with a launch fault naming it.

    mma.sync.aligned.{m16n8k16,m16n8k8}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, c;

with groupID g = lane/4 and t = lane%4: a holds A[g + 8*((i/2)%2)][2t + i%2 + 8*(i/4)]
for its halves i = 0..7 (two per register, lower first; k8: i = 0..3); b holds
B[2t + i%2 + 8*(i/2)][g] for i = 0..3 (k8: 0..1); c and d hold C[g + 8*(i/2)][2t + i%2]
for i = 0..3. The products and their
sum are computed in float64 and rounded once to float32 (a GPU's tensor core keeps less:
results agree within a bound proportionate to K, not bit for bit). Other shapes and
types, stmatrix and movmatrix stay refused by name at load.
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


def _converged(C, what: str, text: str) -> None:
    if C.lanes is not None or C.active is not None or C.n % WARP:
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{what} is warp-collective (.aligned): it needs every lane of "
                          f"full, converged warps here ({text})")


def ldmatrix(C, addrs, count: int, trans: bool, iid: int, text: str):
    """The `count` registers (uint32, one array each) of every lane."""
    _converged(C, "ldmatrix", text)
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


def _halves_f64(reg, kind: str):
    """(low, high) halves of uint32 registers as float64."""
    r = np.asarray(reg, np.uint32)
    out = []
    for bits in (r & 0xFFFF, r >> 16):
        if kind == "f16":
            out.append(bits.astype(np.uint16).view(np.float16).astype(np.float64))
        else:
            out.append((bits << 16).astype(np.uint32).view(np.float32).astype(np.float64))
    return out


def _lanes_of(reg, n: int):
    return np.broadcast_to(np.asarray(reg, np.uint32), (n,))


def mma_m16n8(C, k: int, a_regs, b_regs, c_vals, kind: str, text: str):
    """D = A B + C (m16 n8, k 16 or 8) for every warp; returns the four f32 registers of d.
    For k 8 the a halves i = 0..3 sit where the k 16 ones do, and b has one register."""
    _converged(C, "mma.sync", text)
    warps = C.n // WARP
    g, t = np.arange(WARP) // 4, np.arange(WARP) % 4
    w = np.arange(warps)[:, None]
    A, B, Cm = np.zeros((warps, 16, k)), np.zeros((warps, k, 8)), np.zeros((warps, 16, 8))
    for r, reg in enumerate(a_regs):
        for h, v in enumerate(_halves_f64(_lanes_of(reg, C.n), kind)):
            i = 2 * r + h
            A[w, g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)] = v.reshape(warps, WARP)
    for r, reg in enumerate(b_regs):
        for h, v in enumerate(_halves_f64(_lanes_of(reg, C.n), kind)):
            i = 2 * r + h
            B[w, 2 * t + i % 2 + 8 * (i // 2), g] = v.reshape(warps, WARP)
    for i, v in enumerate(c_vals):
        v = np.broadcast_to(np.asarray(v, np.float32).astype(np.float64), (C.n,))
        Cm[w, g + 8 * (i // 2), 2 * t + i % 2] = v.reshape(warps, WARP)
    with np.errstate(all="ignore"):
        D = (A @ B + Cm).astype(np.float32)
    return [D[w, g + 8 * (i // 2), 2 * t + i % 2].reshape(C.n) for i in range(4)]


provide(_ldmatrix=ldmatrix, _mma_m16n8=mma_m16n8)


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


def _regs(ins, op, n: int, what: str) -> list:
    elems = op.elems if isinstance(op, Vec) else [op]
    if len(elems) != n or any(e is None for e in elems):
        raise PtxError(ins.line, f"mma {what} takes {n} registers: {ins.text}")
    return elems


def emit_mma(g, ins):
    m = Mods(ins)
    shape = m.take("m16n8k16", "m16n8k8")
    form = [m.take("sync"), m.take("aligned"), shape, m.take("row"), m.take("col")]
    ts = m.types()
    m.done()
    kinds = ts[1:3]
    if None in form or len(ts) != 4 or ts[0] != "f32" or ts[3] != "f32" \
            or kinds[0] != kinds[1] or kinds[0] not in ("f16", "bf16"):
        raise unsupported(ins, "shape or types (only .m16n8k16/.m16n8k8.row.col "
                               ".f32.f16.f16.f32 and .f32.bf16.bf16.f32)")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated mma")
    d, a, b, c = operands(ins, 4)
    k = 16 if shape == "m16n8k16" else 8
    d, c = _regs(ins, d, 4, "d"), _regs(ins, c, 4, "c")
    a, b = _regs(ins, a, k // 4, "a"), _regs(ins, b, k // 8, "b")
    av = ", ".join(g.read(ins, x, "u32") for x in a)
    bv = ", ".join(g.read(ins, x, "u32") for x in b)
    cv = ", ".join(g.read(ins, x, "f32") for x in c)
    tmp = g.fresh()
    g.emit(f"{tmp} = _mma_m16n8(C, {k}, [{av}], [{bv}], [{cv}], {kinds[0]!r}, {ins.text!r})")
    for i, e in enumerate(d):
        g.write(ins, e, f"{tmp}[{i}]", "f32", None)


register(emit_ldmatrix, "ldmatrix")
register(emit_mma, "mma")

"""ldmatrix: a warp loads 8x8 matrices of 16-bit elements from shared memory into the
thread-to-element fragment layout the PTX ISA specifies for mma.

    ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}{.shared{::cta}}.b16 d, [a];

Lanes 8j .. 8j+7 give the addresses of rows 0..7 of matrix j (each row 16 contiguous
bytes, 16-byte aligned); register j of lane l receives row l/4, columns 2(l%4) and
2(l%4)+1 of matrix j (the lower column in the lower half), or with .trans the same
elements of the transposed matrix. The instruction is warp-collective (.aligned): the
emulator runs it only with every lane of full warps converged, and refuses anything else
with a launch fault naming it.

    mma.sync.aligned.SHAPE.row.col{.satfinite}.DTYPE.ATYPE.BTYPE.CTYPE{.xor/.and.popc} d, a, b, c;

every shape and type of the PTX ISA up to sm_90: the table, the fragment layouts and how
the sums are rounded are in mma_shapes.py; m8n8k4 with .f16 (four quad-pair products per
warp, A and B in either layout) in mma_quadpair.py. The f64 m16n8 shapes need .target
sm_90, the 8-bit floats (e4m3, e5m2) sm_89.

    mma.sp{::ordered_metadata}.sync.aligned.SHAPE.row.col{.satfinite}.DTYPE.ATYPE.BTYPE.CTYPE d, a, b, c, e, f;

a structured-sparse A: its forms, metadata and arithmetic are in mma_sparse.py. stmatrix and
movmatrix: matrix_store.py.
"""
from __future__ import annotations

import numpy as np

from .warpmask import converged
from ..ptx.errors import PtxError
from ..ptx.ir import Imm, Reg, Vec
from . import mma_quadpair, mma_shapes
from .addressing import address, take_space
from .operands import Mods, needs_target, operands, unsupported
from . import mma_sparse
from .registry import ANY, SPARSE, TENSOR, family, provide

WARP = 32


def ldmatrix(C, addrs, count: int, trans: bool, iid: int, text: str):
    """The `count` registers (uint32, one array each) of every lane."""
    converged(C, "ldmatrix", text)
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


def mma(C, shape, kinds, a_regs, b_regs, c_regs, opts, text):
    """D = A B + C for every warp (see mma_shapes); the registers of d."""
    converged(C, "mma.sync", text)
    return mma_shapes.mma(C.n, shape, kinds, a_regs, b_regs, c_regs, opts)


def mma_m8n8k4(C, layouts, kinds, a_regs, b_regs, c_regs, text):
    """mma.m8n8k4 with .f16: D = A B + C for every quad-pair (see mma_quadpair)."""
    converged(C, "mma.sync", text)
    return mma_quadpair.mma(C.n, layouts, kinds, a_regs, b_regs, c_regs)


provide(_ldmatrix=ldmatrix, _mma=mma, _mma_m8n8k4=mma_m8n8k4)


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


MMA_TYPES = set(mma_shapes.PER_REG) | {"f32", "s32"}
REG_TYPE = {"f32": "f32", "f64": "f64", "s32": "s32", "f16": "u32"}   # how c/d registers are read


def _mma_types(ins, m: Mods) -> list[str]:
    """The dtype, atype, btype and ctype, in order (Mods.types knows no tf32, s4, b1)."""
    got = [x for x in m.left if x in MMA_TYPES]
    for x in got:
        m.left.remove(x)
    if len(got) != 4:
        raise unsupported(ins, "types (.dtype.atype.btype.ctype of f16, bf16, tf32, f64, s8, u8, "
                               "s4, u4, b1, e4m3, e5m2)")
    return got


def _check_types(ins, shape: str, ts: list[str], bitop) -> None:
    """Refuse a type combination the PTX ISA does not list for `shape`."""
    dtype, atype, btype, ctype = ts
    fam = mma_shapes.FAMILY[atype]
    if fam not in mma_shapes.SHAPES[shape] or mma_shapes.FAMILY[btype] != fam:
        raise unsupported(ins, f"types .{atype}.{btype} for .{shape}")
    want = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f64": ("f64",),
            "f8": ("f32", "f16")}.get(fam, ("s32",))
    if (shape, fam, dtype, ctype) == ("m8n8k4", "f16", "f32", "f16"):
        pass                    # the one mixed form ptxas takes (f16 C, f32 D)
    elif dtype != ctype or dtype not in want:
        raise PtxError(ins.line, f"mma .{shape}.{atype}: .dtype and .ctype must be the same, "
                                 f"one of {', '.join('.' + w for w in want)} (m8n8k4 .f16 also "
                                 f"takes .f32 with an .f16 C): {ins.text}")
    if (fam == "b1") != (bitop is not None):
        raise PtxError(ins.line, "mma with .b1 takes .xor.popc or .and.popc (and only .b1 "
                                 f"does): {ins.text}")


def _check_f8(g, ins, shape: str, ctype: str) -> None:
    """ptxas's rules for the 8-bit floats: sm_89, PTX 8.4; PTX 8.7 for m16n8k16 or an f16 C."""
    k = g.ck.kernel
    if k.binary_version < 89:
        raise PtxError(ins.line, f"mma with the 8-bit floats (.e4m3, .e5m2) requires .target sm_89 "
                                 f"or higher (target sm_{k.binary_version}): {ins.text}")
    need = 87 if shape == "m16n8k16" or ctype == "f16" else 84
    if k.ptx_version < need:
        raise PtxError(ins.line, f"mma .{shape} with .{ctype} and the 8-bit floats requires PTX ISA "
                                 f".version {need // 10}.{need % 10} or later: {ins.text}")


def _layouts(ins, m: Mods, shape: str) -> tuple[str, str]:
    """.alayout.blayout: .row.col, or either of each for m8n8k4 with .f16."""
    got = [x for x in m.left if x in ("row", "col")]
    for x in got:
        m.left.remove(x)
    quadpair = shape == "m8n8k4" and "f16" in m.left
    if len(got) != 2 or (not quadpair and got != ["row", "col"]):
        raise unsupported(ins, "layout (.row.col; m8n8k4 with .f16 takes .row or .col for "
                               "each of A and B)")
    return got[0], got[1]


def _emit_m8n8k4_f16(g, ins, layouts, ts):
    dtype, _, _, ctype = ts
    d, a, b, c = operands(ins, 4)
    d = _regs(ins, d, 4 if dtype == "f16" else 8, "d")
    c = _regs(ins, c, 4 if ctype == "f16" else 8, "c")
    a, b = _regs(ins, a, 2, "a"), _regs(ins, b, 2, "b")
    av = ", ".join(g.read(ins, x, "u32") for x in a)
    bv = ", ".join(g.read(ins, x, "u32") for x in b)
    cv = ", ".join(g.read(ins, x, REG_TYPE[ctype]) for x in c)
    tmp = g.fresh()
    g.emit(f"{tmp} = _mma_m8n8k4(C, {layouts!r}, {(dtype, ctype)!r}, [{av}], [{bv}], [{cv}], "
           f"{ins.text!r})")
    for i, e in enumerate(d):
        g.write(ins, e, f"{tmp}[{i}]", REG_TYPE[dtype], None)


def emit_mma(g, ins):
    m = Mods(ins)
    shape = m.take(*mma_shapes.SHAPES)
    form = [m.take("sync"), m.take("aligned")]
    if shape is None or None in form:
        raise unsupported(ins, "shape (only the .sync.aligned shapes of the PTX ISA)")
    layouts = _layouts(ins, m, shape)
    satfinite = m.take("satfinite") is not None
    rnd = m.take("rn")                  # f64 only: the default (rz/rm/rp stay refused)
    bitop = m.take("xor", "and")
    popc = m.take("popc")
    ts = _mma_types(ins, m)
    m.done()
    _check_types(ins, shape, ts, bitop)
    if bitop is not None and popc is None:
        raise PtxError(ins.line, f"mma .{bitop} needs .popc: {ins.text}")
    fam = mma_shapes.FAMILY[ts[1]]
    if satfinite and fam not in ("i8", "i4"):
        raise PtxError(ins.line, f".satfinite applies only to integer mma: {ins.text}")
    if rnd is not None and fam != "f64":
        raise PtxError(ins.line, f"a rounding modifier applies only to .f64 mma: {ins.text}")
    if fam == "f8":
        _check_f8(g, ins, shape, ts[3])
    if (shape, fam) in mma_shapes.SM90 and g.ck.kernel.binary_version < 90:
        raise PtxError(ins.line, f"mma.{shape} with .f64 requires sm_90 or later "
                                 f"(target sm_{g.ck.kernel.binary_version}): {ins.text}")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated mma")
    if shape == "m8n8k4" and fam == "f16":
        _emit_m8n8k4_f16(g, ins, layouts, ts)
        return
    dtype, atype, btype, ctype = ts
    na, nb, nc = mma_shapes.register_counts(shape, atype, ctype)
    d, a, b, c = operands(ins, 4)
    d, c = _regs(ins, d, nc, "d"), _regs(ins, c, nc, "c")
    a, b = _regs(ins, a, na, "a"), _regs(ins, b, nb, "b")
    ab = "f64" if fam == "f64" else "u32"
    av = ", ".join(g.read(ins, x, ab) for x in a)
    bv = ", ".join(g.read(ins, x, ab) for x in b)
    cv = ", ".join(g.read(ins, x, REG_TYPE[ctype]) for x in c)
    opts = {"satfinite": satfinite, "bitop": bitop}
    tmp = g.fresh()
    g.emit(f"{tmp} = _mma(C, {shape!r}, {(atype, btype, ctype)!r}, [{av}], [{bv}], [{cv}], "
           f"{opts!r}, {ins.text!r})")
    for i, e in enumerate(d):
        g.write(ins, e, f"{tmp}[{i}]", REG_TYPE[dtype], None)


# --- mma.sp: a structured-sparse A (mma_sparse.py: its forms, metadata and arithmetic) -----

def _sparse_regs(ins, op, n: int, what: str) -> list:
    elems = op.elems if isinstance(op, Vec) else [op]
    if len(elems) != n or any(e is None for e in elems):
        raise PtxError(ins.line, f"mma.sp {what} takes {n} registers: {ins.text}")
    return elems


def _sparse_types(ins, m: Mods) -> list[str]:
    got = [x for x in m.left if x in mma_shapes.PER_REG or x in ("f32", "s32")]
    for x in got:
        m.left.remove(x)
    if len(got) != 4:
        raise unsupported(ins, "types (.dtype.atype.btype.ctype)")
    return got


def _check_sparse(g, ins, shape, ts, satfinite: bool, ordered: bool) -> str:
    dtype, atype, btype, ctype = ts
    family = mma_shapes.FAMILY.get(atype)
    if (shape, family) not in mma_sparse.FORMS or mma_shapes.FAMILY.get(btype) != family:
        raise unsupported(ins, f"types .{atype}.{btype} for mma.sp .{shape}")
    if dtype != ctype or ctype not in mma_sparse.ACCUMULATORS[family]:
        raise PtxError(ins.line, f"mma.sp .{shape}.{atype}: .dtype and .ctype must be the same, one "
                                 f"of {', '.join('.' + t for t in mma_sparse.ACCUMULATORS[family])}: {ins.text}")
    if satfinite and family not in ("i8", "i4"):
        raise PtxError(ins.line, f".satfinite applies only to integer mma.sp: {ins.text}")
    if family == "f8":
        needs_target(g, ins, 89, 84, "mma.sp with the 8-bit floats (.e4m3, .e5m2)")
    else:
        needs_target(g, ins, 80, 71, "mma.sp")
    if ordered:
        needs_target(g, ins, 80, 85, "mma.sp::ordered_metadata")
    return family


def _sparse_selector(ins, f, shape: str, family: str) -> int:
    if not isinstance(f, Imm) or f.is_float:
        raise PtxError(ins.line, f"mma.sp: the sparsity selector must be an integer constant: {ins.text}")
    count = 4 // mma_sparse.FORMS[(shape, family)]
    lax = (shape, family) == ("m16n8k32", "f16")          # ptxas takes 0..3 here
    if not 0 <= f.value < (4 if lax else count):
        raise PtxError(ins.line, f"mma.sp .{shape} with .{family}: the sparsity selector {f.value} "
                                 f"is out of range [0..{count - 1}]: {ins.text}")
    if f.value >= count:        # the ISA: thread pair 0 (threads 0, 1) or 1 (threads 2, 3)
        raise unsupported(ins, f"sparsity selector {f.value} for .m16n8k32 .f16 (the PTX ISA "
                               "allows 0 or 1; the result is undefined)")
    return int(f.value)


def emit_mma_sp(g, ins):
    m = Mods(ins)
    kind = m.take("sp", "sp::ordered_metadata")
    shape = m.take(*{s for s, _ in mma_sparse.FORMS})
    form = [m.take("sync"), m.take("aligned"), m.take("row"), m.take("col")]
    if kind is None or shape is None or None in form:
        raise unsupported(ins, "form (mma.sp{::ordered_metadata}.sync.aligned.SHAPE.row.col, the "
                               "shapes of the PTX ISA)")
    satfinite = m.take("satfinite") is not None
    ts = _sparse_types(ins, m)
    m.done()
    family = _check_sparse(g, ins, shape, ts, satfinite, kind != "sp")
    if ins.guard is not None:
        raise unsupported(ins, "a predicated mma.sp")
    d, a, b, c, e, f = operands(ins, 6)
    selector = _sparse_selector(ins, f, shape, family)
    dtype, atype, btype, ctype = ts
    k = mma_shapes.dims(shape)[2]
    nab = k // (4 * mma_shapes.PER_REG[atype])
    nc = 2 if ctype == "f16" else 4
    d, c = _sparse_regs(ins, d, nc, "d"), _sparse_regs(ins, c, nc, "c")
    a, b = _sparse_regs(ins, a, nab, "a"), _sparse_regs(ins, b, nab, "b")
    if not isinstance(e, Reg):
        raise PtxError(ins.line, f"mma.sp: the metadata must be a .b32 register: {ins.text}")
    av = ", ".join(g.read(ins, x, "u32") for x in a)
    bv = ", ".join(g.read(ins, x, "u32") for x in b)
    cv = ", ".join(g.read(ins, x, mma_sparse.REG_TYPE[ctype]) for x in c)
    opts = {"satfinite": satfinite, "ordered": kind != "sp"}
    tmp = g.fresh()
    g.emit(f"{tmp} = _mma_sp(C, {shape!r}, {(atype, btype, ctype)!r}, [{av}], [{bv}], [{cv}], "
           f"{g.read(ins, e, 'u32')}, {selector}, {opts!r}, {ins.text!r})")
    for i, x in enumerate(d):
        g.write(ins, x, f"{tmp}[{i}]", mma_sparse.REG_TYPE[dtype], None)


FAMILY = family("matrix", __name__)
FAMILY.declare("ldmatrix", emit=emit_ldmatrix)
FAMILY.declare("mma", emit={ANY: emit_mma, SPARSE: emit_mma_sp}, pipe=TENSOR)

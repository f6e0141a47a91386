"""wgmma: Hopper's warpgroup matrix multiply-accumulate (sm_90a, PTX ISA 8.0).

    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64nNkK.DTYPE.ATYPE.BTYPE  d, a-desc|a, b-desc, scale-d
                                                            {, imm-scale-a, imm-scale-b
                                                            {, imm-trans-a}, imm-trans-b};
    wgmma.mma_async.sync.aligned.m64nNk32{.satfinite}.s32.{s8,u8}.{s8,u8}  d, a, b-desc, scale-d;
    wgmma.mma_async.sync.aligned.m64nNk256.s32.b1.b1.and.popc  d, a, b-desc, scale-d;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned N;

D (64 x N) = A (64 x K) * B (K x N) + (scale-d ? D : 0), one product per warpgroup. Shapes,
types, the register fragments of A and D and the arithmetic: wgmma_shapes.py. A comes from
four registers per thread or from a shared-memory matrix descriptor, B from a descriptor:
wgmma_desc.py (the 64-bit format, the canonical layouts, the swizzles). The asynchronous
rules (groups, waits, wgmma.fence) and the warpgroup-collective rule: wgmma_async.py.

Operands, as ptxas 13 takes them (PTX ISA, wgmma.mma_async, "Syntax"): scale-d is a
predicate or an integer constant 0/1; imm-scale-a/b are 1 or -1 (.f16, .bf16, .tf32 and
the 8-bit floats only); imm-trans-a/b are 0 (K-major) or 1 (MN-major) for .f16/.bf16 only,
and imm-trans-a only with A from a descriptor. Accumulators are 32-bit registers (.f16
and .s32 ones not .f32); descriptors 64-bit registers. Everything needs .target sm_90a:
ptxas refuses wgmma for sm_90, and so does the emulator.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, Reg, Vec
from . import wgmma_async, wgmma_shapes as shapes
from .operands import Mods, needs_target, operands, unsupported
from .registry import TENSOR, family, provide
from .wgmma_desc import read_matrix, uniform

TYPE_NAMES = set(shapes.AB_TYPES) | {"f32", "s32"}
READ_AS = {"f32": "f32", "f16": "u32", "s32": "s32"}      # how d registers are read and written


def _need_sm90a(g, ins) -> None:
    k = g.ck.kernel
    if k.target != "sm_90a":
        raise PtxError(ins.line, f"instruction 'wgmma.{ins.mods[0] if ins.mods else ''}' is not "
                                 f"supported on .target '{k.target or k.binary_version}' (wgmma "
                                 f"needs sm_90a): {ins.text}")
    needs_target(g, ins, 90, 80, "wgmma")


def emit_wgmma(g, ins) -> None:
    m = Mods(ins)
    kind = m.take("fence", "commit_group", "wait_group", "mma_async")
    if kind is None or m.take("sync") is None:
        raise unsupported(ins, "form (fence, commit_group, wait_group or mma_async, with .sync)")
    m.take("aligned")
    _need_sm90a(g, ins)
    if kind == "mma_async":
        _emit_mma(g, ins, m)
        return
    m.done()
    iid = g.ns["_register_instruction"](ins)
    guard = g.guard(ins)
    guard = guard if guard is not None else "None"
    if kind == "wait_group":
        (n,) = operands(ins, 1)
        if not isinstance(n, Imm) or n.is_float or n.value < 0:
            raise PtxError(ins.line, f"wgmma.wait_group takes a non-negative integer constant: "
                                     f"{ins.text}")
        g.emit(f"_wgmma_wait(C, {int(n.value)}, {guard}, {iid})")
        return
    operands(ins, 0)
    g.emit(f"_wgmma_{'fence' if kind == 'fence' else 'commit'}(C, {guard}, {iid})")


def _types(ins, m: Mods) -> tuple[str, str, str]:
    got = [x for x in m.left if x in TYPE_NAMES]
    for x in got:
        m.left.remove(x)
    if len(got) != 3 or got[1] not in shapes.AB_TYPES or got[2] not in shapes.AB_TYPES:
        raise unsupported(ins, "types (.dtype.atype.btype: f16, bf16, tf32, e4m3, e5m2, s8, u8, b1)")
    return got[0], got[1], got[2]


def _check_form(g, ins, shape, ts, satfinite: bool, bitop) -> None:
    """Refuse what ptxas refuses: the type combinations, shapes and modifiers."""
    dtype, atype, btype = ts
    fam = shapes.FAMILY[atype]
    if shapes.FAMILY[btype] != fam or (fam == "half" and atype != btype) \
            or dtype not in shapes.D_TYPES[atype]:
        raise PtxError(ins.line, f"unexpected types .{dtype}.{atype}.{btype} for wgmma.mma_async: "
                                 f"{ins.text}")
    _, n, k = shape
    if k != shapes.K_OF[atype] or n not in shapes.valid_ns(atype):
        raise PtxError(ins.line, f"illegal shape .m64n{n}k{k} for wgmma.mma_async with .{atype}: "
                                 f"{ins.text}")
    if satfinite and fam != "int":
        raise PtxError(ins.line, f".satfinite applies only to integer wgmma.mma_async: {ins.text}")
    if (fam == "b1") != (bitop is not None):
        raise PtxError(ins.line, f"wgmma.mma_async with .b1 takes .and.popc (and only .b1 does): "
                                 f"{ins.text}")
    if fam == "int" and atype != btype:
        needs_target(g, ins, 90, 84, "wgmma.mma_async with mixed integer types")


def _registers(g, ins, op, count: int, what: str, sizes=(4,), floats_ok=True) -> list:
    elems = op.elems if isinstance(op, Vec) else None
    if elems is None or len(elems) != count or not all(isinstance(e, Reg) for e in elems):
        raise PtxError(ins.line, f"wgmma.mma_async {what} takes a vector of {count} registers: "
                                 f"{ins.text}")
    for e in elems:
        rtype = g.reg_type(e)
        size, kind = TYPES.get(rtype, (0, "pred"))
        if size not in sizes or kind == "pred" or (kind == "f" and not floats_ok):
            raise PtxError(ins.line, f"wgmma.mma_async {what}: {e.name} is .{rtype}: {ins.text}")
    return elems


def _descriptor(g, ins, op, what: str) -> str:
    if not isinstance(op, Reg) or TYPES.get(g.reg_type(op), (0,))[0] != 8 \
            or g.reg_type(op) == "f64":
        raise PtxError(ins.line, f"wgmma.mma_async {what} descriptor must be a 64-bit register: "
                                 f"{ins.text}")
    return g.read(ins, op, "u64")


def _immediates(ins, ops, fam: str, a_in_registers: bool):
    """(scale_a, scale_b, trans_a, trans_b) from the trailing immediates."""
    names = {"half": ["imm-scale-a", "imm-scale-b", "imm-trans-a", "imm-trans-b"],
             "tf32": ["imm-scale-a", "imm-scale-b"], "f8": ["imm-scale-a", "imm-scale-b"]}.get(fam, [])
    if fam == "half" and a_in_registers:
        names.remove("imm-trans-a")
    if len(ops) != len(names):
        raise PtxError(ins.line, f"wgmma.mma_async .{fam} with A from "
                                 f"{'registers' if a_in_registers else 'a descriptor'} takes "
                                 f"d, a, b-desc, scale-d{''.join(', ' + x for x in names)}: {ins.text}")
    got = {"imm-scale-a": 1, "imm-scale-b": 1, "imm-trans-a": 0, "imm-trans-b": 0}
    for name, op in zip(names, ops):
        allowed = (1, -1) if "scale" in name else (0, 1)
        if not isinstance(op, Imm) or op.is_float or op.value not in allowed:
            raise PtxError(ins.line, f"wgmma.mma_async {name} must be the constant "
                                     f"{' or '.join(map(str, allowed))}: {ins.text}")
        got[name] = int(op.value)
    return got["imm-scale-a"], got["imm-scale-b"], bool(got["imm-trans-a"]), bool(got["imm-trans-b"])


def _scale_d(g, ins, op) -> str:
    if isinstance(op, Imm) and not op.is_float and op.value in (0, 1):
        return "True" if op.value else "False"
    if isinstance(op, Reg) and g.reg_type(op) == "pred":
        return g.read(ins, op, "pred")
    raise PtxError(ins.line, f"wgmma.mma_async scale-d must be a predicate or 0/1: {ins.text}")


def _emit_mma(g, ins, m: Mods) -> None:
    shape = next((shapes.shape_of(x) for x in m.left if shapes.shape_of(x)), None)
    if shape is None:
        raise PtxError(ins.line, f"wgmma.mma_async needs a shape .m64nNkK: {ins.text}")
    m.left.remove(f"m64n{shape[1]}k{shape[2]}")
    satfinite = m.take("satfinite") is not None
    bitop = m.take("and")
    if bitop is not None and m.take("popc") is None:
        raise PtxError(ins.line, f"wgmma.mma_async .and needs .popc: {ins.text}")
    ts = _types(ins, m)
    m.done()
    _check_form(g, ins, shape, ts, satfinite, bitop)
    dtype, atype, btype = ts
    _, n, k = shape
    ops = ins.operands
    if len(ops) < 4:
        raise PtxError(ins.line, f"wgmma.mma_async takes d, a, b-desc, scale-d ...: {ins.text}")
    fam = shapes.FAMILY[atype]
    a_in_registers = isinstance(ops[1], Vec)
    scale_a, scale_b, trans_a, trans_b = _immediates(ins, ops[4:], fam, a_in_registers)
    d = _registers(g, ins, ops[0], shapes.d_register_count(n, dtype), "d",
                   floats_ok=dtype == "f32")
    table = wgmma_async.tracked(g)
    d_idx = tuple(table[e.name] for e in d)
    if a_in_registers:
        a = _registers(g, ins, ops[1], shapes.A_REGISTERS, "a", floats_ok=atype == "tf32")
        a_idx = tuple(table[e.name] for e in a)
        a_expr = "[" + ", ".join(g.read(ins, e, "u32") for e in a) + "]"
    else:
        a_idx, a_expr = (), _descriptor(g, ins, ops[1], "A")
    b_expr = _descriptor(g, ins, ops[2], "B")
    spec = (n, k, dtype, atype, btype, a_in_registers, trans_a, trans_b, scale_a, scale_b,
            satfinite, d_idx, a_idx)
    g.ck.uses_shared = True
    iid = g.ns["_register_instruction"](ins)
    guard = g.guard(ins)
    dv = ", ".join(g.read(ins, e, READ_AS[dtype]) for e in d)
    tmp = g.fresh()
    g.emit(f"{tmp} = _wgmma_mma(C, {g.const(spec)}, [{dv}], {a_expr}, {b_expr}, "
           f"{_scale_d(g, ins, ops[3])}, {guard if guard is not None else 'None'}, {iid})")
    for i, e in enumerate(d):
        g.write(ins, e, f"{tmp}[{i}]", READ_AS[dtype], None)


def mma(C, spec, d_vals, a, b_desc, scale_d, guard, iid: int):
    """One wgmma.mma_async of the current lanes: the new d registers (whole arrays over the
    current lanes; lanes that do not execute it keep theirs)."""
    n, k, dtype, atype, btype, a_regs, trans_a, trans_b, scale_a, scale_b, sat, d_idx, a_idx = spec
    cur, lanes = wgmma_async.warpgroups(C, guard, "wgmma.mma_async", iid)
    wgmma_async.issue(C, lanes, d_idx, a_idx, ("d", n, dtype, atype, btype), iid)
    out = [np.array(np.broadcast_to(v, (C.n,))) for v in d_vals]
    if cur.size == 0:
        return out
    groups = cur.size // shapes.WARPGROUP

    def per_lane(v):
        return np.broadcast_to(v, (C.n,))[cur]

    def per_group(v, what):
        return uniform(C, per_lane(v).reshape(groups, shapes.WARPGROUP), what, iid)

    first = lanes[::shapes.WARPGROUP]                 # each warpgroup's first thread
    reads: list = []
    if a_regs:
        A = shapes.a_from_registers([per_lane(v) for v in a], atype, k, dtype)
    else:
        A = read_matrix(C, per_group(a, "the A matrix descriptor"), first, shapes.ROWS, atype,
                        trans_a, "A", iid, reads)
    B = read_matrix(C, per_group(b_desc, "the B matrix descriptor"), first, n, btype, trans_b,
                    "B", iid, reads).transpose(0, 2, 1)
    wgmma_async.pending_reads(C, first, reads, iid)
    Cm = shapes.d_matrix([per_lane(v) for v in d_vals], dtype, n)
    D = shapes.multiply_accumulate(A, B, Cm, (atype, btype, dtype), per_group(scale_d, "scale-d"),
                                   scale_a, scale_b, sat)
    for o, r in zip(out, shapes.d_registers(D, dtype)):
        o[cur] = r
    return out


provide(_wgmma_mma=mma)
# the family: wgmma_async.py is its part (the per-launch state, and the check the decoder
# puts in front of other instructions); TENSOR: the time model counts 2mnk FLOPs per warpgroup
FAMILY = family("wgmma", __name__, state=wgmma_async.WarpgroupState, parts=("wgmma_async",),
                hooks={"before_emit": wgmma_async.watch_registers})
FAMILY.declare("wgmma", emit=emit_wgmma, pipe=TENSOR)

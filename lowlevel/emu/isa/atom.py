"""Atomics: atom and red, every form.

    atom/red     .add .min .max .inc .dec .and .or .xor .exch .cas on global, shared,
                 .shared::cluster (another CTA's), generic (semantics and scope qualifiers
                 accepted: everything is sequentially consistent here); .add.noftz on the
                 half types (halfatomic.py's step functions)             emit_atom
    .v2/.v4/.v8  vector atomics on global memory (sm_90): each element its own atomic
                 (vecatom.py)                                           emit_vector_atom
    red.async    a reduction into a cluster peer's shared memory, completed on its
                 mbarrier (sm_90, asyncstore.py)                        emit_red_async

Each reaches the engine's atomics (engine/atomics.py through C.atom), which serialize the
threads hitting one address in lane order.
"""
from __future__ import annotations

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Addr, Imm, Instruction, Vec
from . import halfatomic
from .addressing import address, operands_less_policy, take_space
from .asyncstore import RED_TYPES, async_addresses, async_modifiers
from .memops import SEMANTICS
from .operands import Mods, unsupported
from .registry import ANY, ASYNC, MEMORY, VECTOR, family

_ATOM_TYPES = {
    "add": {"u32", "s32", "u64", "s64", "f32", "f64"},
    "min": {"u32", "s32", "u64", "s64"}, "max": {"u32", "s32", "u64", "s64"},
    "inc": {"u32"}, "dec": {"u32"},
    "and": {"b32", "b64"}, "or": {"b32", "b64"}, "xor": {"b32", "b64"},
    "exch": {"b32", "b64"}, "cas": {"b16", "b32", "b64"},
}
# the vector forms: their orderings, and the lengths each element type takes
_ORDER = {"relaxed", "acquire", "release", "acq_rel", "sc", "cta", "gpu", "sys", "cluster"}
_LENGTHS = {"f32": (2, 4), "f16": (2, 4, 8), "bf16": (2, 4, 8), "f16x2": (2, 4), "bf16x2": (2, 4)}


def emit_atom(g, ins: Instruction) -> None:
    is_red = ins.opcode == "red"
    m = Mods(ins)
    space = take_space(ins, m, "global", "shared", "generic", cluster_ok=True) or "generic"
    m.take_all(SEMANTICS)
    m.take_all({"L2"})
    op = m.take(*_ATOM_TYPES)
    if op is None:
        raise unsupported(ins, "operation")
    noftz = m.take("noftz")
    vec = m.take("v2", "v4", "v8")
    if vec:
        raise unsupported(ins, f".{vec} atomics")
    ts = m.types()
    m.done()
    if len(ts) != 1:
        raise PtxError(ins.line, f"expected one type on {ins.opcode}: {ins.text}")
    t = ts[0]
    op_expr = repr(op)
    if noftz:
        # half-precision adds: a step function over the raw bits (halfatomic.py)
        step, t = halfatomic.half_atomic(ins, op, t)
        op_expr = f"_half_atom{len(g.ns)}"
        g.ns[op_expr] = step
    elif t not in _ATOM_TYPES[op]:
        raise unsupported(ins, f".{op} on .{t}")
    ops = operands_less_policy(g, ins, 2)
    n_src = 2 if op == "cas" else 1
    want = (0 if is_red else 1) + 1 + n_src
    if len(ops) != want:
        raise PtxError(ins.line, f"{ins.opcode}.{op} takes {want} operands: {ins.text}")
    d = None if is_red else ops[0]
    addr = ops[0 if is_red else 1]
    srcs = ops[(1 if is_red else 2):]
    guard = g.guard(ins)
    size, kind = TYPES[t]
    ut = f"u{size * 8}"
    vals = []
    for s in srcs:
        if isinstance(s, Imm) and kind == "f":
            vals.append(f"{g.read(ins, s, t)}.view(_U{size * 8})")
        else:
            vals.append(g.read(ins, s, ut))
    if space in ("shared", "shared::cluster"):
        g.ck.uses_shared = True
    a = address(g, ins, addr, space)
    iid = g.ns["_register_instruction"](ins)
    gexpr = guard if guard is not None else "None"
    c = vals[1] if op == "cas" else "None"
    call = f"C.atom({space!r}, {a}, {op_expr}, {t!r}, {vals[0]}, {c}, {iid}, {gexpr}"
    if is_red:
        g.emit(call + ", False)")
        return
    tmp = g.fresh()
    g.emit(f"{tmp} = {call})")
    g.write(ins, d, tmp, ut, guard)


# --- vector atomics (vecatom.py) ---------------------------------------------------------

def emit_vector_atom(g, ins: Instruction) -> None:
    is_red = ins.opcode == "red"
    m = Mods(ins)
    space = take_space(ins, m, "global") or "generic"
    m.take_all(_ORDER)
    m.take_all({"L2"})
    op = m.take("add", "min", "max")
    noftz = m.take("noftz") is not None
    vec = m.take("v2", "v4", "v8")
    t = m.one_type(set(_LENGTHS))
    m.done()
    n = int(vec[1:])
    if op is None or n not in _LENGTHS[t]:
        raise PtxError(ins.line, f"{ins.opcode}.{vec}.{t} needs .add/.min/.max and a vector of "
                                 f"{' or '.join(map(str, _LENGTHS[t]))}: {ins.text}")
    if t == "f32":
        if op != "add" or noftz:
            raise PtxError(ins.line, f"{ins.opcode}.{vec}.f32 is .add (without .noftz): {ins.text}")
        op_expr, raw = repr(op), "f32"
    else:
        if not noftz:
            raise PtxError(ins.line, f"{ins.opcode}.{vec}.{t} needs .noftz: {ins.text}")
        if op in ("min", "max"):
            step, raw = halfatomic.half_minmax_step(op, t), halfatomic.HALF_ATOMIC_TYPES[t]
        else:
            step, raw = halfatomic.half_atomic(ins, op, t)
        op_expr = f"_vec_half_atom{len(g.ns)}"
        g.ns[op_expr] = step
    ops = operands_less_policy(g, ins, 2 if is_red else 3)
    if len(ops) != (2 if is_red else 3):
        raise PtxError(ins.line, f"{ins.opcode} takes {'[a], b' if is_red else 'd, [a], b'}: {ins.text}")
    dest, addr, b = ([None] + ops) if is_red else ops
    srcs = b.elems if isinstance(b, Vec) else [b]
    if not isinstance(addr, Addr) or len(srcs) != n or None in srcs:
        raise PtxError(ins.line, f"{ins.opcode}.{vec} takes [a] and a vector of {n}: {ins.text}")
    size = TYPES[t][0]
    ut = f"u{size * 8}"
    values = "(" + ", ".join(g.read(ins, s, ut) for s in srcs) + ",)"
    a = address(g, ins, addr, space)
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    call = (f"_vec_atom(C, {space!r}, {a}, {op_expr}, {raw!r}, {values}, {size}, {iid}, "
            f"{guard if guard is not None else 'None'}, {not is_red})")
    if is_red:
        g.emit(call)
        return
    elems = dest.elems if isinstance(dest, Vec) else [dest]
    if len(elems) != n:
        raise PtxError(ins.line, f"{ins.opcode}.{vec} needs {n} destinations: {ins.text}")
    tmp = g.fresh()
    g.emit(f"{tmp} = {call}")
    for i, e in enumerate(elems):
        if e is not None:
            g.write(ins, e, f"{tmp}[{i}]", ut, guard)


def emit_red_async(g, ins: Instruction) -> None:
    m = Mods(ins)
    async_modifiers(ins, m)
    if m.take("relaxed") is None or m.take("cluster") is None:
        raise PtxError(ins.line, f"red.async is .relaxed.cluster: {ins.text}")
    op = m.take(*RED_TYPES)
    if op is None:
        raise PtxError(ins.line, f"red.async needs an operation: {ins.text}")
    t = m.one_type(RED_TYPES[op])
    m.done()
    if len(ins.operands) != 3:
        raise PtxError(ins.line, f"red.async takes [a], b, [mbar]: {ins.text}")
    a, b, mb = async_addresses(g, ins, ins.operands)
    value = g.read(ins, b, f"u{TYPES[t][0] * 8}")
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_red_async(C, {a}, {mb}, {value}, {op!r}, {t!r}, {iid}, "
           f"{guard if guard is not None else 'None'})")



FAMILY = family("atom", __name__)
FAMILY.declare("atom", emit={ANY: emit_atom, VECTOR: emit_vector_atom}, pipe=MEMORY)
FAMILY.declare("red", emit={ANY: emit_atom, VECTOR: emit_vector_atom, ASYNC: emit_red_async}, pipe=MEMORY)

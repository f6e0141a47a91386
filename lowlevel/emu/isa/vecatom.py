"""Vector atomics on global memory (sm_90, PTX 8.1):

    atom{.sem}{.scope}{.global}.add{.L2::cache_hint}.{v2,v4}.f32          d, [a], b{, policy};
    atom{.sem}{.scope}{.global}.add.noftz{.L2::cache_hint}.{v2,v4,v8}.{f16,bf16}   d, [a], b;
    atom{.sem}{.scope}{.global}.add.noftz{.L2::cache_hint}.{v2,v4}.{f16x2,bf16x2}  d, [a], b;
    atom{.sem}{.scope}{.global}.{min,max}.noftz{.L2::cache_hint}.{v2,v4,v8}.{f16,bf16}  d, [a], b;
    atom{.sem}{.scope}{.global}.{min,max}.noftz{.L2::cache_hint}.{v2,v4}.{f16x2,bf16x2} d, [a], b;
    red ... the same without d

d and b are vectors ({...}) of the element type. The ISA makes each element its own atomic
operation (the vector as a whole is not one), on consecutive elements from `a`, which is
aligned to the whole vector's size (CUDA_ERROR_MISALIGNED_ADDRESS). Each element goes
through the engine's atomics, so threads hitting the same element serialize in lane order
as for scalar atomics; .f32 add rounds and flushes as the scalar atom.add.f32 on global
memory does, the half types add as atom.add.noftz does (halfatomic.py) and take the min/max as min/max
on half types do (a NaN loses to a number; sm_90 has no scalar form of those).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Addr, Instruction, Vec
from . import halfatomic
from .addressing import address, operands_less_policy, take_space
from .operands import Mods
from .registry import provide

_ORDER = {"relaxed", "acquire", "release", "acq_rel", "sc", "cta", "gpu", "sys", "cluster"}
_LENGTHS = {"f32": (2, 4), "f16": (2, 4, 8), "bf16": (2, 4, 8), "f16x2": (2, 4), "bf16x2": (2, 4)}


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


def vec_atom(C, space: str, addr, op, ptype: str, values, size: int, iid: int, guard, want_old):
    """Each element's atomic in turn; the old values (one array per element) or None."""
    active, any_active = C.active_with(guard)
    nbytes = size * len(values)
    if any_active:
        a = np.broadcast_to(np.asarray(addr, np.uint64), (C.n,))
        a = a if active is None else a[active]
        bad = (a & np.uint64(nbytes - 1)) != 0
        if bad.any():
            i = int(np.argmax(bad))
            C.fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", nbytes, space, "atomic",
                    int(a[i]), i, active, None, iid)
    olds = [C.atom(space, addr + np.uint64(i * size), op, ptype, v, None, iid, guard, want_old)
            for i, v in enumerate(values)]
    return olds if want_old else None


provide(_vec_atom=vec_atom)

__all__ = ["emit_vector_atom", "vec_atom"]

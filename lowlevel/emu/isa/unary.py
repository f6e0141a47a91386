"""The unary operations, every form: abs neg not cnot, and the float functions sqrt rcp
rsqrt ex2 lg2 sin cos tanh (emit_unary); abs neg ex2 tanh on .f16/.f16x2/.bf16/.bf16x2
(emit_unary_half: abs and neg on the sign bit, ex2 and tanh through half.py's _hop).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction
from . import numerics
from .half import PAIR_TYPES, half_modifiers, refuse_approx, storage_type, write_hop
from .operands import BIT_TYPES, FLOAT_TYPES, INT_TYPES, ROUND_F, Mods, operands, unsupported, view_name
from .registry import ANY, HALF_FORMS, SFU, family


def emit_unary(g, ins: Instruction) -> None:
    """abs, neg, not, cnot, and the float unary functions."""
    m = Mods(ins)
    op = ins.opcode
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    if op in ("not", "cnot"):
        t = m.one_type(BIT_TYPES | {"pred"} | (INT_TYPES if op == "cnot" else set()))
        m.done()
        if t == "pred":
            if op == "cnot":
                raise PtxError(ins.line, f"cnot has no .pred form: {ins.text}")
            g.write(ins, d, f"(~{g.read(ins, a, 'pred')})", "pred", guard)
            return
        ut = f"u{TYPES[t][0] * 8}"
        x = g.read(ins, a, ut)
        if op == "not":
            g.write(ins, d, f"(~{x})", ut, guard)
        else:
            g.write(ins, d, f"({x} == 0).astype({view_name(ut)})", ut, guard)
        return
    t = m.one_type(INT_TYPES | FLOAT_TYPES if op in ("abs", "neg") else FLOAT_TYPES)
    size, kind = TYPES[t]
    bits = size * 8
    if kind != "f":
        m.done()
        if op == "abs":
            g.write(ins, d, f"_abs({g.read(ins, a, t)})", t, guard)
        else:
            ut = f"u{bits}"
            g.write(ins, d, f"({g.const(numerics.UINT[size](0))} - {g.read(ins, a, ut)})", ut, guard)
        return
    ftz = m.take("ftz")
    if t == "f64" and ftz and not (op in ("rcp", "rsqrt") and "approx" in ins.mods):
        raise unsupported(ins, ".ftz on f64")
    x = g.read(ins, a, t)
    flush = "_flush64" if t == "f64" else "_flush"
    if ftz:
        x = f"{flush}({x})"
    ut = f"u{bits}"
    sign = g.const(numerics.UINT[size](1 << (bits - 1)))
    if op in ("abs", "neg"):
        m.done()
        raw = f"({x}).view(_U{bits})"
        expr = f"({raw} & ~{sign})" if op == "abs" else f"({raw} ^ {sign})"
        g.write(ins, d, expr, ut, guard)
        return
    approx = m.take("approx")
    rnd = m.take(*ROUND_F)
    m.done()
    if rnd in ("rz", "rm", "rp") and op not in ("sqrt", "rcp"):
        raise PtxError(ins.line, f"{op} takes no rounding modifier: {ins.text}")
    if op in ("sqrt", "rcp") and not (approx or rnd):
        raise PtxError(ins.line, f"{op} needs .approx or a rounding modifier: {ins.text}")
    if op in ("rsqrt", "ex2", "lg2", "sin", "cos", "tanh") and not approx:
        raise PtxError(ins.line, f"{op} needs .approx: {ins.text}")
    if op in ("ex2", "lg2", "sin", "cos", "tanh") and t != "f32":
        raise unsupported(ins, f"{op} on .{t}")
    fdt = f"_F{bits}"
    # The approximations are computed in f64 and rounded once: within 0.5 ulp of f32
    # (f64 for rcp/rsqrt.approx.f64), inside every bound the ISA documents for them (e.g.
    # ex2 2 ulp, lg2/sin/cos 2^-22.x absolute, rsqrt 2^-22.9 relative, tanh 2^-11).
    if op == "sqrt":
        expr = f"_sqrt_dir({x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"_sqrt({x})"
    elif op == "rcp":
        one = g.const(numerics.FLOAT[size](1))
        expr = f"_div_dir({one}, {x}, {rnd!r})" if rnd in ("rz", "rm", "rp") else f"({one} / {x})"
    elif op == "rsqrt":
        expr = f"(1.0 / _sqrt({x}.astype(_F64))).astype({fdt})" if t == "f32" else \
            f"({g.const(np.float64(1))} / _sqrt({x}))"
    else:
        fn = {"ex2": "_exp2", "lg2": "_log2", "sin": "_sin", "cos": "_cos", "tanh": "_tanh"}[op]
        expr = f"{fn}({x}.astype(_F64)).astype(_F32)"
    if ftz:
        expr = f"{flush}({expr})"
    g.write(ins, d, expr, t, guard)


def emit_unary_half(g, ins) -> None:
    """abs neg (.ftz on f16) and ex2 tanh (.approx; ex2 .ftz on bf16 too) on the half types."""
    op = ins.opcode
    hm = half_modifiers(ins, bf16_ftz=op == "ex2")
    if op in ("ex2", "tanh"):
        if not hm.approx:
            raise PtxError(ins.line, f"{op} on .{hm.type} needs .approx: {ins.text}")
        if hm.nan:
            raise unsupported(ins, ".NaN")
        write_hop(g, ins, hm, op, 1)
        return
    refuse_approx(ins, hm)
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    rt = storage_type(hm.type)
    x = g.read(ins, a, rt)
    pair = hm.type in PAIR_TYPES
    k = g.const(numerics.UINT[TYPES[hm.type][0]](0x80008000 if pair else 0x8000))
    if hm.ftz:                      # subnormals flushed: max(x, x) with .ftz
        x = f"_x2(_hop, ('max', 'f16', 'rn', True, False, False), {x}, {x})" if pair \
            else f"_hop('max', 'f16', 'rn', True, False, False, {x}, {x})"
    expr = f"({x} ^ {k})" if op == "neg" else f"({x} & ~{k})"
    g.write(ins, d, expr, rt, guard)


FAMILY = family("unary", __name__)
_HALF = dict.fromkeys(HALF_FORMS, emit_unary_half)
FAMILY.declare("abs", "neg", emit={ANY: emit_unary, **_HALF})
FAMILY.declare("not", "cnot", emit=emit_unary)
FAMILY.declare("sqrt", "rcp", "rsqrt", "lg2", "sin", "cos", emit=emit_unary, pipe=SFU)
FAMILY.declare("ex2", "tanh", emit={ANY: emit_unary, **_HALF}, pipe=SFU)

"""Integer and floating-point arithmetic beyond the opcodes with modules of their own: div
rem, and or xor, shl shr, copysign, testp. (add sub mul mad fma and the carry chain:
addmul.py; the unary operations: unary.py; min max: minmax.py.)"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Instruction
from . import numerics
from .operands import (
    BIT_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    Mods,
    operands,
    unsupported,
)
from .registry import SFU, TYPED, family

U16, U32, I16, I32 = np.uint16, np.uint32, np.int16, np.int32


def emit_div_rem(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(INT_TYPES | FLOAT_TYPES)
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    if kind == "f":
        if ins.opcode == "rem":
            raise unsupported(ins, "rem on floats")
        mode = m.take("approx", "full", "rn", "rz", "rm", "rp")
        ftz = m.take("ftz")
        m.done()
        if mode is None and t == "f64":
            raise PtxError(ins.line, f"div.f64 needs a rounding modifier: {ins.text}")
        if t == "f64" and ftz:
            raise unsupported(ins, ".ftz on f64")
        x, y = g.read(ins, a, t), g.read(ins, b, t)
        if ftz:
            x, y = f"_flush({x})", f"_flush({y})"
        # .approx and .full are within 2 ulp; the correctly rounded quotient satisfies that.
        expr = f"_div_dir({x}, {y}, {mode!r})" if mode in ("rz", "rm", "rp") else f"({x} / {y})"
        if ftz:
            expr = f"_flush({expr})"
        g.write(ins, d, expr, t, guard)
        return
    m.done()
    x, y = g.read(ins, a, t), g.read(ins, b, t)
    fn = {("div", "u"): "_udiv", ("div", "s"): "_sdiv",
          ("rem", "u"): "_urem", ("rem", "s"): "_srem"}[(ins.opcode, kind)]
    g.write(ins, d, f"{fn}({x}, {y})", t, guard)


def emit_logic(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(BIT_TYPES | {"pred"})
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    sym = {"and": "&", "or": "|", "xor": "^"}[ins.opcode]
    ut = "pred" if t == "pred" else f"u{TYPES[t][0] * 8}"
    g.write(ins, d, f"({g.read(ins, a, ut)} {sym} {g.read(ins, b, ut)})", ut, guard)


def emit_shift(g, ins: Instruction) -> None:
    m = Mods(ins)
    t = m.one_type(BIT_TYPES | INT_TYPES)
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    size, kind = TYPES[t]
    bits = size * 8
    if ins.opcode == "shl" or kind != "s":
        t = f"u{bits}"            # shl and unsigned/bit shr: logical on raw bits
    x = g.read(ins, a, t)
    n = g.read(ins, b, "u32")
    fn = "_shl" if ins.opcode == "shl" else "_shr"
    g.write(ins, d, f"{fn}({x}, {n}, {bits})", t, guard)


# --- copysign, testp ---------------------------------------------------------------------

def emit_copysign(g, ins):
    m = Mods(ins)
    t = m.one_type(FLOAT_TYPES)
    m.done()
    d, a, b = operands(ins, 3)
    guard = g.guard(ins)
    ut = _bits_type(t)
    bits = TYPES[t][0] * 8
    sign = g.const(numerics.UINT[bits // 8](1 << (bits - 1)))
    expr = f"(({g.read(ins, a, ut)} & {sign}) | ({g.read(ins, b, ut)} & ~{sign}))"
    g.write(ins, d, expr, ut, guard)


_TESTP = {
    "finite": "_np.isfinite({x})",
    "infinite": "_np.isinf({x})",
    "number": "~_isnan({x})",
    "notanumber": "_isnan({x})",
    "normal": "(_np.isfinite({x}) & (_abs({x}) >= {tiny}))",
    "subnormal": "(({x} != 0) & (_abs({x}) < {tiny}))",
}


def emit_testp(g, ins):
    m = Mods(ins)
    op = m.take(*_TESTP)
    t = m.one_type(FLOAT_TYPES)
    m.done()
    if op is None:
        raise PtxError(ins.line, f"testp needs one of {', '.join('.' + k for k in _TESTP)}: {ins.text}")
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    dt = numerics.FLOAT[TYPES[t][0]]
    tiny = g.const(dt(np.finfo(dt).tiny))
    x = g.read(ins, a, t)
    g.write(ins, d, _TESTP[op].format(x=x, tiny=tiny), "pred", guard)


def _bits_type(t: str) -> str:
    return f"u{TYPES[t][0] * 8}"


FAMILY = family("arith", __name__)
FAMILY.declare("div", emit=emit_div_rem, pipe=lambda ins: SFU if "approx" in ins.mods else TYPED)
FAMILY.declare("rem", emit=emit_div_rem)
FAMILY.declare("and", "or", "xor", emit=emit_logic)
FAMILY.declare("shl", "shr", emit=emit_shift)
FAMILY.declare("copysign", emit=emit_copysign)
FAMILY.declare("testp", emit=emit_testp)

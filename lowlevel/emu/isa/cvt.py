"""cvt, every form: between the integer and float types (emit_cvt), to, from and between
the half types (emit_cvt_half), cvt.pack.sat (emit_cvt_pack), the 8-bit float pairs
(emit_cvt_f8) and tf32 (emit_cvt_tf32).

The arithmetic these forms call at run time is in the modules of their types: numerics.py
(rounding, float <-> integer), half.py (16-bit rounding), cvtpack.py (saturating packs),
lowfloat.py (e4m3, e5m2 and tf32 encodings, where their formats are described); this
module reads the modifiers and operands, refuses what ptxas refuses, and writes the call.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, Instruction, Reg
from . import numerics
from .cvtpack import WIDTHS
from .half import HALF_TYPES, PAIR_TYPES, element_kind
from .operands import (
    ROUND_F,
    ROUND_I,
    Mods,
    needs_target,
    operands,
    unsupported,
    view_dtype,
    view_name,
)
from .registry import ANY, HALF_FORMS, PACK, family

PAIR32 = ("b32", "f16x2")      # the registers an f16x2 operand of an 8-bit cvt may be


def emit_cvt(g, ins: Instruction) -> None:
    m = Mods(ins)
    irnd = m.take(*ROUND_I)
    frnd = m.take(*ROUND_F)
    ftz = m.take("ftz")
    sat = m.take("sat")
    ts = m.types()
    m.done()
    if len(ts) != 2:
        raise PtxError(ins.line, f"cvt needs a destination and a source type: {ins.text}")
    dt, st = ts
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    dsize, dkind = TYPES[dt]
    ssize, skind = TYPES[st]
    if "pred" in (dkind, skind):
        raise PtxError(ins.line, f"cvt does not take predicates: {ins.text}")
    x = g.read(ins, a, st)
    if ftz and not (st == "f32" or dt == "f32"):
        raise PtxError(ins.line, f".ftz applies to .f32 only: {ins.text}")
    if ftz and st == "f32":
        x = f"_flush({x})"
    if skind != "f" and dkind != "f":                       # integer <-> integer
        if irnd or frnd:
            raise PtxError(ins.line, f"no rounding modifier for integer cvt: {ins.text}")
        if sat:
            info = np.iinfo(view_dtype(dt) if dkind != "b" else numerics.UINT[dsize])
            lo, hi = g.const(np.int64(info.min)), g.const(np.int64(info.max))
            if ssize == 8 and skind != "s":
                # a u64 source beyond int64: clamp in unsigned space first
                x = f"_np.minimum({x}, _U64({info.max})).astype(_I64)"
            else:
                x = f"{x}.astype(_I64)"
            expr = f"_clip({x}, {lo}, {hi}).astype({view_name(dt)})"
        else:
            expr = f"{x}.astype({view_name(dt)})"        # C casts: truncate / extend
        g.write(ins, d, expr, dt, guard)
        return
    if skind != "f":                                        # integer -> float
        if irnd:
            raise PtxError(ins.line, f"integer rounding modifier on int->float cvt: {ins.text}")
        mode = frnd or "rn"
        if ssize == 8 and mode != "rn" and not numerics.LONG_DOUBLE_EXACT_64:
            raise unsupported(ins, "directed rounding from 64-bit integers on this platform")
        expr = f"_int_to_float({x}, {mode!r}, {view_name(dt)})"
    elif dkind != "f":                                      # float -> integer
        expr, dt = float_to_int(g, ins, x, dt, irnd)
    else:                                                   # float -> float
        if dsize < ssize:                                   # f64 -> f32
            if irnd:
                raise PtxError(ins.line, f"f64->f32 cvt takes a float rounding mode: {ins.text}")
            if not frnd:
                raise PtxError(ins.line, f"f64->f32 cvt needs a rounding modifier: {ins.text}")
            expr = f"_round_f64_to_f32({x}, {frnd!r})"
        elif dsize > ssize:                                 # f32 -> f64: exact
            if irnd or frnd:
                raise PtxError(ins.line, f"f32->f64 cvt takes no rounding modifier: {ins.text}")
            expr = f"{x}.astype(_F64)"
        else:                                               # same size: round to integral
            if frnd:
                raise PtxError(ins.line, f"same-size float cvt takes .rni/.rzi/.rmi/.rpi: {ins.text}")
            expr = f"_round_integral({x}, {irnd!r})" if irnd else x
    if ftz and dt == "f32":
        expr = f"_flush({expr})"
    if sat and dkind == "f":
        expr = f"_satf({expr})"
    g.write(ins, d, expr, dt, guard)


def float_to_int(g, ins, x: str, dt: str, irnd):
    """(expression, written type) of float expression `x` converted to integer type `dt`
    with integer rounding `irnd` (which the ISA requires); a .bN destination is written as
    the unsigned integer of its size."""
    if not irnd:
        raise PtxError(ins.line, f"float->integer cvt needs .rni/.rzi/.rmi/.rpi: {ins.text}")
    dsize, dkind = TYPES[dt]
    target = view_dtype(dt) if dkind != "b" else numerics.UINT[dsize]
    expr = f"_float_to_int({x}, {irnd!r}, {g.const(target)})"
    return expr, (f"u{dsize * 8}" if dkind == "b" else dt)


# cvt to, from and between .f16/.bf16 (and cvt.rn.{f16x2,bf16x2}.f32 d, a, b)
def emit_cvt_half(g, ins):
    m = Mods(ins)
    irnd = m.take(*ROUND_I)
    frnd = m.take(*ROUND_F)
    ftz = bool(m.take("ftz"))
    sat = bool(m.take("sat"))
    relu = bool(m.take("relu"))
    satfinite = bool(m.take("satfinite"))
    ts = m.types()
    m.done()
    if len(ts) != 2:
        raise PtxError(ins.line, f"cvt needs a destination and a source type: {ins.text}")
    dt, st = ts
    if satfinite:
        raise unsupported(ins, ".satfinite")
    guard = g.guard(ins)
    if dt in PAIR_TYPES:                                       # cvt.rn.f16x2.f32 d, a, b
        if st != "f32":
            raise unsupported(ins, f"cvt.{dt}.{st}")
        if frnd is None:
            raise PtxError(ins.line, f"cvt to .{dt} needs a rounding mode: {ins.text}")
        d, a, b = operands(ins, 3)
        expr = (f"_cvt_pair({g.read(ins, a, 'f32')}, {g.read(ins, b, 'f32')}, {element_kind(dt)!r}, "
                f"{frnd!r}, {relu}, {sat})")
        g.write(ins, d, expr, "u32", guard)
        return
    if st in PAIR_TYPES:
        raise unsupported(ins, f"cvt from .{st}")
    d, a = operands(ins, 2)
    ssize, skind = TYPES[st]
    dsize, dkind = TYPES[dt]
    if "pred" in (skind, dkind):
        raise PtxError(ins.line, f"cvt does not take predicates: {ins.text}")
    if dt in HALF_TYPES:
        if st in HALF_TYPES:
            if st == dt:
                if irnd:                                   # cvt.rni.f16.f16: round to integral
                    x = g.read(ins, a, "u16")
                    expr = (f"_cvt_to_half(_round_integral(_h2f({x}, {st!r}, {ftz}), {irnd!r}), "
                            f"{dt!r}, 'rn', False, {sat}, False, 'f64')")
                    g.write(ins, d, expr, "u16", guard)
                    return
                if frnd:
                    raise PtxError(ins.line, f"same-type cvt takes .rni/.rzi/.rmi/.rpi: {ins.text}")
            mode = frnd or "rn"
            x = g.read(ins, a, "u16")
        else:
            if irnd:
                raise PtxError(ins.line, f"cvt to .{dt} takes .rn/.rz/.rm/.rp: {ins.text}")
            if frnd is None:
                raise PtxError(ins.line, f"cvt to .{dt} needs a rounding mode: {ins.text}")
            mode = frnd
            if skind == "b":
                st = f"u{ssize * 8}"
            x = g.read(ins, a, st)
        expr = f"_cvt_to_half({x}, {dt!r}, {mode!r}, {ftz}, {sat}, {relu}, {st!r})"
        g.write(ins, d, expr, "u16", guard)
        return
    # half source, wider destination
    x = f"_h2f({g.read(ins, a, 'u16')}, {st!r}, {ftz and st == 'f16'})"
    if dkind == "f":
        if frnd or irnd:
            if irnd:
                x = f"_round_integral({x}, {irnd!r})"
            elif dt == "f32" or dt == "f64":
                raise PtxError(ins.line, f"widening cvt.{dt}.{st} takes no rounding mode: {ins.text}")
        expr = f"{x}.astype(_F32)" if dt == "f32" else x
        if ftz and dt == "f32":
            expr = f"_flush({expr})"
        if sat:
            expr = f"_satf({expr})"
        g.write(ins, d, expr, dt, guard)
        return
    expr, dt = float_to_int(g, ins, x, dt, irnd)
    g.write(ins, d, expr, dt, guard)


def emit_cvt_pack(g, ins):
    m = Mods(ins)
    m.take("pack")
    if not m.take("sat"):
        raise PtxError(ins.line, f"cvt.pack takes .sat: {ins.text}")
    t = m.take(*WIDTHS)
    src = m.take("s32")
    ctype = m.take("b32")
    m.done()
    wide = t in ("u16", "s16")
    if t is None or src is None or (ctype is None) != wide:
        raise PtxError(ins.line, "cvt.pack.sat is .{u16,s16}.s32 d, a, b or "
                                 f".{{u8,s8,u4,s4,u2,s2}}.s32.b32 d, a, b, c: {ins.text}")
    ops = operands(ins, 3 if wide else 4)
    guard = g.guard(ins)
    c = "None" if wide else g.read(ins, ops[3], "u32")
    expr = (f"_cvt_pack({WIDTHS[t]}, {t[0] == 's'}, {g.read(ins, ops[1], 's32')}, "
            f"{g.read(ins, ops[2], 's32')}, {c})")
    g.write(ins, ops[0], expr, "u32", guard)


# --- the 8-bit floats and tf32 (lowfloat.py) ---------------------------------------------

def _register(g, ins, op, types: tuple, what: str):
    """ptxas takes only a register of one of `types` here (no immediate, no other type)."""
    rtype = g.ck.kernel.registers.get(op.name) if isinstance(op, Reg) else None
    if rtype is None or op.negated or rtype not in types:
        raise PtxError(ins.line, f"cvt: {what} must be a {' or '.join('.' + t for t in types)} "
                                 f"register: {ins.text}")
    return op


def _f32_source(g, ins, op, what: str):
    """An .f32 operand: an .f32 or .b32 register, or a float immediate (as ptxas takes)."""
    if isinstance(op, Imm):
        if not op.is_float:
            raise PtxError(ins.line, f"cvt: {what} must be an .f32 operand, not an integer: {ins.text}")
        return g.read(ins, op, "f32")
    return g.read(ins, _register(g, ins, op, ("f32", "b32"), what), "f32")


def emit_cvt_f8(g, ins):
    m = Mods(ins)
    rnd = m.take("rn", "rna", "rz", "rm", "rp")
    satfinite = m.take("satfinite") is not None
    relu = m.take("relu") is not None
    got = [x for x in m.left if x in ("e4m3x2", "e5m2x2", "f32", "f16x2")]
    for x in got:
        m.left.remove(x)
    m.done()
    # ptxas: sm_90 with PTX 7.8, or sm_89 with PTX 8.1
    what = "cvt with .e4m3x2/.e5m2x2"
    needs_target(g, ins, 89, 81 if g.ck.kernel.binary_version == 89 else 78, what)
    if rnd != "rn":
        raise PtxError(ins.line, f"cvt with .e4m3x2/.e5m2x2 takes (and needs) .rn: {ins.text}")
    if len(got) != 2 or got[0] == got[1]:
        raise unsupported(ins, "types (cvt.rn.satfinite.{e4m3x2,e5m2x2}.{f32,f16x2} or "
                               "cvt.rn.f16x2.{e4m3x2,e5m2x2})")
    dt, st = got
    guard = g.guard(ins)
    if dt in ("e4m3x2", "e5m2x2"):
        if not satfinite:
            raise PtxError(ins.line, f"'.satfinite' modifier required for cvt with destination "
                                     f"type .{dt}: {ins.text}")
        kind = dt[:4]
        if st == "f32":
            d, a, b = operands(ins, 3)
            expr = (f"_f8x2_from_f32({_f32_source(g, ins, a, 'a')}, {_f32_source(g, ins, b, 'b')}, "
                    f"{kind!r}, {relu})")
        elif st == "f16x2":
            d, a = operands(ins, 2)
            expr = f"_f8x2_from_f16x2({g.read(ins, _register(g, ins, a, PAIR32, 'a'), 'u32')}, {kind!r}, {relu})"
        else:
            raise unsupported(ins, f"cvt.{dt}.{st}")
        g.write(ins, _register(g, ins, d, ('b16',), "d"), expr, "u16", guard)
        return
    if dt != "f16x2" or satfinite:
        raise unsupported(ins, f"cvt{'.satfinite' if satfinite else ''}.{dt}.{st} (the 8-bit "
                               "floats widen only to .f16x2, without .satfinite)")
    d, a = operands(ins, 2)
    expr = f"_f16x2_from_f8x2({g.read(ins, _register(g, ins, a, ('b16',), 'a'), 'u16')}, {st[:4]!r}, {relu})"
    g.write(ins, _register(g, ins, d, PAIR32, "d"), expr, "u32", guard)


def emit_cvt_tf32(g, ins):
    m = Mods(ins)
    mode = m.take("rna", "rn", "rz")
    satfinite = m.take("satfinite") is not None
    relu = m.take("relu") is not None
    tf32 = m.take("tf32")
    ts = m.types()
    m.done()
    if tf32 is None or ts != ["f32"]:
        raise unsupported(ins, "tf32 conversions other than cvt.{rna,rn,rz}.tf32.f32")
    if mode is None:
        raise PtxError(ins.line, f"cvt.tf32.f32 needs .rna, .rn or .rz: {ins.text}")
    if mode == "rna":
        needs_target(g, ins, 80, 70, "cvt.rna.tf32.f32")
        if relu:
            raise PtxError(ins.line, f"cvt.rna.tf32.f32 takes no .relu: {ins.text}")
        if satfinite:
            needs_target(g, ins, 80, 81, ".satfinite on cvt.rna.tf32.f32")
    else:
        needs_target(g, ins, 90, 78, f"cvt.{mode}.tf32.f32")
        if satfinite:            # PTX 8.6 and sm_100: beyond the emulated device
            raise PtxError(ins.line, f".satfinite on cvt.{mode}.tf32.f32 requires .target sm_100 "
                                     f"or higher: {ins.text}")
    d, a = operands(ins, 2)
    expr = f"_tf32_from_f32({_f32_source(g, ins, a, 'a')}, {mode!r}, {relu}, {satfinite})"
    g.write(ins, _register(g, ins, d, ('b32',), "d"), expr, "u32", g.guard(ins))


FAMILY = family("cvt", __name__)
FAMILY.declare("cvt", emit={ANY: emit_cvt, **dict.fromkeys(HALF_FORMS, emit_cvt_half), PACK: emit_cvt_pack,
                           "f8": emit_cvt_f8, "tf32": emit_cvt_tf32})

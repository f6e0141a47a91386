"""Half precision: .f16, .f16x2, .bf16, .bf16x2 arithmetic (`hop`: add sub mul fma min max
ex2 tanh, which the half-type emitters of addmul.py, minmax.py and unary.py write through
`half_modifiers` and `write_hop`), and the widening and rounding every half-type emitter
uses (cvt.py's, compare.py's setp and set, halfatomic.py's atomics too).

Registers hold the raw 16-bit patterns (a pair packs the first element, `.x`, in the low
half). Every operation widens its inputs exactly to float64, computes there (exactly, or
with the exact error term from an error-free transform), and rounds once to the 16-bit
format in the requested mode:

- f16 round-to-nearest uses numpy's float64 -> float16 conversion, which rounds the
  double's bits correctly (ties to even, subnormals, overflow to inf); when the exact
  value is s + e with e != 0, s is first made "odd" (its last bit set) so the one final
  rounding is correct (round-to-odd keeps the sticky information; f64 has far more than
  the 2 extra bits this needs).
- bf16 goes through float32 with round-to-odd (or the same directed mode), then rounds the
  float32 bits to the top 16 bits; bf16 shares float32's exponent range, so overflow and
  subnormals come out right.
- directed modes (.rz .rm .rp): the nearest result is stepped one ulp when it lies on the
  wrong side of the exact value (compared in float64, which holds every 16-bit value).

NaN results are the canonical NaN 0x7FFF (as NVIDIA GPUs produce). .ftz flushes f16
subnormal inputs and results to signed zero; .sat clamps to [0, 1] with NaN -> +0; .relu
clamps negative results to +0 (NaN stays NaN).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .operands import Mods, ROUND_F, operands, unsupported
from . import numerics
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES
from .registry import provide

F16, F32, F64 = np.float16, np.float32, np.float64
U16, U32, U64 = np.uint16, np.uint32, np.uint64
CANON_NAN = U16(0x7FFF)
SIGN, MAG = 0x8000, 0x7FFF
INF = {"f16": 0x7C00, "bf16": 0x7F80}
SUBNORMAL_BELOW = 0x0400                    # f16 magnitudes under this are subnormal (or 0)
_F16_TINY = 2.0 ** -14
HALF_TYPES = {"f16", "bf16"}
PAIR_TYPES = {"f16x2", "bf16x2"}


def element_kind(kind):
    return kind[:-2] if kind.endswith("x2") else kind


def _arr(x):
    return np.asarray(x)


def _back(out, like):
    """A scalar result when every input was a scalar."""
    if any(isinstance(v, np.ndarray) for v in like):
        return out
    return out.reshape(-1)[0] if isinstance(out, np.ndarray) else out


# --- conversions between bits and float64 ----------------------------------------------------

def to_f64(bits, kind, ftz=False):
    b = _arr(bits).astype(U16)
    if kind == "f16":
        v = b.view(F16).astype(F64)
        if ftz:
            v = np.where(np.abs(v) < _F16_TINY, np.copysign(0.0, v), v)
        return v
    return (b.astype(U32) << U32(16)).view(F32).astype(F64)


def _sticky(x, e):
    """x made odd where the exact value x + e is not x (round-to-odd preparation)."""
    bits = x.view(U64)
    need = (e != 0) & ((bits & U64(1)) == 0) & np.isfinite(x)
    toward = np.where(e > 0, F64(np.inf), F64(-np.inf))
    return np.where(need, np.nextafter(x, toward), x)


def _round_f16(x, mode, e):
    x = np.asarray(x, F64)
    if e is not None and mode == "rn":
        x = _sticky(x, e)
    y = x.astype(F16)
    if mode == "rn":
        return y.view(U16)
    y64 = y.astype(F64)
    ee = np.zeros_like(x) if e is None else e
    above = (y64 > x) | ((y64 == x) & (ee < 0))
    below = (y64 < x) | ((y64 == x) & (ee > 0))
    fin = np.isfinite(x)
    if mode == "rz":
        fix = np.where(y64 > 0, above, below) & fin
        fix |= np.isinf(y) & fin
        y = np.where(fix, np.nextafter(y, F16(0)), y)
    elif mode == "rm":
        y = np.where(above & fin, np.nextafter(y, F16(-np.inf)), y)
    else:
        y = np.where(below & fin, np.nextafter(y, F16(np.inf)), y)
    return np.asarray(y, F16).view(U16)


def _round_bf16(x, mode, e):
    x = np.asarray(x, F64)
    if mode == "rn":
        f = numerics.round_f64_to_f32(x, "rz", e)              # then make it odd
        f = np.asarray(f, F32)
        inexact = (f.astype(F64) != x) | ((e != 0) if e is not None else False)
        bits = f.view(U32)
        bits = np.where(inexact & np.isfinite(x), bits | U32(1), bits)
        r = (bits + U32(0x7FFF) + ((bits >> U32(16)) & U32(1))) >> U32(16)
        return r.astype(U16)
    f = np.asarray(numerics.round_f64_to_f32(x, mode, e), F32)
    bits = f.view(U32)
    low = (bits & U32(0xFFFF)) != 0
    neg = (bits >> U32(31)) != 0
    top = bits >> U32(16)
    if mode == "rm":
        top = np.where(low & neg, top + U32(1), top)
    elif mode == "rp":
        top = np.where(low & ~neg, top + U32(1), top)
    return top.astype(U16)


def from_f64(x, kind, mode="rn", e=None, ftz=False, sat=False, relu=False):
    """Round float64 values (plus an exact residual e) to f16/bf16 bits."""
    x = np.asarray(x, F64)
    if e is not None:
        e = np.where(np.isfinite(e), e, 0.0)
    if sat:
        clamp = (x > 1) | (x < 0) | np.isnan(x)
        x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
        if e is not None:
            e = np.where(clamp, 0.0, e)
    if relu:
        neg = x < 0
        x = np.where(neg, 0.0, x)
        if e is not None:
            e = np.where(neg, 0.0, e)
    r = _round_f16(x, mode, e) if kind == "f16" else _round_bf16(x, mode, e)
    if ftz and kind == "f16":
        mag = r & U16(0x7FFF)
        r = np.where((mag != 0) & (mag < U16(0x0400)), r & U16(0x8000), r)
    return np.where(np.isnan(x), CANON_NAN, r).astype(U16)


# --- runtime helpers called by generated code ---------------------------------------------------

def hop(op, kind, mode, ftz, sat, relu, *xs):
    """add sub mul fma min max (and .NaN variants), ex2 tanh on 16-bit values."""
    vals = [to_f64(x, kind, ftz) for x in xs]
    e = None
    with np.errstate(all="ignore"):
        if op == "add":
            s, e = numerics.two_sum(vals[0], vals[1])
        elif op == "sub":
            s, e = numerics.two_sum(vals[0], -vals[1])
        elif op == "mul":
            s = vals[0] * vals[1]                         # 11x11 or 8x8 bits: exact
        elif op == "fma":
            s, e = numerics.two_sum(vals[0] * vals[1], vals[2])
        elif op in ("min", "max", "min.NaN", "max.NaN"):
            fn = numerics.fmin_ptx if op.startswith("min") else numerics.fmax_ptx
            s = np.asarray(fn(vals[0], vals[1]), F64)
            if op.endswith("NaN"):
                s = np.where(np.isnan(vals[0]) | np.isnan(vals[1]), np.nan, s)
        elif op == "ex2":
            s = np.exp2(vals[0])
        elif op == "tanh":
            s = np.tanh(vals[0])
        else:
            raise ValueError(op)
        out = from_f64(s, kind, mode, e, ftz, sat, relu)
    return _back(out, xs)


def x2(fn, args, *xs):
    """Apply `fn(*args, *halves)` to the low and the high halves of packed pairs."""
    lo = [(_arr(x) & U32(0xFFFF)).astype(U16) for x in xs]
    hi = [(_arr(x) >> U32(16)).astype(U16) for x in xs]
    a = np.asarray(fn(*args, *lo)).astype(U32)
    b = np.asarray(fn(*args, *hi)).astype(U32)
    return _back(a | (b << U32(16)), xs)


def halves(x):
    """(low, high) 16-bit halves of packed pairs."""
    return (_arr(x) & U32(0xFFFF)).astype(U16), (_arr(x) >> U32(16)).astype(U16)


def cvt_to_half(x, kind, mode, ftz, sat, relu, src_kind):
    """Any numeric source (numpy view) to f16/bf16 bits."""
    e = None
    if src_kind == "f16" or src_kind == "bf16":
        v = to_f64(x, src_kind)
    else:
        v, e = _exact_f64(np.asarray(x))
        if ftz and np.asarray(x).dtype == F32:
            v = np.where(np.abs(v) < 2.0 ** -126, np.copysign(0.0, v), v)
    return _back(from_f64(v, kind, mode, e, False, sat, relu), [x])


def _exact_f64(x):
    """(v, e): float64 v plus residual e (None when v is exact) equal to x. 32-bit integers,
    f32 and f64 are exact in f64; a 64-bit integer is split into its high and low 32 bits
    (each exact) and summed with the exact error, so that it is rounded only once."""
    if x.dtype.kind not in "iu" or x.dtype.itemsize < 8:
        return x.astype(F64), None
    low = x & x.dtype.type(0xFFFFFFFF)
    return numerics.two_sum((x - low).astype(F64), low.astype(F64))


def cvt_pair(a, b, kind, mode, relu, sat):
    """cvt.rn.f16x2.f32 d, a, b: a goes to the upper half, b to the lower."""
    hi = from_f64(np.asarray(a).astype(F64), kind, mode, None, False, sat, relu).astype(U32)
    lo = from_f64(np.asarray(b).astype(F64), kind, mode, None, False, sat, relu).astype(U32)
    return _back((hi << U32(16)) | lo, [a, b])


def half_to_f64(x, kind, ftz):
    return _back(to_f64(x, kind, ftz), [x])


provide(**{
    "_hop": hop, "_x2": x2, "_halves": halves, "_cvt_to_half": cvt_to_half,
    "_cvt_pair": cvt_pair, "_h2f": half_to_f64, "_F16": F16,
})

# --- emitters ----------------------------------------------------------------------------------


def half_type(ins):
    for m in ins.mods:
        if m in HALF_TYPES | PAIR_TYPES:
            return m
    return None


def storage_type(t):
    return f"u{TYPES[t][0] * 8}"


class HalfModifiers(NamedTuple):
    """The modifiers of an arithmetic instruction on the half types (half_modifiers)."""
    type: str          # f16, f16x2, bf16, bf16x2
    kind: str          # f16 or bf16, the element type
    rnd: str | None
    ftz: bool
    sat: bool
    relu: bool
    nan: bool
    approx: bool


def half_modifiers(ins, bf16_ftz: bool = False) -> HalfModifiers:
    """Take the modifiers every arithmetic instruction on the half types may carry; refuse
    the rest by name, and .ftz on bf16 (which has no subnormal mode) unless `bf16_ftz`.
    Whether a modifier suits the opcode is its emitter's check."""
    m = Mods(ins)
    t = m.one_type(HALF_TYPES | PAIR_TYPES)
    hm = HalfModifiers(t, element_kind(t), m.take(*ROUND_F), bool(m.take("ftz")), bool(m.take("sat")),
                       bool(m.take("relu")), bool(m.take("NaN")), bool(m.take("approx")))
    if m.take("xorsign"):
        raise unsupported(ins, ".xorsign.abs")
    if m.take("oob"):
        raise unsupported(ins, ".oob")
    m.done()
    if hm.ftz and hm.kind == "bf16" and not bf16_ftz:
        raise PtxError(ins.line, f".ftz is not defined for .{t} {ins.opcode}: {ins.text}")
    return hm


def refuse_approx(ins, hm: HalfModifiers) -> None:
    if hm.approx:
        raise PtxError(ins.line, f".approx is not defined for {ins.opcode}.{hm.type}: {ins.text}")


def write_hop(g, ins, hm: HalfModifiers, name: str, n_in: int) -> None:
    """d = `name`(a, b, ...) through the runtime helper _hop (per half of a pair): the exact
    result in float64, rounded once to the half type as `hm` says."""
    ops = operands(ins, n_in + 1)
    guard = g.guard(ins)
    rt = storage_type(hm.type)
    xs = ", ".join(g.read(ins, o, rt) for o in ops[1:])
    args = f"({name!r}, {hm.kind!r}, {(hm.rnd or 'rn')!r}, {hm.ftz}, {hm.sat}, {hm.relu})"
    expr = f"_x2(_hop, {args}, {xs})" if hm.type in PAIR_TYPES else f"_hop(*{args}, {xs})"
    g.write(ins, ops[0], expr, rt, guard)




"""Half precision: .f16, .f16x2, .bf16, .bf16x2 arithmetic, comparisons and conversions.

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

import numpy as np

from .operands import Mods, ROUND_F, ROUND_I, operands, unsupported, view_dtype
from .compare import CMP, UNORDERED, cmp_and_bool
from . import numerics
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, PredPair
from .registry import provide, register

F16, F32, F64 = np.float16, np.float32, np.float64
U16, U32, U64 = np.uint16, np.uint32, np.uint64
CANON_NAN = U16(0x7FFF)
_F16_TINY = 2.0 ** -14
_HALF = {"f16", "bf16"}
_PAIR = {"f16x2", "bf16x2"}


def _elem(kind):
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


def _half_type(ins):
    for m in ins.mods:
        if m in _HALF | _PAIR:
            return m
    return None


def _reg_u(t):
    return f"u{TYPES[t][0] * 8}"


def emit_arith(g, ins):
    """add sub mul fma min max neg abs ex2 tanh on .f16/.f16x2/.bf16/.bf16x2."""
    op = ins.opcode
    m = Mods(ins)
    t = m.one_type(_HALF | _PAIR)
    kind = _elem(t)
    rnd = m.take(*ROUND_F)
    ftz = bool(m.take("ftz"))
    sat = bool(m.take("sat"))
    relu = bool(m.take("relu"))
    nan = bool(m.take("NaN"))
    approx = bool(m.take("approx"))
    if m.take("xorsign"):
        raise unsupported(ins, ".xorsign.abs")
    if m.take("oob"):
        raise unsupported(ins, ".oob")
    m.done()
    if ftz and kind == "bf16" and op not in ("ex2",):
        raise PtxError(ins.line, f".ftz is not defined for .{t} {op}: {ins.text}")
    if op in ("ex2", "tanh") and not approx:
        raise PtxError(ins.line, f"{op} on .{t} needs .approx: {ins.text}")
    if approx and op not in ("ex2", "tanh"):
        raise PtxError(ins.line, f".approx is not defined for {op}.{t}: {ins.text}")
    n_in = {"fma": 3, "neg": 1, "abs": 1, "ex2": 1, "tanh": 1}.get(op, 2)
    ops = operands(ins, n_in + 1)
    guard = g.guard(ins)
    rt = _reg_u(t)
    xs = [g.read(ins, o, rt) for o in ops[1:]]
    if op in ("neg", "abs"):
        sign = 0x80008000 if t in _PAIR else 0x8000
        k = g.const(numerics.UINT[TYPES[t][0]](sign))
        x = xs[0]
        if ftz:
            x = f"_x2(_hop, ('max', 'f16', 'rn', True, False, False), {x}, {x})" if t in _PAIR \
                else f"_hop('max', 'f16', 'rn', True, False, False, {x}, {x})"
        expr = f"({x} ^ {k})" if op == "neg" else f"({x} & ~{k})"
        g.write(ins, ops[0], expr, rt, guard)
        return
    name = op + (".NaN" if nan else "")
    args = f"({name!r}, {kind!r}, {(rnd or 'rn')!r}, {ftz}, {sat}, {relu})"
    if t in _PAIR:
        expr = f"_x2(_hop, {args}, {', '.join(xs)})"
    else:
        expr = f"_hop(*{args}, {', '.join(xs)})"
    g.write(ins, ops[0], expr, rt, guard)


def emit_setp(g, ins):
    t = _half_type(ins)
    m = Mods(ins)
    cmp, boolop, ftz = cmp_and_bool(ins, m)
    m.one_type(_HALF | _PAIR)
    m.done()
    ops = ins.operands
    if len(ops) != (4 if boolop else 3):
        raise PtxError(ins.line, f"setp takes {4 if boolop else 3} operands: {ins.text}")
    guard = g.guard(ins)
    kind = _elem(t)
    rt = _reg_u(t)
    a, b = g.read(ins, ops[1], rt), g.read(ins, ops[2], rt)
    dest = ops[0]
    p, q = (dest.p, dest.q) if isinstance(dest, PredPair) else (dest, None)
    if t in _PAIR:
        ta, tb = g.fresh(), g.fresh()
        g.emit(f"{ta} = _halves({a})")
        g.emit(f"{tb} = _halves({b})")
        pairs = [(f"{ta}[0]", f"{tb}[0]"), (f"{ta}[1]", f"{tb}[1]")]
    else:
        pairs = [(a, b)]
    results = []
    for x, y in pairs:
        fx, fy = g.fresh(), g.fresh()
        g.emit(f"{fx} = _h2f({x}, {kind!r}, {bool(ftz)})")
        g.emit(f"{fy} = _h2f({y}, {kind!r}, {bool(ftz)})")
        r = g.fresh()
        g.emit(f"{r} = {_cmp_expr(ins, cmp, fx, fy)}")
        results.append(r)
    c = g.read(ins, ops[3], "pred") if boolop else None
    sym = {"and": "&", "or": "|", "xor": "^"}.get(boolop)

    def combine(r):
        return f"({r} {sym} {c})" if boolop else r

    if t in _PAIR:
        g.write(ins, p, combine(results[0]), "pred", guard)
        if q is not None:
            g.write(ins, q, combine(results[1]), "pred", guard)
    else:
        g.write(ins, p, combine(results[0]), "pred", guard)
        if q is not None:
            g.write(ins, q, combine(f"(~{results[0]})"), "pred", guard)


def _cmp_expr(ins, cmp, x, y):
    if cmp == "num":
        return f"~(_isnan({x}) | _isnan({y}))"
    if cmp == "nan":
        return f"(_isnan({x}) | _isnan({y}))"
    if cmp == "ne":
        return f"(({x} != {y}) & ~(_isnan({x}) | _isnan({y})))"
    if cmp in ("eq", "lt", "le", "gt", "ge"):
        return f"({x} {CMP[cmp]} {y})"
    if cmp in UNORDERED:
        return f"(({x} {UNORDERED[cmp]} {y}) | _isnan({x}) | _isnan({y}))"
    raise PtxError(ins.line, f"comparison .{cmp} is not defined for half types: {ins.text}")


def emit_cvt(g, ins):
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
    if dt in _PAIR:                                       # cvt.rn.f16x2.f32 d, a, b
        if st != "f32":
            raise unsupported(ins, f"cvt.{dt}.{st}")
        if frnd is None:
            raise PtxError(ins.line, f"cvt to .{dt} needs a rounding mode: {ins.text}")
        d, a, b = operands(ins, 3)
        expr = (f"_cvt_pair({g.read(ins, a, 'f32')}, {g.read(ins, b, 'f32')}, {_elem(dt)!r}, "
                f"{frnd!r}, {relu}, {sat})")
        g.write(ins, d, expr, "u32", guard)
        return
    if st in _PAIR:
        raise unsupported(ins, f"cvt from .{st}")
    d, a = operands(ins, 2)
    ssize, skind = TYPES[st]
    dsize, dkind = TYPES[dt]
    if "pred" in (skind, dkind):
        raise PtxError(ins.line, f"cvt does not take predicates: {ins.text}")
    if dt in _HALF:
        if st in _HALF:
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
    if not irnd:
        raise PtxError(ins.line, f"float->integer cvt needs .rni/.rzi/.rmi/.rpi: {ins.text}")
    target = view_dtype(dt) if dkind != "b" else numerics.UINT[dsize]
    expr = f"_float_to_int({x}, {irnd!r}, {g.const(target)})"
    if dkind == "b":
        dt = f"u{dsize * 8}"
    g.write(ins, d, expr, dt, guard)


_HALF_FORMS = ("f16", "bf16")          # the type families of registry.py
register(emit_arith, "add", "sub", "mul", "fma", "min", "max", "neg", "abs", "ex2", "tanh", forms=_HALF_FORMS)
register(emit_setp, "setp", forms=_HALF_FORMS)
register(emit_cvt, "cvt", forms=_HALF_FORMS)

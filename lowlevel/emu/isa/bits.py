"""Integer bit manipulation for the code generator.

popc clz brev bfind fns bfe bfi prmt lop3 (and lop3.{and,or} d|p, ..., q: d as lop3, then
p = (d != 0) BoolOp q) shf, mul24/mad24, sad, dp4a/dp2a, slct (the carry chain is carry.py's;
copysign and testp are arith.py's).

Every runtime helper here works elementwise on numpy arrays or numpy scalars (a uniform
register stays a scalar) and follows the PTX ISA's pseudo-code for the instruction,
including its edge cases (bfe/bfi positions and lengths past the width, bfind of 0, shf
amounts past 32). The carry flag CC.CF is a hidden predicate register `%__cc`, created the
first time a kernel uses it; after sub.cc/subc it holds the borrow, as the ISA defines
subc as d = a - (b + CC.CF).
"""
from __future__ import annotations

import functools

import numpy as np

from .operands import BIT_TYPES, FLOAT_TYPES, INT_TYPES, Mods, operands, unsupported
from . import numerics
from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Imm, PredPair, Reg
from .registry import ANY, BOOLOP, family, provide

U8, U32, U64, I64 = np.uint8, np.uint32, np.uint64, np.int64


def _elementwise(fn):
    """Run `fn` on 1-element arrays when every argument is a scalar, return a scalar."""
    @functools.wraps(fn)
    def wrapper(*args):
        if any(isinstance(a, np.ndarray) for a in args):
            return fn(*args)
        out = fn(*(np.asarray(a).reshape(1) if isinstance(a, np.generic) else a for a in args))
        return out[0]
    return wrapper


def _bitlen(x):
    """Number of significant bits of an unsigned array (0 for 0), as int64."""
    if x.dtype.itemsize <= 4:
        return np.frexp(x.astype(np.float64))[1].astype(I64)
    hi = (x >> U64(32)).astype(U32)
    lo = (x & U64(0xFFFFFFFF)).astype(U32)
    return np.where(hi != 0, _bitlen(hi) + 32, _bitlen(lo))


def _lowmask(n, width):
    """(1 << n) - 1 as uint64 for 0 <= n <= width <= 64 (n an int64 array)."""
    n = np.asarray(n, I64)
    safe = np.minimum(n, 63).astype(U64)
    m = (U64(1) << safe) - U64(1)
    return np.where(n >= 64, U64(0xFFFFFFFFFFFFFFFF), m)


@_elementwise
def popc(x):
    return np.bitwise_count(x).astype(U32)


@_elementwise
def clz(x):
    return (x.dtype.itemsize * 8 - _bitlen(x)).astype(U32)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=U8)


@_elementwise
def brev(x):
    x = np.ascontiguousarray(x)
    b = _REV8[x.view(U8)].view(x.dtype)
    return b.byteswap()


@_elementwise
def bfind(x, signed, shiftamt):
    """Position of the most significant non-sign bit; 0xFFFFFFFF if none."""
    width = x.dtype.itemsize * 8
    u = x.view(numerics.UINT[x.dtype.itemsize])
    if signed:
        u = np.where(x < 0, ~u, u)
    pos = _bitlen(u) - 1
    if shiftamt:
        pos = np.where(pos >= 0, width - 1 - pos, -1)
    return pos.astype(I64).astype(U32)


@_elementwise
def fns(mask, base, offset):
    """fns.b32: the |offset|-th set bit of mask counting from base (upward for
    offset > 0, downward for offset < 0, base itself counts); 0xFFFFFFFF if none."""
    mask, base = np.broadcast_arrays(mask.astype(U64), base.astype(I64))
    offset = np.broadcast_to(offset.astype(I64), mask.shape)
    bits = ((mask[..., None] >> np.arange(32, dtype=U64)) & U64(1)).astype(bool)   # (n, 32)
    pos = np.arange(32)
    up = offset > 0
    region = np.where(up[..., None], pos >= base[..., None], pos <= base[..., None]) & bits
    # rank of each set bit in search order: upward counts from low bits, downward from high
    rank_up = np.cumsum(region, axis=-1)
    rank_down = np.cumsum(region[..., ::-1], axis=-1)[..., ::-1]
    rank = np.where(up[..., None], rank_up, rank_down)
    want = np.abs(offset)
    hit = region & (rank == want[..., None])
    found = hit.any(axis=-1)
    where = np.argmax(hit, axis=-1)
    out = np.where(found, where, -1)
    zero = offset == 0
    in_base = (base >= 0) & (base < 32) & ((mask >> np.clip(base, 0, 31).astype(U64)) & U64(1)).astype(bool)
    out = np.where(zero, np.where(in_base, base, -1), out)
    return out.astype(I64).astype(U32)


@_elementwise
def bfe(a, pos, length, signed):
    """bfe: extract length bits at pos, zero- or sign-extended (ISA pseudo-code)."""
    width = a.dtype.itemsize * 8
    u = a.view(numerics.UINT[a.dtype.itemsize]).astype(U64)
    p = (pos & 0xFF).astype(I64)
    n = (length & 0xFF).astype(I64)
    take = np.clip(np.minimum(n, width - p), 0, width)            # bits that come from a
    shifted = u >> np.minimum(p, 63).astype(U64)
    shifted = np.where(p >= width, U64(0), shifted)
    field = shifted & _lowmask(take, width)
    if signed:
        top = np.minimum(p + n - 1, width - 1)
        sbit = ((u >> np.clip(top, 0, 63).astype(U64)) & U64(1)).astype(bool) & (n != 0)
        field = np.where(sbit, field | ~_lowmask(take, 64), field)
    return field.astype(numerics.UINT[a.dtype.itemsize]).view(a.dtype)


@_elementwise
def bfi(a, b, pos, length):
    """bfi: insert the low bits of a into b at pos (ISA pseudo-code)."""
    width = a.dtype.itemsize * 8
    ut = numerics.UINT[a.dtype.itemsize]
    p = (pos & 0xFF).astype(I64)
    n = (length & 0xFF).astype(I64)
    take = np.clip(np.minimum(n, width - p), 0, width)
    shift = np.minimum(p, width - 1).astype(U64)
    mask = (_lowmask(take, width) << shift) & _lowmask(np.full_like(take, width), 64)
    ins = (a.astype(U64) << shift)
    out = (b.astype(U64) & ~mask) | (ins & mask)
    return out.astype(ut)


_PRMT_MODES = {
    # byte i of the result takes byte sel(c, i) of {b, a} (c = the two low bits of c)
    "f4e": lambda c, i: c + i,
    "b4e": lambda c, i: (c + 8 - i) & 7,
    "rc8": lambda c, i: c,
    "ecl": lambda c, i: np.maximum(c, i),
    "ecr": lambda c, i: np.minimum(c, i),
    "rc16": lambda c, i: (c & 1) * 2 + (i & 1),
}


@_elementwise
def prmt(a, b, c, mode):
    src = (b.astype(U64) << U64(32)) | a.astype(U64)
    c = c.astype(I64)
    out = np.zeros(np.broadcast(src, c).shape, U64)
    for i in range(4):
        if mode is None:
            sel = (c >> (4 * i)) & 0xF
        else:
            sel = _PRMT_MODES[mode](c & 3, i) & 7
        byte = (src >> ((sel & 7) * 8).astype(U64)) & U64(0xFF)
        if mode is None:
            sign = (byte & U64(0x80)) != 0
            byte = np.where((sel & 8) != 0, np.where(sign, U64(0xFF), U64(0)), byte)
        out |= byte << U64(8 * i)
    return out.astype(U32)


@_elementwise
def shf(a, b, n, left, wrap):
    """Funnel shift of the 64-bit value b:a (b high) by n (mod 32 or clamped to 32)."""
    n = n.astype(U64)
    n = n & U64(31) if wrap else np.minimum(n, U64(32))
    v = (b.astype(U64) << U64(32)) | a.astype(U64)
    r = (v << n) >> U64(32) if left else v >> n
    return (r & U64(0xFFFFFFFF)).astype(U32)


def _s24(x):
    x = x.astype(I64) & 0xFFFFFF
    return np.where(x >= 0x800000, x - 0x1000000, x)


@_elementwise
def mul24(a, b, hi, signed):
    if signed:
        p = _s24(a) * _s24(b)
    else:
        p = (a.astype(I64) & 0xFFFFFF) * (b.astype(I64) & 0xFFFFFF)
    if hi:
        p = p >> 16
    return (p & 0xFFFFFFFF).astype(U32)


@_elementwise
def sad(a, b, c):
    d = np.where(a > b, a - b, b - a)          # wraps correctly in the unsigned view
    ut = numerics.UINT[a.dtype.itemsize]
    return (d.view(ut) + c.view(ut))


@_elementwise
def dp4a(a, b, c, a_signed, b_signed):
    def parts(x, signed):
        by = ((x.astype(U64)[..., None] >> (np.arange(4, dtype=U64) * U64(8))) & U64(0xFF)).astype(I64)
        return np.where(by >= 128, by - 256, by) if signed else by
    s = (parts(a, a_signed) * parts(b, b_signed)).sum(axis=-1)
    return ((s + c.astype(I64)) & 0xFFFFFFFF).astype(U32)


@_elementwise
def dp2a(a, b, c, a_signed, b_signed, hi):
    h = ((a.astype(U64)[..., None] >> np.array([0, 16], dtype=U64)) & U64(0xFFFF)).astype(I64)
    if a_signed:
        h = np.where(h >= 32768, h - 65536, h)
    shifts = np.array([16, 24] if hi else [0, 8], dtype=U64)
    by = ((b.astype(U64)[..., None] >> shifts) & U64(0xFF)).astype(I64)
    if b_signed:
        by = np.where(by >= 128, by - 256, by)
    s = (h * by).sum(axis=-1)
    return ((s + c.astype(I64)) & 0xFFFFFFFF).astype(U32)


provide(**{
    "_popc": popc, "_clz": clz, "_brev": brev, "_bfind": bfind, "_fns": fns, "_bfe": bfe,
    "_bfi": bfi, "_prmt": prmt, "_shf": shf, "_mul24": mul24, "_sad": sad, "_dp4a": dp4a,
    "_dp2a": dp2a,
})

# --- emitters --------------------------------------------------------------------------

def _ut(t):
    return f"u{TYPES[t][0] * 8}"


def emit_popc_clz_brev(g, ins):
    m = Mods(ins)
    t = m.one_type({"b32", "b64"})
    m.done()
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    x = g.read(ins, a, _ut(t))
    fn = {"popc": "_popc", "clz": "_clz", "brev": "_brev"}[ins.opcode]
    g.write(ins, d, f"{fn}({x})", _ut(t) if ins.opcode == "brev" else "u32", guard)


def emit_bfind(g, ins):
    m = Mods(ins)
    shiftamt = bool(m.take("shiftamt"))
    t = m.one_type({"u32", "u64", "s32", "s64"})
    m.done()
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    g.write(ins, d, f"_bfind({g.read(ins, a, t)}, {TYPES[t][1] == 's'}, {shiftamt})", "u32", guard)


def emit_fns(g, ins):
    m = Mods(ins)
    m.one_type({"b32"})
    m.done()
    d, mask, base, off = operands(ins, 4)
    guard = g.guard(ins)
    expr = f"_fns({g.read(ins, mask, 'u32')}, {g.read(ins, base, 's32')}, {g.read(ins, off, 's32')})"
    g.write(ins, d, expr, "u32", guard)


def emit_bfe(g, ins):
    m = Mods(ins)
    t = m.one_type({"u32", "u64", "s32", "s64"})
    m.done()
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    expr = (f"_bfe({g.read(ins, a, t)}, {g.read(ins, b, 'u32')}, {g.read(ins, c, 'u32')}, "
            f"{TYPES[t][1] == 's'})")
    g.write(ins, d, expr, t, guard)


def emit_bfi(g, ins):
    m = Mods(ins)
    t = m.one_type({"b32", "b64"})
    m.done()
    d, a, b, c, n = operands(ins, 5)
    guard = g.guard(ins)
    ut = _ut(t)
    expr = (f"_bfi({g.read(ins, a, ut)}, {g.read(ins, b, ut)}, {g.read(ins, c, 'u32')}, "
            f"{g.read(ins, n, 'u32')})")
    g.write(ins, d, expr, ut, guard)


def emit_prmt(g, ins):
    m = Mods(ins)
    mode = m.take(*_PRMT_MODES)
    m.one_type({"b32"})
    m.done()
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    expr = (f"_prmt({g.read(ins, a, 'u32')}, {g.read(ins, b, 'u32')}, "
            f"{g.read(ins, c, 'u32')}, {mode!r})")
    g.write(ins, d, expr, "u32", guard)


def emit_lop3(g, ins):
    m = Mods(ins)
    m.one_type({"b32"})
    m.done()
    if len(ins.operands) != 5 or isinstance(ins.operands[0], PredPair):
        raise unsupported(ins, "the predicate form of lop3")
    d, a, b, c, lut = ins.operands
    if not isinstance(lut, Imm) or lut.is_float or not 0 <= lut.value <= 255:
        raise PtxError(ins.line, f"lop3 needs an 8-bit immediate truth table: {ins.text}")
    guard = g.guard(ins)
    x, y, z = (g.read(ins, o, "u32") for o in (a, b, c))
    # bit i of immLut is F(a, b, c) for a = bit 2 of i, b = bit 1, c = bit 0
    # (the ISA's ta = 0xF0, tb = 0xCC, tc = 0xAA construction)
    terms = []
    for i in range(8):
        if lut.value >> i & 1:
            terms.append("(" + " & ".join(
                (v if i >> s & 1 else f"~{v}") for v, s in ((x, 2), (y, 1), (z, 0))) + ")")
    if not terms:
        expr = f"({x} & {g.const(U32(0))})"
    elif len(terms) == 8:
        expr = f"({x} | ~{x})"
    else:
        expr = "(" + " | ".join(terms) + ")"
    g.write(ins, d, expr, "u32", guard)


def emit_shf(g, ins):
    m = Mods(ins)
    direction = m.take("l", "r")
    mode = m.take("wrap", "clamp")
    m.one_type({"b32"})
    m.done()
    if direction is None or mode is None:
        raise PtxError(ins.line, f"shf needs .l/.r and .wrap/.clamp: {ins.text}")
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    expr = (f"_shf({g.read(ins, a, 'u32')}, {g.read(ins, b, 'u32')}, {g.read(ins, c, 'u32')}, "
            f"{direction == 'l'}, {mode == 'wrap'})")
    g.write(ins, d, expr, "u32", guard)


def emit_mul24(g, ins):
    m = Mods(ins)
    hi = m.take("hi", "lo")
    if m.take("sat"):
        raise unsupported(ins, ".sat")
    t = m.one_type({"u32", "s32"})
    m.done()
    if hi is None:
        raise PtxError(ins.line, f"{ins.opcode} needs .lo or .hi: {ins.text}")
    ops = operands(ins, 4 if ins.opcode == "mad24" else 3)
    guard = g.guard(ins)
    expr = (f"_mul24({g.read(ins, ops[1], 'u32')}, {g.read(ins, ops[2], 'u32')}, "
            f"{hi == 'hi'}, {t == 's32'})")
    if ins.opcode == "mad24":
        expr = f"({expr} + {g.read(ins, ops[3], 'u32')})"
    g.write(ins, ops[0], expr, "u32", guard)


def emit_sad(g, ins):
    m = Mods(ins)
    t = m.one_type(INT_TYPES)
    m.done()
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    g.write(ins, d, f"_sad({g.read(ins, a, t)}, {g.read(ins, b, t)}, {g.read(ins, c, t)})",
            _ut(t), guard)


def emit_dp(g, ins):
    m = Mods(ins)
    half = m.take("lo", "hi") if ins.opcode == "dp2a" else None
    ts = m.types()
    m.done()
    if len(ts) != 2 or not set(ts) <= {"u32", "s32"}:
        raise PtxError(ins.line, f"{ins.opcode} needs two of .u32/.s32: {ins.text}")
    if ins.opcode == "dp2a" and half is None:
        raise PtxError(ins.line, f"dp2a needs .lo or .hi: {ins.text}")
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    sa, sb = ts[0] == "s32", ts[1] == "s32"
    ct = "s32" if sa or sb else "u32"
    x, y, z = g.read(ins, a, "u32"), g.read(ins, b, "u32"), g.read(ins, c, ct)
    if ins.opcode == "dp4a":
        expr = f"_dp4a({x}, {y}, {z}, {sa}, {sb})"
    else:
        expr = f"_dp2a({x}, {y}, {z}, {sa}, {sb}, {half == 'hi'})"
    g.write(ins, d, expr, "u32", guard)


def emit_slct(g, ins):
    m = Mods(ins)
    ftz = m.take("ftz")
    ts = m.types()
    m.done()
    if len(ts) != 2 or ts[1] not in ("s32", "f32"):
        raise PtxError(ins.line, f"slct needs a destination type and .s32/.f32: {ins.text}")
    dt, ct = ts
    if dt not in INT_TYPES | BIT_TYPES | FLOAT_TYPES:
        raise unsupported(ins, f"type .{dt}")
    if ftz and ct != "f32":
        raise PtxError(ins.line, f".ftz applies to slct.f32 only: {ins.text}")
    d, a, b, c = operands(ins, 4)
    guard = g.guard(ins)
    ut = _ut(dt)
    z = g.read(ins, c, ct)
    if ftz:
        z = f"_flush({z})"
    zero = g.const(np.float32(0) if ct == "f32" else np.int32(0))
    expr = f"_select({z} >= {zero}, {g.read(ins, a, ut)}, {g.read(ins, b, ut)})"
    g.write(ins, d, expr, ut, guard)


# --- lop3.{and,or} d|p, a, b, c, immLut, q (sm_90 predicate form) ------------------------

def lut3(lut: int, a, b, c):
    """lop3's function of each bit of a, b, c: bit i of `lut` for a = bit 2 of i, b = bit 1,
    c = bit 0 (the ISA's 0xF0, 0xCC, 0xAA construction)."""
    a, b, c = (np.asarray(x, U32) for x in (a, b, c))
    d = np.zeros(np.broadcast(a, b, c).shape, U32)
    for i in range(8):
        if lut >> i & 1:
            d |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return d


def lop3_bool(lut: int, boolop: str, a, b, c, q):
    d = lut3(lut, a, b, c)
    t = d != 0
    return d, (t & q) if boolop == "and" else (t | q)


provide(_lop3_bool=lop3_bool)


def emit_lop3_bool(g, ins):
    m = Mods(ins)
    boolop = m.take("and", "or")
    m.one_type({"b32"})
    m.done()
    dp, a, b, c, lut, q = operands(ins, 6)
    if not isinstance(dp, PredPair) or dp.q is None:
        raise PtxError(ins.line, f"lop3.{boolop} takes d|p as its destination: {ins.text}")
    if not isinstance(lut, Imm) or lut.is_float or not 0 <= lut.value <= 255:
        raise PtxError(ins.line, f"lop3 needs an 8-bit immediate truth table: {ins.text}")
    d = None if isinstance(dp.p, Reg) and dp.p.name == "_" else dp.p     # the `_` sink
    guard = g.guard(ins)
    r = g.fresh()
    xs = ", ".join(g.read(ins, o, "u32") for o in (a, b, c))
    g.emit(f"{r} = _lop3_bool({lut.value}, {boolop!r}, {xs}, {g.read(ins, q, 'pred')})")
    g.write(ins, d, f"{r}[0]", "u32", guard)
    g.write(ins, dp.q, f"{r}[1]", "pred", guard)


FAMILY = family("bits", __name__)
FAMILY.declare("popc", "clz", "brev", emit=emit_popc_clz_brev)
for _opcode, _emitter in {"bfind": emit_bfind, "fns": emit_fns, "bfe": emit_bfe, "bfi": emit_bfi,
                          "prmt": emit_prmt, "shf": emit_shf, "mul24": emit_mul24,
                          "mad24": emit_mul24, "sad": emit_sad, "dp4a": emit_dp, "dp2a": emit_dp,
                          "slct": emit_slct}.items():
    FAMILY.declare(_opcode, emit=_emitter)
FAMILY.declare("lop3", emit={ANY: emit_lop3, BOOLOP: emit_lop3_bool})     # lop3.{and,or} d|p, ..., q

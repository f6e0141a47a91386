"""The shapes and types of mma.sync, their fragment layouts, and the arithmetic.

    mma.sync.aligned.SHAPE.row.col{.satfinite}.DTYPE.ATYPE.BTYPE.CTYPE{.bitop.popc} d, a, b, c;

Every shape up to sm_90 (m8n8k4 with .f16, four quad-pair products per warp with a layout
of their own, is in mma_quadpair.py):

    shape      A/B type       C/D type      target
    m8n8k4     f16            f16 or f32    sm_70
    m16n8k8    f16            f16 or f32    sm_75        m16n8k8   bf16, tf32   f32   sm_80
    m16n8k16   f16            f16 or f32    sm_80        m16n8k16  bf16         f32   sm_80
    m16n8k4    tf32           f32           sm_80        m8n8k4    f64          f64   sm_80
    m16n8k4, m16n8k8, m16n8k16  f64         f64           sm_90
    m8n8k16, m16n8k16, m16n8k32   s8/u8 (mixed)      s32 (.satfinite)     sm_75 / sm_80
    m8n8k32, m16n8k32, m16n8k64   s4/u4 (mixed)      s32 (.satfinite)     sm_75 / sm_80
    m8n8k128, m16n8k128, m16n8k256  b1 (.xor.popc or .and.popc)  s32      sm_75 / sm_80
    m16n8k32   e4m3/e5m2 (mixed)  f32 (PTX 8.4), f16 (PTX 8.7)   sm_89
    m16n8k16   e4m3/e5m2 (mixed)  f32 or f16 (PTX 8.7)           sm_89

.dtype = .ctype everywhere (as ptxas requires, though the ISA's syntax lists them apart)
but for m8n8k4 .f32.f16.f16.f16.

Layouts (PTX ISA, "Matrix Fragments for mma.mMnNkK"): with groupID g = lane/4 and
t = lane%4, a register holds `e` elements (f16/bf16: 2, s8/u8 and e4m3/e5m2: 4, s4/u4: 8,
b1: 32, tf32/f64: 1; the 8-bit floats have the 8-bit integers' layouts), element j of register r being element i = e*r + j, lowest bits first. The
ISA writes one formula per shape and type; all of them are instances of the two below
(the tests check them against the ISA's own formulas, written out per shape):

    m16n8:  A[g + 8*(r%2)][e*t + j + 4e*(r//2)]   B[e*t + j + 4e*r][g]   C[g + 8*(i//2)][2t + i%2]
    m8n8:   A[g][e*t + j]                         B[e*t + j][g]          C[g][2t + i]

Arithmetic. Floating point: the products are exact in float64 (f16, bf16 and tf32 have at
most 11 significant bits, e4m3 and e5m2 4 and 3: lowfloat.py decodes them) and are summed with C in float64, then rounded once to the
destination type (round to nearest even). A tensor core keeps fewer bits while it sums
(the accumulation order and width are not specified), so real results differ from these in
the last bits, by at most a few units of float32 rounding per term: code should be tested
against bounds proportionate to K, as the tests here are. tf32 operands are .b32 registers
of which the tensor core reads the top 19 bits; the low 13 mantissa bits are dropped (the
truncation the hardware applies; cvt.rna.tf32.f32 makes proper tf32 values). f64 sums
K + 1 float64 terms (each product and sum rounded to float64: within (K + 1) ulps of the
exact result, as the hardware's fused steps are). Integers are exact in int64; the sum
wraps to 32 bits, or with .satfinite is clamped to the int32 range. b1 counts the bits of
A's row AND/XOR B's column (popc) and adds C, wrapping.
"""
from __future__ import annotations

import functools

import numpy as np

from .lowfloat import decode

WARP = 32
PER_REG = {"f16": 2, "bf16": 2, "tf32": 1, "f64": 1, "s8": 4, "u8": 4, "s4": 8, "u4": 8, "b1": 32,
           "e4m3": 4, "e5m2": 4}
FAMILY = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "f64": "f64", "s8": "i8", "u8": "i8",
          "s4": "i4", "u4": "i4", "b1": "b1", "e4m3": "f8", "e5m2": "f8"}
# shape -> the A/B type families it has
SHAPES = {
    "m16n8k4": {"tf32", "f64"}, "m16n8k8": {"f16", "bf16", "tf32", "f64"},
    "m16n8k16": {"f16", "bf16", "f64", "i8", "f8"}, "m16n8k32": {"i8", "i4", "f8"}, "m16n8k64": {"i4"},
    "m16n8k128": {"b1"}, "m16n8k256": {"b1"},
    "m8n8k4": {"f16", "f64"}, "m8n8k16": {"i8"}, "m8n8k32": {"i4"}, "m8n8k128": {"b1"},
}
# (shape, family) pairs that need sm_90; the 8-bit floats need sm_89 (and PTX 8.4; their f16
# accumulators and m16n8k16 PTX 8.7); everything else here runs on sm_80 (and sm_90)
SM90 = {("m16n8k4", "f64"), ("m16n8k8", "f64"), ("m16n8k16", "f64")}


def dims(shape: str) -> tuple[int, int, int]:
    m, rest = shape[1:].split("n")
    n, k = rest.split("k")
    return int(m), int(n), int(k)


def register_counts(shape: str, atype: str, ctype: str) -> tuple[int, int, int]:
    """How many registers a, b and c (= d) take."""
    m, _, k = dims(shape)
    e = PER_REG[atype]
    if m == 8:
        a, b = 1, 1
    else:
        a, b = k // (2 * e), k // (4 * e)
    c = (m * 8 // WARP) // (2 if ctype == "f16" else 1)     # f16 accumulators come in pairs
    return a, b, c


# --- the layouts: (row, col) of element i of every lane, as (32, count) index arrays ----


def _lanes():
    lane = np.arange(WARP)[:, None]
    return lane // 4, lane % 4


@functools.cache
def a_layout(m: int, e: int, regs: int):
    g, t = _lanes()
    i = np.arange(e * regs)[None, :]
    r, j = i // e, i % e
    if m == 8:
        return np.broadcast_to(g, (WARP, e * regs)), e * t + j
    return g + 8 * (r % 2), e * t + j + 4 * e * (r // 2)


@functools.cache
def b_layout(e: int, regs: int):
    g, t = _lanes()
    i = np.arange(e * regs)[None, :]
    r, j = i // e, i % e
    return e * t + j + 4 * e * r, np.broadcast_to(g, (WARP, e * regs))


@functools.cache
def c_layout(m: int):
    g, t = _lanes()
    if m == 8:
        i = np.arange(2)[None, :]
        return np.broadcast_to(g, (WARP, 2)), 2 * t + i
    i = np.arange(4)[None, :]
    return g + 8 * (i // 2), 2 * t + i % 2


# --- registers to element values -------------------------------------------------------


def _lanes_of(reg, n: int, dtype):
    return np.broadcast_to(np.asarray(reg, dtype), (n,))


def elements(regs, kind: str, n: int):
    """The elements of `regs` (one array per register) as an (n, count) array: float64 for
    the float types, int64 for the integer and bit types; element i = e*r + j."""
    if kind == "f64":
        return np.stack([_lanes_of(r, n, np.float64) for r in regs], axis=1)
    words = np.stack([_lanes_of(r, n, np.uint32) for r in regs], axis=1)       # (n, regs)
    if kind in ("f16", "bf16"):           # a little-endian word is its (low, high) halves
        halves = words.view(np.uint16)
        if kind == "f16":
            return halves.view(np.float16).astype(np.float64)
        return (halves.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    e = PER_REG[kind]
    bits = 32 // e
    shifts = (np.arange(e, dtype=np.uint32) * bits)[None, None, :]
    raw = ((words[:, :, None] >> shifts) & np.uint32((1 << bits) - 1)).reshape(n, -1)
    if kind in ("e4m3", "e5m2"):
        return decode(raw, kind)
    if kind == "tf32":
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    val = raw.astype(np.int64)
    if kind in ("s8", "s4"):
        val = np.where(val >= 1 << (bits - 1), val - (1 << bits), val)
    return val


def accumulator(regs, ctype: str, n: int):
    """C's elements as an (n, count) array (float64 or int64)."""
    if ctype == "f16":
        return elements(regs, "f16", n)
    if ctype == "f32":
        return np.stack([_lanes_of(r, n, np.float32) for r in regs], axis=1).astype(np.float64)
    if ctype == "f64":
        return np.stack([_lanes_of(r, n, np.float64) for r in regs], axis=1)
    return np.stack([_lanes_of(r, n, np.int32) for r in regs], axis=1).astype(np.int64)


@functools.cache
def _order(layout_fn, args, ncols: int):
    """For a fragment layout that holds every element of its matrix once: the fragment
    slot (lane*count + i) of each matrix element in row-major order."""
    rows, cols = layout_fn(*args)
    flat = (rows * ncols + cols).reshape(-1)
    if np.unique(flat).size != flat.size:
        raise AssertionError(f"{layout_fn.__name__}{args}: a fragment holds an element twice")
    return np.argsort(flat)


def _gather(vals, order, shape, dtype):
    """Per-warp matrices (warps, rows, cols) from per-lane elements (n, count)."""
    warps = vals.shape[0] // WARP
    return np.take(vals.reshape(warps, -1), order, axis=1).reshape(warps, *shape).astype(dtype, copy=False)


def _product(A, B, Cm, kinds, opts):
    atype, btype, ctype = kinds
    if ctype != "s32":
        with np.errstate(all="ignore"):
            return A @ B + Cm
    if atype == "b1":
        if opts.get("bitop") == "and":
            counts = A @ B
        else:                                           # popc(a xor b) = a(1-b) + (1-a)b
            counts = A @ (1 - B) + (1 - A) @ B
        return Cm + counts
    return A @ B + Cm


def _to_dtype(D, ctype: str, satfinite: bool):
    if ctype == "s32":
        if satfinite:
            D = np.clip(D, -2**31, 2**31 - 1)
        return (D & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    with np.errstate(all="ignore"):
        return D.astype({"f32": np.float32, "f16": np.float16, "f64": np.float64}[ctype])


def round_to(D, ctype: str, satfinite: bool):
    """Exact (float64 / int64) sums to the C/D type: rounded once, wrapped or clamped."""
    return _to_dtype(D, ctype, satfinite)


def multiply(A, B, Cm, kinds, opts):
    """D = A B + C on exact (float64 / int64) matrices, rounded once to the C/D type: the
    arithmetic of mma, for wmma too."""
    return _to_dtype(_product(A, B, Cm, kinds, opts), kinds[2], bool(opts.get("satfinite")))


def exact_dtype(ctype: str):
    return np.int64 if ctype == "s32" else np.float64


def a_matrix(regs, atype: str, n: int, m: int, k: int, dtype):
    """Every warp's m x k A (warps, m, k) from its fragments."""
    order = _order(a_layout, (m, PER_REG[atype], len(regs)), k)
    return _gather(elements(regs, atype, n), order, (m, k), dtype)


def b_matrix(regs, btype: str, n: int, k: int, nn: int, dtype):
    """Every warp's k x n B (warps, k, n) from its fragments."""
    return _gather(elements(regs, btype, n), _order(b_layout, (PER_REG[btype], len(regs)), nn), (k, nn), dtype)


def c_matrix(regs, ctype: str, n: int, m: int, nn: int, dtype):
    """Every warp's m x n C (warps, m, n) from its fragments."""
    return _gather(accumulator(regs, ctype, n), _order(c_layout, (m,), nn), (m, nn), dtype)


def d_registers(D, ctype: str, n: int, m: int, nn: int):
    """The registers of d (one array each) holding D (warps, m, n): float32 / float64 /
    int32 values, or for f16 accumulators uint32 pairs."""
    rows, cols = c_layout(m)
    vals = np.take(D.reshape(D.shape[0], -1), (rows * nn + cols).reshape(-1), axis=1).reshape(n, -1)
    if ctype == "f16":
        bits = vals.view(np.uint16).astype(np.uint32)
        return [bits[:, 2 * r] | (bits[:, 2 * r + 1] << 16) for r in range(vals.shape[1] // 2)]
    return [np.ascontiguousarray(vals[:, i]) for i in range(vals.shape[1])]


def mma(n: int, shape: str, kinds, a_regs, b_regs, c_regs, opts):
    """D = A B + C for every warp of `n` threads; returns d's registers (see d_registers)."""
    m, nn, k = dims(shape)
    atype, btype, ctype = kinds
    dtype = exact_dtype(ctype)
    A = a_matrix(a_regs, atype, n, m, k, dtype)
    B = b_matrix(b_regs, btype, n, k, nn, dtype)
    Cm = c_matrix(c_regs, ctype, n, m, nn, dtype)
    return d_registers(multiply(A, B, Cm, kinds, opts), ctype, n, m, nn)

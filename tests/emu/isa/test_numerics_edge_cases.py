"""Edge cases of the emulated GPU's arithmetic: every rounding mode at infinities, overflow
and exact zeros, and instructions whose operands are all immediates (the companion of
test_engine_edge_cases.py).

References are exact rationals (float_reference.py) and Python integers, independent of
numpy and of lowlevel; inputs are random where they can be (the seed is printed on
failure), outputs poisoned.
"""
import itertools

import numpy as np
import pytest

from helpers import float_reference as fr
from helpers.emu_engine import Buf, launch
from lowlevel.emu.engine.decode import load_ptx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HEADER90 = ".version 8.0\n.target sm_90\n.address_size 64\n"
WARP = 32


# --- 2. rounding modes at infinities and overflow ------------------------------------------

BITS_NP = {16: np.uint16, 32: np.uint32, 64: np.uint64}
REG = {"f16": "b16", "bf16": "b16", "f32": "f32", "f64": "f64", "u32": "u32", "s32": "s32",
       "u64": "u64", "s64": "s64"}
LDST = {"f16": "b16", "bf16": "b16", "f32": "f32", "f64": "f64", "u32": "u32", "s32": "s32",
        "u64": "u64", "s64": "s64"}
WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "u32": 32, "s32": 32, "u64": 64, "s64": 64}


def elementwise_kernel(instr, in_types, out_type):
    """A kernel running `instr` (operands %d, %a0, %a1, ...) once per element of raw-bit
    input arrays, storing %d."""
    n_in = len(in_types)
    params = ", ".join([f".param .u64 p{i}" for i in range(n_in)] + [".param .u64 po", ".param .u32 n"])
    decl = "".join(f"  .reg .{REG[t]} %a{i};\n" for i, t in enumerate(in_types))
    loads = "".join(
        f"  ld.param.u64 %rd1, [p{i}];\n  mul.wide.u32 %rd2, %idx, {WIDTH[t] // 8};\n"
        f"  add.s64 %rd1, %rd1, %rd2;\n  ld.global.{LDST[t]} %a{i}, [%rd1];\n"
        for i, t in enumerate(in_types))
    return HEADER90 + f""".visible .entry k({params})
{{
  .reg .pred %q;
  .reg .b32 %idx, %nn, %t<3>;
  .reg .b64 %rd<3>;
  .reg .{REG[out_type]} %d;
{decl}  mov.u32 %t0, %tid.x;
  mov.u32 %t1, %ctaid.x;
  mov.u32 %t2, %ntid.x;
  mad.lo.u32 %idx, %t1, %t2, %t0;
  ld.param.u32 %nn, [n];
  setp.ge.u32 %q, %idx, %nn;
  @%q bra DONE;
{loads}  {instr}
  ld.param.u64 %rd1, [po];
  mul.wide.u32 %rd2, %idx, {WIDTH[out_type] // 8};
  add.s64 %rd1, %rd1, %rd2;
  st.global.{LDST[out_type]} [%rd1], %d;
DONE:
  ret;
}}
"""


def run_elementwise(mem, instr, in_types, out_type, inputs):
    mod = load_ptx(elementwise_kernel(instr, in_types, out_type))
    n = len(inputs[0])
    ins = [Buf(mem, np.asarray(x, BITS_NP[WIDTH[t]])) for x, t in zip(inputs, in_types)]
    out = Buf(mem, n=n, dtype=BITS_NP[WIDTH[out_type]], poison=np.uint8(0xA5))
    try:
        launch(mod, "k", -(-n // 128), 128, *ins, out, n, mem=mem)
        return out.read()
    finally:
        for b in ins + [out]:
            b.free()


N_SPECIAL = 25


def special_bits(name, rng, n_random=24):
    """Raw bits of the values where rounding goes wrong: zeros, infinities, NaN, the
    largest and smallest numbers, values whose sums and products overflow, random ones."""
    f = fr.Fmt(name)
    top = f.encode_mag(0, f.max)
    mags = [0, top, f.inf(0), f.encode_mag(0, fr.Fraction(1)),
            f.encode_mag(0, fr.Fraction(3, 2)), f.encode_mag(0, fr.Fraction(2) ** f.emax),
            f.encode_mag(0, fr.Fraction(3, 2) * fr.Fraction(2) ** f.emax),
            f.encode_mag(0, fr.Fraction(2) ** (f.emax // 2 + 1)),
            f.encode_mag(0, fr.Fraction(2) ** f.emin), 1, top - 1,
            f.encode_mag(0, fr.Fraction((1 << f.p) - 1))]
    sign = 1 << (f.bits - 1)
    vals = mags + [m | sign for m in mags] + [f.inf(0) | 1]          # and a NaN
    assert len(vals) == N_SPECIAL
    vals += [int(x) for x in rng.integers(0, 1 << f.bits, n_random, dtype=np.uint64)]
    return vals


def _operands(vals, rng, k, n_fixed):
    """Columns of operands: every pair of vals (k = 2), or every triple of the first
    n_fixed (the special values) and random triples of all of them (k = 3)."""
    if k == 2:
        return [list(col) for col in zip(*itertools.product(vals, vals))]
    rows = list(itertools.product(vals[:n_fixed], repeat=3))
    rows += [tuple(vals[i] for i in r) for r in rng.integers(0, len(vals), (2000, 3))]
    return [list(col) for col in zip(*rows)]


REF = {"add": fr.add, "sub": lambda f, m, a, b: fr.add(f, m, a, fr.neg(b)), "mul": fr.mul,
       "fma": fr.fma, "div": fr.div, "sqrt": fr.sqrt,
       "rcp": lambda f, m, a: fr.div(f, m, fr.Fraction(1), a)}
ARITY = {"add": 2, "sub": 2, "mul": 2, "fma": 3, "div": 2, "sqrt": 1, "rcp": 1}
ARITH_CASES = [(op, t, mode) for op in ARITY for t in ("f32", "f64")
               for mode in ("rn", "rz", "rm", "rp")] + \
    [(op, t, "rn") for op in ("add", "sub", "mul", "fma") for t in ("f16", "bf16")]


def check_against(f, got, expected, inputs, what):
    bad = []
    for i, (g, e) in enumerate(zip(got.tolist(), expected)):
        ok = f.decode(g) == fr.NAN if e == fr.NAN else g == e
        if not ok:
            bad.append(f"{[hex(x[i]) for x in inputs]} -> {g:#x}, expected "
                       f"{e if e == fr.NAN else hex(e)}")
    assert not bad, f"{what}: {len(bad)} wrong, e.g. " + "; ".join(bad[:6])


@pytest.mark.parametrize("op,t,mode", ARITH_CASES)
def test_arithmetic_rounding_at_infinities_and_overflow(mem, rng, op, t, mode):
    f = fr.Fmt(t)
    k = ARITY[op]
    vals = special_bits(t, rng)
    inputs = [vals] if k == 1 else _operands(vals, rng, k, N_SPECIAL)
    ops = ", ".join(f"%a{i}" for i in range(k))
    got = run_elementwise(mem, f"{op}.{mode}.{t} %d, {ops};", [t] * k, t, inputs)
    expected = [REF[op](f, mode, *[f.decode(x[i]) for x in inputs]) for i in range(len(inputs[0]))]
    check_against(f, got, expected, inputs, f"{op}.{mode}.{t}")


INT_EDGES = {"u32": [0, 1, 65504, 65519, 65520, 70000, 2 ** 24 + 1, 2 ** 32 - 1],
             "s32": [0, 1, -1, 65520, -65520, -70000, 2 ** 31 - 1, -2 ** 31],
             "u64": [0, 1, 2 ** 64 - 1, 2 ** 63 + 1, 2 ** 53 + 1, 2 ** 40 + 3],
             "s64": [0, -1, -2 ** 63, 2 ** 63 - 1, -(2 ** 53 + 1), 2 ** 40 + 3]}
CVT_CASES = [(d, s, mode) for d, s in (("f32", "f64"), ("f16", "f32"), ("f16", "f64"),
                                       ("bf16", "f32"), ("bf16", "f64"), ("f16", "u32"),
                                       ("f16", "s32"), ("f16", "u64"), ("bf16", "s64"),
                                       ("f32", "u64"), ("f32", "s64"),
                                       ("f64", "u64"), ("f64", "s64"))
             for mode in ("rn", "rz", "rm", "rp")]


@pytest.mark.parametrize("dst,src,mode", CVT_CASES)
def test_conversion_rounding_at_infinities_and_overflow(mem, rng, dst, src, mode):
    f = fr.Fmt(dst)
    if src in INT_EDGES:
        signed = src[0] == "s"
        width = WIDTH[src]
        vals = INT_EDGES[src] + [int(x) - (1 << (width - 1)) * signed
                                 for x in rng.integers(0, 1 << width, 40, dtype=np.uint64)]
        bits = [v & ((1 << width) - 1) for v in vals]
        expected = [fr.convert(f, mode, v) for v in vals]
    else:
        bits = special_bits(src, rng, 60)
        expected = [fr.convert(f, mode, fr.Fmt(src).decode(b)) for b in bits]
    got = run_elementwise(mem, f"cvt.{mode}.{dst}.{src} %d, %a0;", [src], dst, [bits])
    check_against(f, got, expected, [bits], f"cvt.{mode}.{dst}.{src}")


# --- 3. instructions whose operands are all immediates ---------------------------------------

def _imm(t, bits):
    """A PTX immediate of float type t with these raw bits (or an integer literal)."""
    return {"f64": f"0d{bits:016X}", "f32": f"0f{bits:08X}"}.get(t, str(bits))


def _finite_bits(f, rng):
    while True:
        b = int(rng.integers(0, 1 << f.bits, dtype=np.uint64))
        if not isinstance(f.decode(b), (str, tuple)):
            return b


def immediate_cases(rng):
    """(instruction with %d destination and immediate operands, type of %d, expected
    bits): float results from exact rationals, integer ones from Python integers."""
    cases = []
    for t in ("f64", "f32"):
        f = fr.Fmt(t)
        for mode in ("rn", "rz", "rm", "rp"):
            a, b, c = (_finite_bits(f, rng) for _ in range(3))
            x, y, z = (f.decode(v) for v in (a, b, c))
            ia, ib, ic = (_imm(t, v) for v in (a, b, c))
            cases += [(f"fma.{mode}.{t} %d, {ia}, {ib}, {ic};", t, fr.fma(f, mode, x, y, z)),
                      (f"mad.{mode}.{t} %d, {ia}, {ib}, {ic};", t, fr.fma(f, mode, x, y, z)),
                      (f"add.{mode}.{t} %d, {ia}, {ib};", t, fr.add(f, mode, x, y)),
                      (f"mul.{mode}.{t} %d, {ia}, {ib};", t, fr.mul(f, mode, x, y)),
                      (f"div.{mode}.{t} %d, {ia}, {ib};", t, fr.div(f, mode, x, y)),
                      (f"sqrt.{mode}.{t} %d, {_imm(t, a & ~(1 << (f.bits - 1)))};", t,
                       fr.sqrt(f, mode, abs(x))),
                      (f"rcp.{mode}.{t} %d, {ib};", t, fr.div(f, mode, fr.Fraction(1), y))]
            if t == "f64":
                cases.append((f"cvt.{mode}.f32.f64 %d, {ia};", "f32", fr.convert(fr.Fmt("f32"), mode, x)))
    u, v, w = (int(x) for x in rng.integers(0, 1 << 32, 3, dtype=np.uint64))
    big, big2 = (int(x) for x in rng.integers(0, 1 << 63, 2, dtype=np.uint64))
    s = u - (1 << 32) if u >> 31 else u
    m32 = 0xFFFFFFFF
    cases += [(f"mul.hi.u64 %d, {big}, {big2};", "u64", (big * big2) >> 64),
              (f"mul.wide.u32 %d, {u}, {v};", "u64", u * v),
              (f"mad.lo.u32 %d, {u}, {v}, {w};", "u32", (u * v + w) & m32),
              (f"div.s32 %d, {s}, 7;", "s32", int(s / 7) & m32),
              (f"rem.s32 %d, {s}, 7;", "s32", (s - 7 * int(s / 7)) & m32),
              (f"popc.b32 %d, {u};", "u32", bin(u).count("1")),
              (f"brev.b32 %d, {u};", "u32", int(f"{u:032b}"[::-1], 2)),
              (f"bfe.u32 %d, {u}, 5, 9;", "u32", (u >> 5) & 0x1FF),
              (f"lop3.b32 %d, {u}, {v}, {w}, 0x96;", "u32", u ^ v ^ w),
              (f"shf.l.wrap.b32 %d, {u}, {v}, 8;", "u32", ((v << 8) | (u >> 24)) & m32),
              (f"sad.u32 %d, {u}, {v}, 1;", "u32", (abs(u - v) + 1) & m32),
              (f"add.sat.s32 %d, 2147483647, {u & 0xFFFF};", "s32", 2147483647),
              ("redux.sync.add.u32 %d, 5, 0xffffffff;", "u32", 5 * WARP),
              ("vote.sync.ballot.b32 %d, 1, 0xffffffff;", "u32", 0xFFFFFFFF),
              (f"shfl.sync.bfly.b32 %d, {u}, 3, 31, 0xffffffff;", "u32", u),
              (f"match.any.sync.b32 %d, {u}, 0xffffffff;", "u32", 0xFFFFFFFF)]
    return cases


def test_instructions_whose_operands_are_all_immediates(mem, rng):
    """A uniform immediate reaches numpy as a scalar, not an array: every instruction must
    take it (fma.rz.f64 with three immediates raised CUDA_ERROR_UNKNOWN)."""
    out = Buf(mem, n=WARP, dtype=np.uint64, poison=np.uint8(0xA5))
    wrong = []
    for instr, t, want in immediate_cases(rng):
        reg = REG.get(t, t)
        mod = load_ptx(HEADER90 + f""".visible .entry k(.param .u64 o)
{{
  .reg .{reg} %d;
  .reg .b32 %t;
  .reg .b64 %rd<3>;
  {instr}
  ld.param.u64 %rd1, [o];
  mov.u32 %t, %tid.x;
  mul.wide.u32 %rd2, %t, 8;
  add.s64 %rd1, %rd1, %rd2;
  st.global.{LDST[t]} [%rd1], %d;
  ret;
}}""")
        launch(mod, "k", 1, WARP, out, mem=mem)
        got = out.read() & np.uint64((1 << WIDTH[t]) - 1)
        f = fr.Fmt(t) if t in fr.FORMATS else None
        ok = (got == want).all() if want != fr.NAN else all(f.decode(int(g)) == fr.NAN for g in got)
        if not ok:
            wrong.append(f"{instr} gave {int(got[0]):#x}, expected {want if want == fr.NAN else hex(want)}")
    out.free()
    assert not wrong, "; ".join(wrong)

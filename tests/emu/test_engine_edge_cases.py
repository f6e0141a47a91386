"""Edge cases of the emulated GPU's PTX front end and engine: warp instructions with
per-lane member masks, every rounding mode at infinities and overflow, instructions whose
operands are all immediates, huge register declarations, broken fatbins, deeply nested
immediates, non-UTF-8 PTX, and loads wider than their kernel parameter.

References are independent: numpy over the lanes of each member mask, exact rationals
(float_reference.py) for rounding, what ptxas accepts or refuses for the front end. Inputs
are random where they can be (the seed is printed on failure), outputs poisoned.
"""
import ctypes
import itertools
import struct

import numpy as np
import pytest

import float_reference as fr
from conftest import poisoned
from cuda_c import load_compiled, nvcc_ptx
from engine_helpers import Buf, launch
from lowlevel import cuda
from lowlevel.emu.ptx_parser import load_ptx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HEADER90 = ".version 8.0\n.target sm_90\n.address_size 64\n"
WARP = 32


# --- 1. warp instructions honour each lane's member mask --------------------------------------

GROUP_OPS = [  # (instruction, output register); %v value, %m member mask, %pp predicate
    ("redux.sync.add.u32 %o0, %v, %m;", "add"), ("redux.sync.min.u32 %o1, %v, %m;", "umin"),
    ("redux.sync.max.s32 %o2, %v, %m;", "smax"), ("redux.sync.and.b32 %o3, %v, %m;", "and"),
    ("redux.sync.or.b32 %o4, %v, %m;", "or"), ("redux.sync.xor.b32 %o5, %v, %m;", "xor"),
    ("match.any.sync.b32 %o6, %v, %m;", "match.any"),
    ("match.all.sync.b32 %o7|%q1, %v, %m;\n  selp.u32 %o8, 1, 0, %q1;", "match.all"),
    ("vote.sync.ballot.b32 %o9, %pp, %m;", "ballot"),
    ("vote.sync.all.pred %q1, %pp, %m;\n  selp.u32 %o10, 1, 0, %q1;", "all"),
    ("vote.sync.any.pred %q1, %pp, %m;\n  selp.u32 %o11, 1, 0, %q1;", "any"),
    ("vote.sync.uni.pred %q1, %pp, %m;\n  selp.u32 %o12, 1, 0, %q1;", "uni"),
    ("shfl.sync.idx.b32 %o13, %v, %src, 31, %m;", "shfl"),
    ("bar.warp.sync %m;\n  activemask.b32 %o14;", "activemask"),
]
N_OUT = 15
GROUP_KERNEL = HEADER90 + f"""
.visible .entry w(.param .u64 pv, .param .u64 pm, .param .u64 pf, .param .u64 pout)
{{
  .reg .pred %q<3>, %pp;
  .reg .b32 %t<6>, %v, %m, %f, %src, %o<{N_OUT}>;
  .reg .b64 %rd<4>;
  mov.u32 %t0, %tid.x;
  mov.u32 %t1, %ctaid.x;
  mov.u32 %t2, %ntid.x;
  mad.lo.u32 %t3, %t1, %t2, %t0;
  mul.wide.u32 %rd1, %t3, 4;
  ld.param.u64 %rd2, [pv];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %v, [%rd2];
  ld.param.u64 %rd2, [pm];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %m, [%rd2];
  ld.param.u64 %rd2, [pf];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %f, [%rd2];
  and.b32 %t4, %f, 1;
  setp.ne.u32 %q2, %t4, 0;
  @%q2 ret;                              // these lanes exit (they may still be named)
  and.b32 %t4, %f, 2;
  setp.ne.u32 %pp, %t4, 0;
  shr.u32 %src, %f, 8;
  {chr(10).join("  " + ins for ins, _ in GROUP_OPS)}
  mul.wide.u32 %rd1, %t3, {4 * N_OUT};
  ld.param.u64 %rd3, [pout];
  add.s64 %rd3, %rd3, %rd1;
  {chr(10).join(f"  st.global.u32 [%rd3+{4 * i}], %o{i};" for i in range(N_OUT))}
  ret;
}}
"""


def group_reference(vals, masks, flags, block, lane_t):
    """What each output of GROUP_KERNEL is for thread lane_t (global index), by the PTX
    ISA: over the non-exited lanes of its own member mask."""
    tid = lane_t % block
    base = lane_t - tid % WARP                                   # lane 0 of the warp
    warp = [base + j for j in range(WARP) if tid - tid % WARP + j < block]
    live = [t for t in warp if not flags[t] & 1]
    members = [t for t in live if masks[lane_t] >> (t - base) & 1]
    v = [int(vals[t]) for t in members]
    s32 = [x - (1 << 32) if x >> 31 else x for x in v]
    same = [t for t in members if vals[t] == vals[lane_t]]
    pred = [t for t in members if flags[t] & 2]
    src = base + (int(flags[lane_t]) >> 8 & 31)
    def bits(ts):
        return sum(1 << (t - base) for t in ts)

    out = [sum(v) & 0xFFFFFFFF, min(v), max(s32) & 0xFFFFFFFF, np.bitwise_and.reduce(v),
           np.bitwise_or.reduce(v), np.bitwise_xor.reduce(v), bits(same),
           bits(members) if len(same) == len(members) else 0, int(len(same) == len(members)),
           bits(pred), int(len(pred) == len(members)), int(bool(pred)),
           int(len(pred) in (0, len(members))),
           # a source lane outside the mask (or exited) is undefined: the emulator gives
           # the reading lane's own value
           int(vals[src]) if src in members else int(vals[lane_t]), bits(live)]
    return [int(x) for x in out]


@pytest.mark.parametrize("block", [64, 80])
def test_warp_instructions_with_a_member_mask_per_group_of_lanes(mem, rng, block):
    """Lanes of a warp split into groups, each running the warp instructions with its own
    member mask (CUB's logical warps do this): each lane gets the result over its group."""
    grid = 2
    n = grid * block
    vals = rng.integers(0, 8, n).astype(np.uint32) * np.uint32(0x2492_4925)   # some repeat
    flags = (rng.random(n) < 0.2).astype(np.uint32) | ((rng.random(n) < 0.5) * 2).astype(np.uint32)
    flags |= (rng.integers(0, WARP, n).astype(np.uint32) << 8)
    masks = np.zeros(n, np.uint32)
    for cta in range(grid):
        for w0 in range(0, block, WARP):
            group = rng.integers(0, rng.integers(1, 5), WARP)         # padding lanes too
            for j in range(min(WARP, block - w0)):
                masks[cta * block + w0 + j] = sum(1 << k for k in range(WARP) if group[k] == group[j])
    out = Buf(mem, n=(n, N_OUT), dtype=np.uint32)
    bufs = [Buf(mem, vals), Buf(mem, masks), Buf(mem, flags)]
    try:
        launch(load_ptx(GROUP_KERNEL), "w", grid, block, *bufs, out, mem=mem)
        got = out.read()
    finally:
        for b in bufs + [out]:
            b.free()
    for t in range(n):
        if flags[t] & 1:
            assert (got[t] == 0xDEADBEEF).all()                      # exited: nothing stored
            continue
        want = group_reference(vals, masks, flags, block, t)
        for i, (_, name) in enumerate(GROUP_OPS):
            assert got[t, i] == want[i], (name, t, hex(int(masks[t])), hex(int(got[t, i])), hex(want[i]))
        assert got[t, 7:9].tolist() == want[7:9], ("match.all", t)


CUB_WARP_REDUCE = """
#include <cub/warp/warp_reduce.cuh>
template <int W, class T, class Op>
__device__ void reduce_into(const T* x, T* out, Op op) {
    using WR = cub::WarpReduce<T, W>;
    __shared__ typename WR::TempStorage tmp[32 / W];
    int t = threadIdx.x;
    out[t] = WR(tmp[(t % 32) / W]).Reduce(x[t], op);
}
extern "C" __global__ void max16(const int* x, int* out) { reduce_into<16>(x, out, cuda::maximum<>{}); }
extern "C" __global__ void min8(const unsigned* x, unsigned* out) { reduce_into<8>(x, out, cuda::minimum<>{}); }
extern "C" __global__ void sum4(const int* x, int* out) { reduce_into<4>(x, out, cuda::std::plus<>{}); }
extern "C" __global__ void xor16(const unsigned* x, unsigned* out) { reduce_into<16>(x, out, cuda::std::bit_xor<>{}); }
"""


def test_cub_logical_warp_reduce(driver, rng):
    """CUB's WarpReduce<T, 16/8/4> on sm_80 is redux.sync (or shfl) with the member mask
    of its logical warp, 0xFFFF << (lane & 16) and so on: each logical warp reduces alone."""
    ptx = nvcc_ptx(CUB_WARP_REDUCE, arch="sm_80")
    assert "redux.sync.max.s32" in ptx
    mod = load_compiled(ptx)
    n = 64
    cases = {"max16": (np.int32, 16, np.max, False), "min8": (np.uint32, 8, np.min, False),
             "sum4": (np.int32, 4, lambda a, axis: a.sum(axis, dtype=np.int32), False),
             "xor16": (np.uint32, 16, np.bitwise_xor.reduce, True)}
    for name, (dt, width, ref, lane0_only) in cases.items():
        x = rng.integers(-2 ** 31 if dt is np.int32 else 0, 2 ** 31, n).astype(dt)
        dx, dout = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(x.nbytes)
        cuda.memcpy_htod(dx, x)
        cuda.memcpy_htod(dout, poisoned(n, dt))
        mod.get_function(name).launch(1, n, (dx, dout))
        got = np.empty_like(x)
        cuda.memcpy_dtoh(got, dout)
        want = np.repeat(ref(x.reshape(-1, width), axis=1), width)
        keep = np.arange(n) % width == 0 if lane0_only else np.ones(n, bool)   # CUB: lane 0 only
        np.testing.assert_array_equal(got[keep], want[keep], err_msg=name)
        dx.free()
        dout.free()


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


# --- 4. huge register declarations --------------------------------------------------------------

def huge_registers_ptx(count):
    return HEADER90 + f""".visible .entry k(.param .u64 out, .param .u64 x)
{{
  .reg .b64 %rd<{count}>;
  .reg .b32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd{count - 1}, [x];
  {{                                     // a nested scope shadowing %r1
    .reg .b32 %r1;
    mov.u32 %r1, 7;
  }}
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd1, %rd1, %rd2;
  add.s64 %rd{count // 2}, %rd{count - 1}, %rd2;
  st.global.u64 [%rd1], %rd{count // 2};
  ret;
}}
"""


def test_a_huge_register_range_costs_nothing_until_used(driver, rng):
    """ptxas accepts `.reg .b64 %rd<100000000>;` (any count below 2^32): it must load at
    once, in little memory (it got the process killed), and run."""
    import time
    import tracemalloc
    x = int(rng.integers(0, 1 << 40))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        mod = cuda.Module.from_ptx(huge_registers_ptx(100_000_000))
        f = mod.get_function("k")
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if driver.kind == "emu":
        assert elapsed < 5 and peak < 64 << 20, (elapsed, peak)
    out = cuda.mem_alloc(8 * 64)
    cuda.memcpy_htod(out, poisoned(64, np.uint64))
    f.launch(1, 64, (out, x))
    got = np.empty(64, np.uint64)
    cuda.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, x + 8 * np.arange(64, dtype=np.uint64))
    out.free()


def test_a_register_count_of_2_to_the_32_is_refused_as_ptxas_does(driver):
    """ptxas: 'Constant overflow' for %rd<4294967296>; the driver's JIT refuses it."""
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(huge_registers_ptx(1 << 32))
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    if driver.kind == "emu":
        assert "line 6" in str(info.value) and "%rd<4294967296>" in str(info.value)


# --- 5. broken fatbins ----------------------------------------------------------------------------

FATBIN_MAGIC = 0xBA55ED50
SMALL_PTX = HEADER90 + ".visible .entry k()\n{\n  ret;\n}\n"


def fatbin(*entries) -> bytes:
    """A fatbin as nvcc lays it out: header, then (kind, arch, payload, flags, raw size)
    entries with 72-byte headers."""
    body = b""
    for kind, arch, payload, flags, raw in entries:
        head = bytearray(72)
        struct.pack_into("<HHIQ", head, 0, kind, 0x101, 72, len(payload))
        struct.pack_into("<I", head, 28, arch)
        struct.pack_into("<Q", head, 40, flags)
        struct.pack_into("<Q", head, 64, raw)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def good_fatbin() -> bytes:
    ptx = SMALL_PTX.encode() + b"\0"
    return fatbin((2, 90, b"\x7fELF" + bytes(60), 0, 0), (1, 80, ptx, 0, 0))


def load_refused(data: bytes) -> str:
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_fatbin(data)
    return info.value.name


def test_a_fatbin_magic_followed_by_garbage_is_an_invalid_image(driver, rng):
    for n in (0, 4, 12, 60, 500):
        garbage = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert load_refused(struct.pack("<I", FATBIN_MAGIC) + garbage) == "CUDA_ERROR_INVALID_IMAGE"
    cuda.Module.from_fatbin(good_fatbin()).get_function("k")          # the reference loads


def test_fatbin_reader_fuzz(driver, rng):
    """Truncated fatbins, entry sizes and header sizes (the offset of each payload) that do
    not add up, and flipped bytes: an error naming the image (or the PTX, or the GPU),
    never CUDA_ERROR_UNKNOWN; the reader never reads past what the header claims."""
    import lowlevel.emu.images as images
    emu_codes = {"CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_NO_BINARY_FOR_GPU"}
    good = good_fatbin()
    cases = []
    second = 16 + 72 + 64                             # the PTX entry's header
    for cut in sorted(set(rng.integers(16, len(good), 12).tolist()) | {16, 17, 16 + 71, second, len(good) - 1}):
        short = bytearray(good[:cut])                 # the header tells the truth: entries cut
        struct.pack_into("<Q", short, 8, cut - 16)
        # cut between entries: a valid fatbin without PTX (no image for the emulated GPU)
        whole = {"CUDA_ERROR_NO_BINARY_FOR_GPU"} if cut in (16, second) else {"CUDA_ERROR_INVALID_IMAGE"}
        cases.append((f"truncated at {cut}", bytes(short), whole))
    for at, fmt, value in [(16 + 8, "<Q", 1 << 40), (16 + 8, "<Q", 65), (second + 8, "<Q", 10 ** 6),
                           (16 + 4, "<I", 0), (16 + 4, "<I", 8), (second + 4, "<I", 1 << 20),
                           (second + 4, "<I", 70), (8, "<Q", 1 << 60), (4, "<H", 2), (6, "<H", 64)]:
        bad = bytearray(good)
        struct.pack_into(fmt, bad, at, value)
        cases.append((f"{fmt} {value} at {at}", bytes(bad), {"CUDA_ERROR_INVALID_IMAGE"}))
    for _ in range(40):                               # flipped bytes after the fatbin header
        bad = bytearray(good)
        for i in rng.integers(16, len(good), int(rng.integers(1, 4))):
            bad[i] ^= int(rng.integers(1, 256))
        cases.append(("flipped", bytes(bad), emu_codes))
    for what, data, codes in cases:
        if len(data) >= 16 and struct.unpack_from("<Q", data, 8)[0] + 16 > len(data):
            with pytest.raises(images.ImageError) as info:          # only as bytes: a
                images.ptx_from_fatbin(data, 90)                  # driver reads past them
            assert info.value.code_name == "CUDA_ERROR_INVALID_IMAGE", what
            continue
        try:
            cuda.Module.from_fatbin(data)
        except cuda.CudaError as e:
            assert e.name in codes, (what, e.name, str(e))


def test_a_zstd_entry_that_does_not_decompress_is_an_invalid_image(driver):
    zstandard = pytest.importorskip("zstandard")
    ptx = SMALL_PTX.encode() + b"\0"
    packed = zstandard.ZstdCompressor().compress(ptx)
    ok = fatbin((1, 80, packed, 0x8000, len(ptx)))
    cuda.Module.from_fatbin(ok).get_function("k")
    broken = fatbin((1, 80, packed[:len(packed) // 2] + bytes(8), 0x8000, len(ptx)))
    assert load_refused(broken) == "CUDA_ERROR_INVALID_IMAGE"


# --- 6. the PTX front end: nested parentheses, bytes that are not UTF-8, wide ld.param ---------

STORE_R1 = HEADER90 + """.visible .entry k(.param .u64 out)
{{
  .reg .u32 %r1;
  .reg .u64 %rd1;
  ld.param.u64 %rd1, [out];   // {comment}
  {code}
  st.global.u32 [%rd1], %r1;
  ret;
}}
"""


def run_store_r1(ptx) -> int:
    f = cuda.Module.from_ptx(ptx).get_function("k")
    out = cuda.mem_alloc(4)
    cuda.memcpy_htod(out, poisoned(1, np.uint32))
    f.launch(1, 1, (out,))
    got = np.empty(1, np.uint32)
    cuda.memcpy_dtoh(got, out)
    out.free()
    return int(got[0])


def test_an_immediate_in_thousands_of_parentheses_is_invalid_ptx_naming_the_line(driver):
    """ptxas folds `((((1))))` however deep; the emulator takes no constant expressions
    (it recursed until RecursionError, CUDA_ERROR_UNKNOWN): refused by line."""
    depth = 5000
    ptx = STORE_R1.format(comment="", code=f"mov.u32 %r1, {'(' * depth}1{')' * depth};")
    if driver.kind != "emu":
        assert run_store_r1(ptx) == 1
        return
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(ptx)
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "line 9" in info.value.log and "nested" in info.value.log


def test_bytes_that_are_not_utf8_load_inside_comments_only(driver, rng):
    """ptxas takes any bytes in a comment and refuses non-ASCII anywhere else (a string
    literal too): 'Unexpected non-ASCII character'."""
    v = int(rng.integers(0, 1 << 31))
    code = f"mov.u32 %r1, {v};"
    ptx = STORE_R1.format(comment="COMMENT", code=code).encode()
    comment = ptx.replace(b"COMMENT", b"caf\xe9 \xc3\x28 \xff")
    block = comment.replace(b"//", b"/* \x80\x80 */ //")
    assert run_store_r1(comment) == v and run_store_r1(block) == v
    for bad, line in ((comment.replace(b"%r1, ", b"%r1, \xe9"), 9),
                      (comment.replace(b".address_size 64", b'.address_size 64\n.file 1 "caf\xe9.cu"'), 4),
                      (comment.replace(b"ret;", "ret; é".encode()), 11)):
        with pytest.raises(cuda.CudaError) as info:
            cuda.Module.from_ptx(bad)
        assert info.value.name == "CUDA_ERROR_INVALID_PTX"
        if driver.kind == "emu":
            assert f"line {line}" in info.value.log and "non-ASCII" in info.value.log


WIDE_PARAM_PTX = HEADER90 + """.visible .entry k(.param .u64 out, .param .u16 a, .param .u32 b, .param .u16 c)
{
  .reg .b16 %h1;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [a];              // a, two bytes of padding, b
  st.global.u64 [%rd1], %rd2;
  ld.param.v2.u32 {%r1, %r2}, [a];
  st.global.v2.u32 [%rd1+8], {%r1, %r2};
  ld.param.u16 %h1, [b+2];             // the high half of b
  cvt.u32.u16 %r3, %h1;
  st.global.u32 [%rd1+16], %r3;
  ld.param.u64 %rd3, [c];              // c, then past the end of the parameters
  st.global.u64 [%rd1+24], %rd3;
  ret;
}
"""


def test_ld_param_wider_than_its_parameter_reads_the_bytes_that_follow(driver, rng):
    """ptxas takes ld.param.u64 from a .u16 parameter ('potential out of bound access',
    an info): the load reads the parameter buffer as it is, padding and the next
    parameter included."""
    f = cuda.Module.from_ptx(WIDE_PARAM_PTX).get_function("k")
    out = cuda.mem_alloc(32)
    cuda.memcpy_htod(out, poisoned(4, np.uint64))
    raw = bytearray(rng.integers(0, 256, 18, dtype=np.uint8).tobytes())   # padding random too
    struct.pack_into("<Q", raw, 0, out.ptr)
    buf = ctypes.create_string_buffer(bytes(raw), len(raw))
    size = ctypes.c_size_t(len(raw))
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
    driver.cuLaunchKernel(f.handle, 1, 1, 1, 1, 1, 1, 0, 0, None, extra)
    got = np.empty(4, np.uint64)
    cuda.memcpy_dtoh(got, out)
    out.free()
    word = int.from_bytes(raw[8:16], "little")
    assert int(got[0]) == word and int(got[1]) == word
    assert int(got[2]) & 0xFFFFFFFF == int.from_bytes(raw[14:16], "little")
    assert int(got[3]) & 0xFFFF == int.from_bytes(raw[16:18], "little")
    if driver.kind == "emu":                 # past the buffer: undefined, 0xFF here
        assert int(got[3]) >> 16 == (1 << 48) - 1

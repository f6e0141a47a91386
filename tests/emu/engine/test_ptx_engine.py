"""The PTX parser and execution engine of the emulated GPU, driven directly.

References are computed independently with numpy (float64 or exact rationals where
numerics matter); inputs are fresh random values each run (the seed is printed on
failure); outputs are poisoned before each kernel so unwritten elements show.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, POISON, PTX_NP, PTX_REG, Buf, launch
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError
from lowlevel.emu.engine.decode import load_ptx

# the numpy references compute with infinities and NaNs on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICE_MEMORY_BYTES = 1 << 28        # the size of the `mem` fixture (tests/conftest.py)


# --- helpers --------------------------------------------------------------------------

def elementwise(mem, body, inputs, out, extra_regs="", block=128):
    """Run `body` once per element. inputs: [(name, ptx type, numpy array)], each loaded
    into register %name; out: (name, ptx type) stored from register %name. Returns the
    output array."""
    n = len(inputs[0][2])
    params = ", ".join([f".param .u64 p_{nm}" for nm, _, _ in inputs] + [f".param .u64 p_{out[0]}",
                                                                      ".param .u32 n"])
    decl = "".join(f".reg .{PTX_REG[t]} %{nm};\n" for nm, t, _ in inputs)
    decl += f".reg .{PTX_REG[out[1]]} %{out[0]};\n"
    loads = ""
    for nm, t, _ in inputs:
        size = np.dtype(PTX_NP[t]).itemsize
        loads += (f"ld.param.u64 %rd1, [p_{nm}];\nmul.wide.u32 %rd2, %r4, {size};\n"
                  f"add.s64 %rd3, %rd1, %rd2;\nld.global.{t} %{nm}, [%rd3];\n")
    osize = np.dtype(PTX_NP[out[1]]).itemsize
    text = HEADER + f"""
.visible .entry k({params})
{{
  .reg .pred %q<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  {decl}
  {extra_regs}
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  ld.param.u32 %r5, [n];
  setp.ge.u32 %q1, %r4, %r5;
  @%q1 bra DONE;
  {loads}
  {body}
  ld.param.u64 %rd1, [p_{out[0]}];
  mul.wide.u32 %rd2, %r4, {osize};
  add.s64 %rd3, %rd1, %rd2;
  st.global.{out[1]} [%rd3], %{out[0]};
DONE:
  ret;
}}
"""
    mod = load_ptx(text)
    bufs = [Buf(mem, np.asarray(a, PTX_NP[t])) for _, t, a in inputs]
    obuf = Buf(mem, n=n, dtype=PTX_NP[out[1]])
    launch(mod, "k", -(-n // block), block, *bufs, obuf, n, mem=mem)
    result = obuf.read()
    for b in bufs + [obuf]:
        b.free()
    return result


def rand_bits(rng, n, dtype):
    dt = np.dtype(dtype)
    return rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt)


def interesting_ints(rng, n, dtype):
    info = np.iinfo(dtype)
    special = np.array([0, 1, 2, 3, -1 if info.min < 0 else info.max, info.min, info.max,
                        info.max - 1, info.min + 1, 7, 31, 32, 33, 63, 64], dtype=np.int64 if info.min < 0 else np.uint64)
    vals = rand_bits(rng, n, dtype)
    vals[:len(special)] = special.astype(dtype)
    small = rng.integers(-40 if info.min < 0 else 0, 40, n // 4)
    vals[len(special):len(special) + len(small)] = small.astype(dtype)
    return vals


def interesting_floats(rng, n, dtype):
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan,
                        1e-40, -1e-40, 3e38, -3e38, 2 ** 31, -2 ** 31, 2 ** 32, 4e9, 1e19, -1e19,
                        0.49999997, 2 ** 63, 2 ** 64], dtype=np.float64).astype(dtype)
    v[:len(special)] = special
    return v


# --- parser -----------------------------------------------------------------------------

def test_parse_module_params_and_attributes():
    text = """
// leading comment
.version 7.8
.target sm_86, texmode_independent
.address_size 64 /* block
comment */
.visible .entry struct_kernel(
    .param .u64 .ptr .global .align 16 p_out,
    .param .align 8 .b8 p_struct[24],
    .param .u8 p_flag,
    .param .f64 p_scale,
    .param .u16 p_short,
    .param .u32 p_n
)
.maxntid 128, 2, 1
.minnctapersm 4
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    .reg .pred %p;
    .reg .f32 %f1, %f2;
    .reg .f64 %fd<3>;
    ret;
}
.weak .entry second() .reqntid 64 { ret; }
"""
    mod = load_ptx(text)
    assert mod.version == (7, 8) and mod.target == "sm_86"
    k = mod.kernels["struct_kernel"]
    layout = [(p.name, p.type, p.size, p.align, p.offset) for p in k.params]
    assert layout == [
        ("p_out", "u64", 8, 8, 0),
        ("p_struct", "b8", 24, 8, 8),
        ("p_flag", "u8", 1, 1, 32),
        ("p_scale", "f64", 8, 8, 40),
        ("p_short", "u16", 2, 2, 48),
        ("p_n", "u32", 4, 4, 52),
    ]
    assert k.param_size == 56
    assert k.max_threads_per_block == 256
    assert k.num_regs == 10 + 2 * 4 + 2 + 2 * 3
    assert k.ptx_version == 78 and k.binary_version == 86
    assert k.shared_bytes == 0 and k.local_bytes == 0
    assert mod.kernels["second"].max_threads_per_block == 64
    assert mod.kernels["second"].params == [] and mod.kernels["second"].param_size == 0
    assert k.line == 7
    assert "struct_kernel" in mod.info_log() and "registers" in mod.info_log()
    assert mod.globals == []


@pytest.mark.parametrize("snippet, line, words", [
    ("  add.s32 %r1, %r2;\n", 8, ["add takes 3 operands"]),
    ("  mov.u32 %r1, %r99;\n", 8, ["undeclared register %r99"]),
    ("  add.s32 %r1, %r2, %r3\n  ret;\n", 9, ["expected ';'"]),
    ("  bra NOWHERE;\n", 8, ["undefined label NOWHERE"]),
    ("  add.s32 %r1, %r2, 0f3F800000;\n", 8, ["floating-point immediate"]),
    ("  ld.global.u32 %r1, [%rd1;\n", 8, ["expected ']'"]),
    ("  $ok: foo bar;\n", 8, ["instruction 'foo'"]),
    ("  add.s32 %r1, %r2, (%r3);\n", 8, ["expected a register or immediate"]),
])
def test_syntax_errors_name_the_line(snippet, line, words):
    text = HEADER + ".visible .entry k(.param .u64 a)\n{\n  .reg .b32 %r<4>;\n  .reg .b64 %rd<2>;\n" + snippet + "  ret;\n}\n"
    with pytest.raises(PtxError) as e:
        load_ptx(text)
    assert e.value.line == line, str(e.value)
    for w in words:
        assert w in str(e.value)


def test_version_and_target_errors():
    with pytest.raises(PtxError, match="version"):
        load_ptx(".version 5.0\n.target sm_80\n.address_size 64\n")
    with pytest.raises(PtxError, match="address_size 32"):
        load_ptx(".version 8.0\n.target sm_80\n.address_size 32\n")
    with pytest.raises(PtxError) as e:
        load_ptx(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() {\n ret;\n")
    assert "unterminated" in str(e.value)


@pytest.mark.parametrize("line_text, name", [
    (".global .align 4 .b8 gvar[128];", "gvar"),
    ("bar.arrive 1, 64;", "bar.arrive"),
    ("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%rd1], {%r1};", "stmatrix.sync.aligned.m8n8.x1"),
    ("elect %r1|%p1, -1;", "elect"),                          # .sync is mandatory
    ("shfl.bfly.b32 %r1, %r2, 1, 31;", "shfl.bfly.b32"),
    ("vote.any.pred %p1, %p1;", "vote.any.pred"),
    ("vmad.u32.u32.u32 %r1, %r2, %r3, %r1;", "vmad.u32.u32.u32"),   # not implemented
    ("vset2.u32.u32.lt %r1.h0, %r2, %r3, %r1;", "vset2.u32.u32.lt"),  # masks: not implemented
    ("@%p1 bar.sync 0;", "bar.sync"),
    ("cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f1;", "cvt.rn.satfinite.e4m3x2.f32"),
    ("brkpt;", "brkpt"),
    ("tex.2d.v4.f32.f32 {%f1, %f1, %f1, %f1}, [tex, {%f1, %f1}];", "tex.2d.v4.f32.f32"),
    ("call.uni foo, (%r1);", "call.uni"),
    ("mov.u32 %r1, %pm8;", "%pm8"),                           # the counters are %pm0..%pm7
    ("rem.f32 %f1, %f1, %f1;", "rem.f32"),
    (".local .align 4 .b8 stack[16] = {1, 2};", "stack"),
])
def test_unsupported_ptx_is_refused_at_load(line_text, name):
    text = HEADER + (".visible .entry k(.param .u64 a)\n{\n"
                     "  .reg .b32 %r<4>;\n  .reg .b64 %rd<2>;\n  .reg .pred %p<2>;\n"
                     "  .reg .f32 %f<2>;\n  .reg .b16 %h<2>;\n"
                     f"  {line_text}\n  ret;\n}}\n")
    with pytest.raises(PtxError) as e:
        load_ptx(text)
    assert e.value.line == 11, str(e.value)
    assert name in str(e.value)


def test_module_scope_variables_with_addresses_refused():
    # initializers holding addresses of other variables are not supported
    with pytest.raises(PtxError, match="table") as e:
        load_ptx(HEADER + ".global .align 4 .u32 x;\n"
                          ".global .align 8 .u64 table[1] = {generic(x)};\n"
                          ".visible .entry k() { ret; }\n")
    assert e.value.line == 5


# --- integer arithmetic ------------------------------------------------------------------

def _wrap(x, dtype):
    """Python ints -> dtype with two's complement wraparound."""
    bits = np.dtype(dtype).itemsize * 8
    u = np.array([int(v) & ((1 << bits) - 1) for v in x], dtype=object)
    return u.astype(np.uint64).astype(np.dtype(f"u{bits // 8}")).view(dtype)


@pytest.mark.parametrize("t", ["u16", "s16", "u32", "s32", "u64", "s64"])
def test_integer_add_sub_mul_mad(mem, rng, t):
    n = 700
    dt = PTX_NP[t]
    a, b, c = (interesting_ints(rng, n, dt) for _ in range(3))
    A, B, C = ([int(v) for v in x] for x in (a, b, c))
    bits = np.dtype(dt).itemsize * 8
    for body, ref in [
        (f"add.{t} %d, %a, %b;", [x + y for x, y in zip(A, B)]),
        (f"sub.{t} %d, %a, %b;", [x - y for x, y in zip(A, B)]),
        (f"mul.lo.{t} %d, %a, %b;", [x * y for x, y in zip(A, B)]),
        (f"mul.hi.{t} %d, %a, %b;", [(x * y) >> bits for x, y in zip(A, B)]),
        (f"mad.lo.{t} %d, %a, %b, %c;", [x * y + z for x, y, z in zip(A, B, C)]),
        (f"mad.hi.{t} %d, %a, %b, %c;", [((x * y) >> bits) + z for x, y, z in zip(A, B, C)]),
    ]:
        got = elementwise(mem, body, [("a", t, a), ("b", t, b), ("c", t, c)], ("d", t))
        np.testing.assert_array_equal(got, _wrap(ref, dt), err_msg=body)
    if bits < 64:
        wt = t[0] + str(bits * 2)
        wide = [x * y for x, y in zip(A, B)]
        got = elementwise(mem, f"mul.wide.{t} %d, %a, %b;", [("a", t, a), ("b", t, b)], ("d", wt))
        np.testing.assert_array_equal(got, _wrap(wide, PTX_NP[wt]))
        c2 = interesting_ints(rng, n, PTX_NP[wt])
        got = elementwise(mem, f"mad.wide.{t} %d, %a, %b, %c;",
                          [("a", t, a), ("b", t, b), ("c", wt, c2)], ("d", wt))
        np.testing.assert_array_equal(got, _wrap([w + int(z) for w, z in zip(wide, c2)], PTX_NP[wt]))


def test_add_sat_s32(mem, rng):
    a = interesting_ints(rng, 500, np.int32)
    b = interesting_ints(rng, 500, np.int32)
    got = elementwise(mem, "add.sat.s32 %d, %a, %b;", [("a", "s32", a), ("b", "s32", b)], ("d", "s32"))
    ref = np.clip(a.astype(np.int64) + b, -2 ** 31, 2 ** 31 - 1).astype(np.int32)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("t", ["u16", "s16", "u32", "s32", "u64", "s64"])
def test_integer_div_rem_including_zero(mem, rng, t):
    dt = PTX_NP[t]
    n = 600
    a = interesting_ints(rng, n, dt)
    b = interesting_ints(rng, n, dt)
    b[::7] = 0
    info = np.iinfo(dt)
    if info.min < 0:
        a[1], b[1] = info.min, -1                 # overflow case wraps to INT_MIN
    bits = np.dtype(dt).itemsize * 8
    q, r = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0:
            # hardware behaviour (the ISA leaves it unspecified): |x|/0 = all ones with
            # the sign of x applied; x % 0 = x
            ones = (1 << bits) - 1
            q.append(ones if x >= 0 else -ones)
            r.append(x)
        else:
            qq = abs(x) // abs(y)
            qq = qq if (x < 0) == (y < 0) else -qq
            q.append(qq)
            r.append(x - qq * y)
    got = elementwise(mem, f"div.{t} %d, %a, %b;", [("a", t, a), ("b", t, b)], ("d", t))
    np.testing.assert_array_equal(got, _wrap(q, dt))
    got = elementwise(mem, f"rem.{t} %d, %a, %b;", [("a", t, a), ("b", t, b)], ("d", t))
    np.testing.assert_array_equal(got, _wrap(r, dt))
    if info.min == 0:
        assert (elementwise(mem, f"div.{t} %d, %a, 0;", [("a", t, a)], ("d", t)) == info.max).all()


@pytest.mark.parametrize("t", ["s32", "u32", "s64", "u64", "s16"])
def test_abs_neg_min_max_logic(mem, rng, t):
    dt = PTX_NP[t]
    bt = "b" + t[1:]
    a, b = interesting_ints(rng, 400, dt), interesting_ints(rng, 400, dt)
    ins = [("a", t, a), ("b", t, b)]
    A, B = a.tolist(), b.tolist()
    cases = [
        (f"min.{t} %d, %a, %b;", [min(x, y) for x, y in zip(A, B)]),
        (f"max.{t} %d, %a, %b;", [max(x, y) for x, y in zip(A, B)]),
        (f"and.{bt} %d, %a, %b;", [x & y for x, y in zip(A, B)]),
        (f"or.{bt} %d, %a, %b;", [x | y for x, y in zip(A, B)]),
        (f"xor.{bt} %d, %a, %b;", [x ^ y for x, y in zip(A, B)]),
        (f"not.{bt} %d, %a;", [~x for x in A]),
        (f"cnot.{bt} %d, %a;", [1 if x == 0 else 0 for x in A]),
    ]
    if t[0] == "s":
        cases += [(f"abs.{t} %d, %a;", [abs(x) for x in A]), (f"neg.{t} %d, %a;", [-x for x in A])]
    for body, ref in cases:
        got = elementwise(mem, body, ins, ("d", t))
        np.testing.assert_array_equal(got, _wrap(ref, dt), err_msg=body)


@pytest.mark.parametrize("t", ["b32", "u32", "s32", "b64", "s64", "u64", "b16", "s16"])
def test_shifts_clamp_amounts(mem, rng, t):
    dt = PTX_NP[t]
    bits = np.dtype(dt).itemsize * 8
    n = 400
    a = interesting_ints(rng, n, dt)
    amt = rng.integers(0, 3 * bits, n).astype(np.uint32)
    amt[:6] = [0, bits - 1, bits, bits + 1, 255, 0xFFFFFFFF]
    A = a.tolist()
    signed = t[0] == "s"
    shl = [(x << min(s, bits)) for x, s in zip(A, amt.tolist())]
    if signed:
        shr = [x >> min(s, bits) for x, s in zip(A, amt.tolist())]       # Python >> is arithmetic
    else:
        shr = [(x & ((1 << bits) - 1)) >> min(s, bits) for x, s in zip(A, amt.tolist())]
    for op, ref in (("shl", shl), ("shr", shr)):
        got = elementwise(mem, f"{op}.{t} %d, %a, %s;", [("a", t, a), ("s", "u32", amt)], ("d", t))
        np.testing.assert_array_equal(got, _wrap(ref, dt), err_msg=op)


# --- comparisons and selection ------------------------------------------------------------

def _float_cmp(op, x, y):
    unordered = math.isnan(x) or math.isnan(y)
    base = op.rstrip("u") if op not in ("num", "nan") else op
    if op == "num":
        return not unordered
    if op == "nan":
        return unordered
    res = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[base]
    if op.endswith("u"):
        return res or unordered
    return res and not unordered


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_setp_float_all_comparisons(mem, rng, t):
    dt = PTX_NP[t]
    n = 300
    a = interesting_floats(rng, n, dt)
    b = interesting_floats(rng, n, dt)
    b[::3] = a[::3]
    b[1::11] = np.nan
    for op in ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]:
        body = f"setp.{op}.{t} %p, %a, %b;\nselp.u32 %d, 1, 0, %p;"
        got = elementwise(mem, body, [("a", t, a), ("b", t, b)], ("d", "u32"), extra_regs=".reg .pred %p;")
        ref = [int(_float_cmp(op, float(x), float(y))) for x, y in zip(a, b)]
        np.testing.assert_array_equal(got, ref, err_msg=op)


@pytest.mark.parametrize("t", ["s32", "u32", "s64", "u64", "s16", "u16", "b32"])
def test_setp_integer_and_combined(mem, rng, t):
    dt = PTX_NP[t]
    n = 300
    a, b, c = interesting_ints(rng, n, dt), interesting_ints(rng, n, dt), interesting_ints(rng, n, dt)
    b[::4] = a[::4]
    ops = {"eq": "==", "ne": "!="}
    if t[0] != "b":
        ops.update({"lt": "<", "le": "<=", "gt": ">", "ge": ">="})
    if t[0] == "u":
        ops.update({"lo": "<", "ls": "<=", "hi": ">", "hs": ">="})
    A, B, Cc = a.tolist(), b.tolist(), c.tolist()
    for op, sym in ops.items():
        body = (f"setp.ne.{t} %x, %c, 0;\n"
                f"setp.{op}.and.{t} %p|%q, %a, %b, !%x;\n"
                "selp.u32 %d, 1, 0, %p;\nselp.u32 %e, 2, 0, %q;\nadd.u32 %d, %d, %e;")
        got = elementwise(mem, body, [("a", t, a), ("b", t, b), ("c", t, c)], ("d", "u32"),
                          extra_regs=".reg .pred %p, %q, %x;\n.reg .b32 %e;")
        cmp = [eval(f"{x} {sym} {y}") for x, y in zip(A, B)]
        ref = [int(r and z == 0) + 2 * int((not r) and z == 0) for r, z in zip(cmp, Cc)]
        np.testing.assert_array_equal(got, ref, err_msg=op)


def test_set_and_selp(mem, rng):
    a = interesting_floats(rng, 200, np.float32)
    b = interesting_floats(rng, 200, np.float32)
    got = elementwise(mem, "set.gtu.u32.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "u32"))
    ref = [0xFFFFFFFF if _float_cmp("gtu", float(x), float(y)) else 0 for x, y in zip(a, b)]
    np.testing.assert_array_equal(got, ref)
    got = elementwise(mem, "set.le.f32.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "f32"))
    np.testing.assert_array_equal(got, [1.0 if _float_cmp("le", float(x), float(y)) else 0.0
                                        for x, y in zip(a, b)])
    got = elementwise(mem, "setp.lt.f32 %p, %a, %b;\nselp.f32 %d, %a, %b, %p;",
                      [("a", "f32", a), ("b", "f32", b)], ("d", "f32"), extra_regs=".reg .pred %p;")
    ref = np.where(a < b, a, b)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


# --- floating point ----------------------------------------------------------------------

def _round_fraction(x: Fraction, dtype):
    """Correctly rounded (nearest even) value of an exact rational in dtype."""
    if dtype == np.float64:
        try:
            return np.float64(float(x))
        except OverflowError:
            return np.float64(math.inf if x > 0 else -math.inf)
    y = np.float32(float(x))           # maybe off by one ulp (double rounding)
    best = None
    for cand in (np.nextafter(y, np.float32(-np.inf)), y, np.nextafter(y, np.float32(np.inf))):
        if not np.isfinite(cand):
            continue
        err = abs(Fraction(float(cand)) - x)
        key = (err, int(np.array(cand).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    if best is None or abs(x) >= Fraction(2) ** 128 - Fraction(2) ** 103:
        return np.float32(math.inf if x > 0 else -math.inf)
    return best[1]


def _exact_fma(a, b, c, dtype):
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        if not all(map(math.isfinite, (x, y, z))):
            out.append(dtype(x) * dtype(y) + dtype(z))
            continue
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        if exact == 0:
            out.append(dtype(x) * dtype(y) + dtype(z))
        else:
            out.append(_round_fraction(exact, dtype))
    return np.array(out, dtype=dtype)


def _same_floats(got, ref):
    """Bit equality, except any NaN matches any NaN."""
    both_nan = np.isnan(got) & np.isnan(ref)
    bad = ~both_nan & (got.view(f"u{got.itemsize}") != ref.view(f"u{ref.itemsize}"))
    assert not bad.any(), f"{bad.sum()} mismatches, e.g. at {np.flatnonzero(bad)[:5]}: " \
                          f"got {got[bad][:5]} want {ref[bad][:5]}"


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_fma_single_rounding(mem, rng, t):
    dt = PTX_NP[t]
    n = 1500
    a = interesting_floats(rng, n, dt)
    b = interesting_floats(rng, n, dt)
    c = interesting_floats(rng, n, dt)
    # cancellation: c = -round(a*b) leaves exactly the rounding error of the product
    c[100:400] = -(a[100:400] * b[100:400])
    # near-ties: products of values with few low bits plus a tiny nudge
    mant = 24 if t == "f32" else 53
    k = rng.integers(1, 2 ** 10, 300)
    a[400:700] = (1 + k * 2.0 ** -12).astype(dt)
    b[400:700] = (1 + k * 2.0 ** -13).astype(dt)
    c[400:700] = (np.where(k % 2 == 0, 1, -1) * 2.0 ** (-mant - 20)).astype(dt)
    ref = _exact_fma(a, b, c, dt)
    for body in (f"fma.rn.{t} %d, %a, %b, %c;", f"mad.rn.{t} %d, %a, %b, %c;"):
        got = elementwise(mem, body, [("a", t, a), ("b", t, b), ("c", t, c)], ("d", t))
        _same_floats(got, ref)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_float_arithmetic_rn(mem, rng, t):
    dt = PTX_NP[t]
    n = 800
    a, b = interesting_floats(rng, n, dt), interesting_floats(rng, n, dt)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    ins = [("a", t, a), ("b", t, b)]
    cases = [
        (f"add.{t} %d, %a, %b;", a + b),
        (f"sub.rn.{t} %d, %a, %b;", a - b),
        (f"mul.{t} %d, %a, %b;", a * b),
        (f"div.rn.{t} %d, %a, %b;", a / b),
        (f"sqrt.rn.{t} %d, %a;", np.sqrt(a)),
        (f"rcp.rn.{t} %d, %a;", dt(1) / a),
        (f"abs.{t} %d, %a;", np.abs(a)),
        (f"neg.{t} %d, %a;", -a),
        (f"min.{t} %d, %a, %b;", np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b)))),
        (f"max.{t} %d, %a, %b;", np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b)))),
    ]
    if t == "f32":   # results of f32 ops are the exact result rounded once (f64 is exact enough)
        cases[0] = (cases[0][0], (fa + fb).astype(dt))
        cases[2] = (cases[2][0], (fa * fb).astype(dt))
    for body, ref in cases:
        got = elementwise(mem, body, ins, ("d", t))
        if "min" in body or "max" in body:
            np.testing.assert_array_equal(got, ref, err_msg=body)   # signed zeros may differ
        else:
            _same_floats(got, ref.astype(dt))
    # abs/neg flip only the sign bit, even of NaNs with payloads
    nan_payload = np.array([0x7FC12345, 0xFFC00001, 0x7F800001], np.uint32).view(np.float32)
    if t == "f32":
        got = elementwise(mem, "neg.f32 %d, %a;", [("a", "f32", nan_payload)], ("d", "f32"))
        np.testing.assert_array_equal(got.view(np.uint32), nan_payload.view(np.uint32) ^ 0x80000000)


def test_float_directed_rounding_add_mul(mem, rng):
    n = 600
    a = interesting_floats(rng, n, np.float32)
    b = interesting_floats(rng, n, np.float32)
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    for mode in ("rz", "rm", "rp", "rn"):
        for op, fn in (("add", lambda x, y: x + y), ("mul", lambda x, y: x * y)):
            got = elementwise(mem, f"{op}.{mode}.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "f32"))
            for x, y, gv in zip(a.tolist(), b.tolist(), got.tolist()):
                exact = fn(Fraction(x), Fraction(y))
                _check_directed(exact, gv, mode, np.float32, f"{op}.{mode}({x}, {y})")


def _directed_reference(exact: Fraction, mode, dtype):
    """The exact rational rounded to dtype in mode rn/rz/rm/rp (from first principles:
    the nearest value, then one step if it lies on the wrong side)."""
    y = _round_fraction(exact, dtype)
    if mode == "rn":
        return y
    def value(v):
        return Fraction(float(v)) if np.isfinite(v) else (Fraction(10) ** 400 if v > 0 else -Fraction(10) ** 400)
    down, up = dtype(-np.inf), dtype(np.inf)
    if mode == "rm" and value(y) > exact:
        y = np.nextafter(y, down)
    elif mode == "rp" and value(y) < exact:
        y = np.nextafter(y, up)
    elif mode == "rz" and abs(value(y)) > abs(exact):
        y = np.nextafter(y, dtype(0))
    return y


def _check_directed(exact, got, mode, dtype, what):
    want = _directed_reference(exact, mode, dtype)
    assert dtype(got) == want, f"{what}: got {got!r}, want {want!r}"


def test_ftz_and_sat(mem, rng):
    a = np.array([1e-40, -1e-40, 0.5, 2.0, -3.0, np.nan, 1.2e-38, 1e-39], np.float32)
    b = np.array([1.0, 1.0, 0.75, 1.0, 1.0, 1.0, 0.5, 0.0], np.float32)
    got = elementwise(mem, "mul.ftz.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "f32"))
    assert got[0] == 0 and not np.signbit(got[0]) and got[1] == 0 and np.signbit(got[1])
    assert got[6] == 0              # 6e-39 is subnormal: flushed
    got = elementwise(mem, "add.sat.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "f32"))
    np.testing.assert_array_equal(got, np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.5, 1e-39], np.float32))
    got = elementwise(mem, "add.f32 %d, %a, %b;", [("a", "f32", a), ("b", "f32", b)], ("d", "f32"))
    assert got[7] == np.float32(1e-39)       # no ftz: subnormals survive


def test_approximate_functions(mem, rng):
    x = rng.uniform(-10, 10, 500).astype(np.float32)
    pos = np.abs(x) + np.float32(0.01)
    checks = [
        ("sin.approx.f32 %d, %a;", x, np.sin(x.astype(np.float64))),
        ("cos.approx.ftz.f32 %d, %a;", x, np.cos(x.astype(np.float64))),
        ("ex2.approx.ftz.f32 %d, %a;", x, np.exp2(x.astype(np.float64))),
        ("lg2.approx.f32 %d, %a;", pos, np.log2(pos.astype(np.float64))),
        ("rsqrt.approx.f32 %d, %a;", pos, 1 / np.sqrt(pos.astype(np.float64))),
        ("rcp.approx.ftz.f32 %d, %a;", pos, 1 / pos.astype(np.float64)),
        ("div.approx.f32 %d, %a, %a;", pos, np.ones(500)),
        ("sqrt.approx.f32 %d, %a;", pos, np.sqrt(pos.astype(np.float64))),
    ]
    for body, inp, ref in checks:
        got = elementwise(mem, body, [("a", "f32", inp)], ("d", "f32"))
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6, err_msg=body)


# --- conversions ---------------------------------------------------------------------------

def test_cvt_integer_widths(mem, rng):
    a32 = interesting_ints(rng, 400, np.int32)
    A = a32.tolist()
    cases = [
        ("cvt.s64.s32 %d, %a;", "s32", "s64", A),
        ("cvt.u64.u32 %d, %a;", "u32", "u64", [x & 0xFFFFFFFF for x in A]),
        ("cvt.u16.u32 %d, %a;", "u32", "u16", [x & 0xFFFF for x in A]),
        ("cvt.s8.s32 %d, %a;", "s32", "s32", [((x & 0xFF) ^ 0x80) - 0x80 for x in A]),
        ("cvt.u8.u32 %d, %a;", "u32", "u32", [x & 0xFF for x in A]),
        ("cvt.sat.s16.s32 %d, %a;", "s32", "s16", [min(max(x, -32768), 32767) for x in A]),
        ("cvt.sat.u16.s32 %d, %a;", "s32", "u16", [min(max(x, 0), 65535) for x in A]),
        ("cvt.sat.u32.s32 %d, %a;", "s32", "u32", [max(x, 0) for x in A]),
        ("cvt.sat.s32.u32 %d, %a;", "u32", "s32", [min(x & 0xFFFFFFFF, 2 ** 31 - 1) for x in A]),
    ]
    for body, st, dt, ref in cases:
        if dt == "s32" and "s8" in body:
            ptx_body = "cvt.s8.s32 %t, %a;\ncvt.s32.s8 %d, %t;"
            got = elementwise(mem, ptx_body, [("a", st, a32.view(PTX_NP[st]))], ("d", dt), extra_regs=".reg .b16 %t;")
        elif "u8.u32" in body:
            got = elementwise(mem, "cvt.u8.u32 %t, %a;\ncvt.u32.u8 %d, %t;", [("a", st, a32.view(PTX_NP[st]))],
                              ("d", dt), extra_regs=".reg .b16 %t;")
        else:
            got = elementwise(mem, body, [("a", st, a32.view(PTX_NP[st]))], ("d", dt))
        np.testing.assert_array_equal(got, _wrap(ref, PTX_NP[dt]), err_msg=body)
    a64 = interesting_ints(rng, 300, np.uint64)
    got = elementwise(mem, "cvt.sat.s32.u64 %d, %a;", [("a", "u64", a64)], ("d", "s32"))
    np.testing.assert_array_equal(got, np.minimum(a64, 2 ** 31 - 1).astype(np.int32))
    got = elementwise(mem, "cvt.u32.u64 %d, %a;", [("a", "u64", a64)], ("d", "u32"))
    np.testing.assert_array_equal(got, (a64 & 0xFFFFFFFF).astype(np.uint32))


@pytest.mark.parametrize("src", ["f32", "f64"])
@pytest.mark.parametrize("dst", ["s32", "u32", "s64", "u64", "s16", "u16"])
def test_cvt_float_to_int_rounding_saturation_nan(mem, rng, src, dst):
    x = interesting_floats(rng, 300, PTX_NP[src])
    x[30:60] = rng.uniform(-5, 5, 30).round(1).astype(PTX_NP[src])      # halves and fractions
    x[60:64] = np.array([0.5, 1.5, 2.5, -2.5])
    info = np.iinfo(PTX_NP[dst])
    rounders = {"rni": lambda v: _round_half_even(v), "rzi": math.trunc,
                "rmi": math.floor, "rpi": math.ceil}
    for rnd, fn in rounders.items():
        got = elementwise(mem, f"cvt.{rnd}.{dst}.{src} %d, %a;", [("a", src, x)], ("d", dst))
        ref = []
        for v in x.tolist():
            if math.isnan(v):
                ref.append(0)
            elif math.isinf(v):
                ref.append(info.max if v > 0 else info.min)
            else:
                ref.append(min(max(fn(v), info.min), info.max))
        np.testing.assert_array_equal(got, np.array(ref, dtype=object).astype(PTX_NP[dst]), err_msg=rnd)


def _round_half_even(v):
    return round(v)          # Python rounds half to even


@pytest.mark.parametrize("src", ["s32", "u32", "s64", "u64"])
def test_cvt_int_to_float_rounding(mem, rng, src):
    x = interesting_ints(rng, 300, PTX_NP[src])
    for dst in ("f32", "f64"):
        for mode in ("rn", "rz", "rm", "rp"):
            got = elementwise(mem, f"cvt.{mode}.{dst}.{src} %d, %a;", [("a", src, x)], ("d", dst))
            for v, gv in zip(x.tolist(), got.tolist()):
                _check_directed(Fraction(v), gv, mode, PTX_NP[dst], f"cvt.{mode}.{dst}.{src}({v})")


def test_cvt_f64_to_f32_modes_and_f32_to_f64(mem, rng):
    x = interesting_floats(rng, 400, np.float64)
    x[50:100] = rng.standard_normal(50) * 1e-41          # f32 subnormal range
    x[100:110] = [3.5e38, -3.5e38, 3.4028235e38, 1e-46, -1e-46, 2 ** -149, 1 + 2 ** -24, 1 + 2 ** -30, -1 - 2 ** -30, 1e300]
    finite = np.isfinite(x)
    for mode in ("rn", "rz", "rm", "rp"):
        got = elementwise(mem, f"cvt.{mode}.f32.f64 %d, %a;", [("a", "f64", x)], ("d", "f32"))
        for v, gv in zip(x[finite].tolist(), got[finite].tolist()):
            _check_directed(Fraction(v), gv, mode, np.float32, f"cvt.{mode}.f32.f64({v!r})")
        assert np.isnan(got[~np.isfinite(x) & np.isnan(x)]).all()
    y = interesting_floats(rng, 300, np.float32)
    got = elementwise(mem, "cvt.f64.f32 %d, %a;", [("a", "f32", y)], ("d", "f64"))
    _same_floats(got, y.astype(np.float64))
    got = elementwise(mem, "cvt.rni.f32.f32 %d, %a;", [("a", "f32", y)], ("d", "f32"))
    _same_floats(got, np.rint(y))
    got = elementwise(mem, "cvt.rzi.ftz.f32.f32 %d, %a;", [("a", "f32", y)], ("d", "f32"))
    ref = np.trunc(np.where(np.abs(y) < np.float32(1.1754944e-38), np.copysign(np.float32(0), y), y))
    _same_floats(got, ref)


# --- moves, loads, stores --------------------------------------------------------------------

def test_mov_pack_unpack_and_special_registers(mem, rng):
    a = rand_bits(rng, 256, np.uint32)
    b = rand_bits(rng, 256, np.uint32)
    got = elementwise(mem, "mov.b64 %d, {%a, %b};", [("a", "b32", a), ("b", "b32", b)], ("d", "b64"))
    np.testing.assert_array_equal(got, a.astype(np.uint64) | (b.astype(np.uint64) << np.uint64(32)))
    d64 = rand_bits(rng, 256, np.uint64)
    got = elementwise(mem, "mov.b64 {%lo, %hi}, %a;\nxor.b32 %d, %lo, %hi;", [("a", "b64", d64)],
                      ("d", "b32"), extra_regs=".reg .b32 %lo, %hi;")
    np.testing.assert_array_equal(got, (d64 & np.uint64(0xFFFFFFFF)).astype(np.uint32) ^ (d64 >> np.uint64(32)).astype(np.uint32))
    got = elementwise(mem, "mov.b32 {%h0, %h1}, %a;\nmov.b32 %d, {%h1, %h0};", [("a", "b32", a)],
                      ("d", "b32"), extra_regs=".reg .b16 %h0, %h1;")
    np.testing.assert_array_equal(got, (a >> np.uint32(16)) | (a << np.uint32(16)))
    got = elementwise(mem, "mov.u32 %d, %laneid;\nmov.u32 %e, %warpid;\nshl.b32 %e, %e, 8;\nor.b32 %d, %d, %e;",
                      [("a", "b32", a)], ("d", "u32"), extra_regs=".reg .b32 %e;", block=96)
    t = np.arange(256) % 96
    np.testing.assert_array_equal(got, (t % 32) | ((t // 32) << 8))
    got = elementwise(mem, "mov.f32 %d, 0f7FC12345;", [("a", "b32", a)], ("d", "b32"))
    assert (got == 0x7FC12345).all()


def test_subword_loads_extend_and_stores_truncate(mem, rng):
    raw = rand_bits(rng, 512, np.uint8)
    src = Buf(mem, raw)
    out = Buf(mem, n=512 * 4, dtype=np.uint32)
    out8 = Buf(mem, n=512, dtype=np.uint8)
    text = HEADER + """
.visible .entry k(.param .u64 src, .param .u64 out, .param .u64 out8)
{
  .reg .b16 %h<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [out];
  ld.param.u64 %rd9, [out8];
  mov.u32 %r1, %tid.x;
  cvt.u64.u32 %rd3, %r1;
  add.s64 %rd4, %rd1, %rd3;          // byte i
  ld.global.s8 %r2, [%rd4];
  ld.global.u8 %r3, [%rd4];
  and.b64 %rd5, %rd3, -2;            // 2-byte aligned
  add.s64 %rd6, %rd1, %rd5;
  ld.global.s16 %r4, [%rd6];
  ld.global.u16 %r5, [%rd6];
  shl.b64 %rd7, %rd3, 4;
  add.s64 %rd8, %rd2, %rd7;
  st.global.v4.u32 [%rd8], {%r2, %r3, %r4, %r5};
  add.s32 %r6, %r2, 256;             // truncated by an 8-bit store
  add.s64 %rd10, %rd9, %rd3;
  st.global.u8 [%rd10], %r6;
  ret;
}
"""
    mod = load_ptx(text)
    launch(mod, "k", 1, 512, src, out, out8, mem=mem)
    got = out.read().reshape(512, 4)
    i = np.arange(512)
    half = raw.view(np.uint16)[i // 2]
    np.testing.assert_array_equal(got[:, 0], raw.view(np.int8).astype(np.int32).view(np.uint32))
    np.testing.assert_array_equal(got[:, 1], raw.astype(np.uint32))
    np.testing.assert_array_equal(got[:, 2], half.view(np.int16).astype(np.int32).view(np.uint32))
    np.testing.assert_array_equal(got[:, 3], half.astype(np.uint32))
    np.testing.assert_array_equal(out8.read(), raw)
    for b in (src, out, out8):
        b.free()


# --- control flow ----------------------------------------------------------------------------

LOOP_PTX = HEADER + """
// each thread sums 0..count[i]-1 with a data-dependent trip count, then branches
// if/else on the parity of the sum and adds a per-branch marker
.visible .entry loop(.param .u64 counts, .param .u64 out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [counts];
  ld.param.u64 %rd2, [out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.s32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r5, [%rd4];
  mov.u32 %r6, 0;                    // i
  mov.u32 %r7, 0;                    // sum
  setp.eq.s32 %p1, %r5, 0;
  @%p1 bra AFTER;
LOOP:
  add.s32 %r7, %r7, %r6;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, %r5;
  @%p2 bra.uni LOOP;
AFTER:
  and.b32 %r8, %r7, 1;
  setp.eq.b32 %p3, %r8, 1;
  @!%p3 bra EVEN;
  add.s32 %r7, %r7, 1000000;         // odd branch
  bra.uni JOIN;
EVEN:
  add.s32 %r7, %r7, 2000000;
JOIN:
  add.s32 %r7, %r7, %r4;             // after reconvergence everyone adds its index
  add.s64 %rd5, %rd2, %rd3;
  st.global.u32 [%rd5], %r7;
  ret;
}
"""


def test_divergent_loops_and_if_else(mem, rng):
    mod = load_ptx(LOOP_PTX)
    n = 64 * 40
    counts = rng.integers(0, 60, n).astype(np.uint32)
    counts[:32] = 5                    # one warp uniform
    cbuf, obuf = Buf(mem, counts), Buf(mem, n=n, dtype=np.uint32)
    stats = launch(mod, "loop", n // 64, 64, cbuf, obuf, mem=mem)
    c = counts.astype(np.int64)
    s = c * (c - 1) // 2
    ref = s + np.where(s % 2 == 1, 1000000, 2000000) + np.arange(n)
    np.testing.assert_array_equal(obuf.read(), ref.astype(np.uint32))
    # exact thread-instruction count: 13 before the loop, 4 per iteration, 3 after it,
    # 2 (odd) or 1 (even) in the branches and 4 after the join
    per_thread = 13 + 4 * c + 3 + np.where(s % 2 == 1, 2, 1) + 4
    assert stats.thread_instructions == int(per_thread.sum())
    assert stats.divergent_steps > 0
    cbuf.free(), obuf.free()


def test_partial_exit_and_guarded_ret(mem, rng):
    text = HEADER + """
.visible .entry k(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<3>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  ld.param.u32 %r2, [n];
  setp.ge.u32 %p1, %r1, %r2;
  @%p1 ret;                      // some threads leave early; the rest stay converged
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  mul.lo.u32 %r3, %r1, 3;
  st.global.u32 [%rd3], %r3;
  exit;
}
"""
    mod = load_ptx(text)
    out = Buf(mem, n=100, dtype=np.uint32)
    stats = launch(mod, "k", 1, 100, out, 37, mem=mem)
    got = out.read()
    np.testing.assert_array_equal(got[:37], np.arange(37) * 3)
    assert (got[37:] == POISON).all()
    assert stats.thread_instructions == 100 * 4 + 37 * 6
    out.free()


def test_3d_grid_and_block(mem):
    text = HEADER + """
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<20>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;   mov.u32 %r2, %tid.y;   mov.u32 %r3, %tid.z;
  mov.u32 %r4, %ctaid.x; mov.u32 %r5, %ctaid.y; mov.u32 %r6, %ctaid.z;
  mov.u32 %r7, %ntid.x;  mov.u32 %r8, %ntid.y;  mov.u32 %r9, %ntid.z;
  mov.u32 %r10, %nctaid.x; mov.u32 %r11, %nctaid.y;
  // linear block id and thread id, CUDA order (x fastest)
  mad.lo.u32 %r12, %r6, %r11, %r5;
  mad.lo.u32 %r12, %r12, %r10, %r4;
  mad.lo.u32 %r13, %r3, %r8, %r2;
  mad.lo.u32 %r13, %r13, %r7, %r1;
  mul.lo.u32 %r14, %r7, %r8;
  mul.lo.u32 %r14, %r14, %r9;
  mad.lo.u32 %r15, %r12, %r14, %r13;
  // value: packed coordinates
  shl.b32 %r16, %r6, 4;  or.b32 %r16, %r16, %r5;  shl.b32 %r16, %r16, 4;  or.b32 %r16, %r16, %r4;
  shl.b32 %r16, %r16, 4; or.b32 %r16, %r16, %r3;  shl.b32 %r16, %r16, 4;  or.b32 %r16, %r16, %r2;
  shl.b32 %r16, %r16, 4; or.b32 %r16, %r16, %r1;
  ld.param.u64 %rd1, [out];
  mul.wide.u32 %rd2, %r15, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r16;
  ret;
}
"""
    mod = load_ptx(text)
    grid, block = (3, 2, 4), (5, 3, 2)          # 30 threads per block: padded lanes
    total = 3 * 2 * 4 * 5 * 3 * 2
    out = Buf(mem, n=total, dtype=np.uint32)
    launch(mod, "k", grid, block, out, mem=mem)
    ref = []
    for bz in range(4):
        for by in range(2):
            for bx in range(3):
                for tz in range(2):
                    for ty in range(3):
                        for tx in range(5):
                            ref.append((((((bz << 4 | by) << 4 | bx) << 4 | tz) << 4 | ty) << 4) | tx)
    np.testing.assert_array_equal(out.read(), ref)
    out.free()


# --- faults ----------------------------------------------------------------------------------

FAULT_PTX = HEADER + """
.visible .entry fault(.param .u64 p, .param .u32 n, .param .u32 shift)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r5, [n];
  ld.param.u32 %r6, [shift];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  setp.ge.u32 %p1, %r4, %r5;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  cvt.u64.u32 %rd4, %r6;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.f32 %f1, [%rd5];
  @%p1 bra DONE;
  st.global.f32 [%rd3], %f1;
DONE:
  ret;
}
"""


def test_out_of_bounds_store_names_block_thread_line(mem):
    mod = load_ptx(FAULT_PTX)
    buf = Buf(mem, np.zeros(1000, np.float32))
    bad = mem.alloc(64)                           # n too large: thread 1000 stores past the end
    mem.free(bad)
    # loads read an allocation 2x bigger, so the store faults first: index 1000+ is
    # block (3,0,0) thread (232,0,0) with 256 threads per block
    big = Buf(mem, np.zeros(4096, np.float32))
    with pytest.raises(KernelFault) as e:
        launch(mod, "fault", 8, 256, buf, 1200, 0, mem=mem)
    f = e.value
    assert f.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "fault: out-of-bounds 4-byte global" in f.message
    assert "block (3,0,0) thread (232,0,0)" in f.message or "block (3,0,0) thread (232,0,0)" in str(f)
    # the load at line 23 faults first (it precedes the guarded branch) for thread 1000
    assert "PTX line 23: ld.global.f32 %f1, [%rd5]" in f.message
    assert f"{buf.addr + 4000:#x}" in f.message
    big.free()
    buf.free()


def test_store_fault_and_guarded_off_threads_do_not_fault(mem):
    text = FAULT_PTX.replace("ld.global.f32 %f1, [%rd5];", "@!%p1 ld.global.f32 %f1, [%rd5];")
    mod = load_ptx(text)
    buf = Buf(mem, np.arange(1000, dtype=np.float32))
    out_ok = launch(mod, "fault", 8, 256, buf, 1000, 0, mem=mem)       # inactive threads: no fault
    assert out_ok.threads == 2048
    with pytest.raises(KernelFault) as e:
        launch(mod, "fault", 8, 256, buf, 1001, 0, mem=mem)
    assert "block (3,0,0) thread (232,0,0)" in e.value.message
    assert "PTX line 23: @!%p1 ld.global.f32 %f1, [%rd5]" in e.value.message
    # a store fault: make the store address bad but the load fine
    text2 = text.replace("st.global.f32 [%rd3], %f1;", "st.global.f32 [%rd5], %f1;") \
                .replace("@!%p1 ld.global.f32 %f1, [%rd5];", "@!%p1 ld.global.f32 %f1, [%rd3];")
    mod2 = load_ptx(text2)
    with pytest.raises(KernelFault) as e:
        launch(mod2, "fault", 4, 256, buf, 1000, 64, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "4-byte global store" in e.value.message
    assert "block (3,0,0) thread (216,0,0)" in e.value.message     # 984*4 + 64 = 4000
    assert "PTX line 25: st.global.f32 [%rd5], %f1" in e.value.message
    buf.free()


def test_misaligned_load_and_vector_alignment(mem):
    mod = load_ptx(FAULT_PTX)
    buf = Buf(mem, np.zeros(1024, np.float32))
    with pytest.raises(KernelFault) as e:
        launch(mod, "fault", 1, 32, buf, 32, 2, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert "misaligned 4-byte global load" in e.value.message
    assert "block (0,0,0) thread (0,0,0)" in e.value.message
    vec = HEADER + """
.visible .entry v(.param .u64 p, .param .u32 off)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [off];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd2, %r2, 16;
  add.s64 %rd3, %rd1, %rd2;
  cvt.u64.u32 %rd4, %r1;
  add.s64 %rd5, %rd3, %rd4;
  ld.global.v4.u32 {%r2, %r3, %r4, %r5}, [%rd5];
  st.global.v4.u32 [%rd3], {%r5, %r4, %r3, %r2};
  ret;
}
"""
    vm = load_ptx(vec)
    data = np.arange(256, dtype=np.uint32)
    b2 = Buf(mem, data)
    launch(vm, "v", 1, 64, b2, 0, mem=mem)
    np.testing.assert_array_equal(b2.read().reshape(64, 4), data.reshape(64, 4)[:, ::-1])
    with pytest.raises(KernelFault) as e:
        launch(vm, "v", 1, 64, b2, 8, mem=mem)        # 8-byte aligned is not enough for v4
    assert e.value.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert "16-byte" in e.value.message
    buf.free(), b2.free()


def test_trap_is_launch_failed(mem):
    text = HEADER + """
.visible .entry t(.param .u32 n)
{
  .reg .pred %p;
  .reg .b32 %r<3>;
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  setp.eq.u32 %p, %r2, %r1;
  @%p trap;
  ret;
}
"""
    mod = load_ptx(text)
    launch(mod, "t", 1, 32, 99, mem=mem)                 # nobody traps
    with pytest.raises(KernelFault) as e:
        launch(mod, "t", 2, 32, 7, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "block (0,0,0) thread (7,0,0)" in e.value.message and "PTX line 12: @%p trap" in e.value.message


# --- kernels compiled by NVRTC from CUDA C ---------------------------------------------------

CUDA_SRC = r"""
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

extern "C" __global__ void collatz(const unsigned long long* start, unsigned int* steps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long v = start[i];
    unsigned int s = 0;
    while (v != 1ULL) {
        v = (v & 1ULL) ? 3ULL * v + 1ULL : v >> 1;
        ++s;
    }
    steps[i] = s;
}

extern "C" __global__ void index3d(int* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x < nx && y < ny && z < nz)
        out[(z * ny + y) * nx + x] = x * 10000 + y * 100 + z - (x ^ y);
}

extern "C" __global__ void scale4(const float4* in, float4* out, int n, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = in[i];
        out[i] = make_float4(v.w * s, v.z + s, v.y - s, v.x / s);
    }
}

extern "C" __global__ void intdiv(const int* a, const int* b, int* q, int* r,
                                  unsigned int* uq, long long* lq, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
        uq[i] = (unsigned int)a[i] / (unsigned int)b[i] + (unsigned int)a[i] % 7u;
        lq[i] = (long long)a[i] * 1000003LL / (long long)b[i];
    }
}

extern "C" __global__ void dmath(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double v = x[i];
        y[i] = v * v * 0.5 + sqrt(fabs(v)) - (double)(int)v / 3.0;
    }
}
"""

NVRTC_OPTIONS = [(), ("--use_fast_math",), ("--fmad=false", "--prec-div=true")]


@pytest.mark.parametrize("options", NVRTC_OPTIONS, ids=["default", "fast_math", "nofma"])
def test_nvrtc_kernels(mem, rng, options):
    ptx = nvrtc_ptx(CUDA_SRC, options=options)
    assert ".version" in ptx
    mod = load_ptx(ptx)
    fast = "--use_fast_math" in options

    # saxpy, grid-stride
    n = 50_000
    x = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-3, 3))
    bx, by = Buf(mem, x), Buf(mem, y0)
    launch(mod, "saxpy", 40, 128, n, float(a), bx, by, mem=mem)
    ref = (a.astype(np.float64) * x + y0).astype(np.float32)   # fma: one rounding
    if "--fmad=false" in options:
        ref = (a * x) + y0
    np.testing.assert_array_equal(by.read(), ref)
    bx.free(), by.free()

    # collatz with 64-bit values, divergent while loop
    n = 3000
    starts = rng.integers(1, 10 ** 6, n).astype(np.uint64)
    starts[:3] = [1, 27, 837799]
    steps_ref = []
    for v in starts.tolist():
        s = 0
        while v != 1:
            v = 3 * v + 1 if v & 1 else v >> 1
            s += 1
        steps_ref.append(s)
    bs, bo = Buf(mem, starts), Buf(mem, n=n, dtype=np.uint32)
    stats = launch(mod, "collatz", -(-n // 256), 256, bs, bo, n, mem=mem)
    np.testing.assert_array_equal(bo.read(), steps_ref)
    assert stats.divergent_steps > 0
    bs.free(), bo.free()

    # 3-D indexing
    nx, ny, nz = 37, 9, 5
    bo = Buf(mem, n=nx * ny * nz, dtype=np.int32)
    launch(mod, "index3d", (-(-nx // 8), -(-ny // 4), -(-nz // 2)), (8, 4, 2), bo, nx, ny, nz, mem=mem)
    z, y_, x_ = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(bo.read().reshape(nz, ny, nx), x_ * 10000 + y_ * 100 + z - (x_ ^ y_))
    bo.free()

    # float4 loads and stores
    n = 1000
    v = rng.standard_normal((n, 4)).astype(np.float32)
    s = np.float32(1.75)
    bi, bo = Buf(mem, v), Buf(mem, n=(n, 4), dtype=np.float32)
    launch(mod, "scale4", -(-n // 128), 128, bi, bo, n, float(s), mem=mem)
    got = bo.read()
    np.testing.assert_array_equal(got[:, 0], v[:, 3] * s)
    np.testing.assert_array_equal(got[:, 1], v[:, 2] + s)
    np.testing.assert_array_equal(got[:, 2], v[:, 1] - s)
    if fast:
        np.testing.assert_allclose(got[:, 3], v[:, 0] / s, rtol=3e-7)
    else:
        np.testing.assert_array_equal(got[:, 3], v[:, 0] / s)
    bi.free(), bo.free()

    # integer division and modulo (C semantics: truncation toward zero)
    n = 2000
    a_ = rng.integers(-10 ** 9, 10 ** 9, n).astype(np.int32)
    b_ = rng.integers(-1000, 1000, n).astype(np.int32)
    b_[b_ == 0] = 7
    b_[:4] = [1, -1, 3, -3]
    bufs = [Buf(mem, a_), Buf(mem, b_), Buf(mem, n=n, dtype=np.int32), Buf(mem, n=n, dtype=np.int32),
            Buf(mem, n=n, dtype=np.uint32), Buf(mem, n=n, dtype=np.int64)]
    launch(mod, "intdiv", -(-n // 256), 256, *bufs, n, mem=mem)
    A, B = a_.tolist(), b_.tolist()
    q = [int(x / y) if abs(x) < 2 ** 52 else None for x, y in zip(A, B)]
    q = [(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(A, B)]
    np.testing.assert_array_equal(bufs[2].read(), q)
    np.testing.assert_array_equal(bufs[3].read(), [x - qq * y for x, y, qq in zip(A, B, q)])
    ua, ub = [x & 0xFFFFFFFF for x in A], [y & 0xFFFFFFFF for y in B]
    np.testing.assert_array_equal(bufs[4].read(), [(x // y + x % 7) & 0xFFFFFFFF for x, y in zip(ua, ub)])
    lq = [(abs(x * 1000003) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(A, B)]
    np.testing.assert_array_equal(bufs[5].read(), lq)
    for b in bufs:
        b.free()

    # doubles: fma contraction, sqrt, cvt, division
    n = 1000
    xd = rng.standard_normal(n) * 100
    bi, bo = Buf(mem, xd), Buf(mem, n=n, dtype=np.float64)
    launch(mod, "dmath", -(-n // 128), 128, bi, bo, n, mem=mem)
    ref = xd * xd * 0.5 + np.sqrt(np.abs(xd)) - np.trunc(xd) / 3.0
    np.testing.assert_allclose(bo.read(), ref, rtol=1e-14, atol=1e-12)
    bi.free(), bo.free()


def test_nvrtc_vector_add_one_per_thread_large(mem, rng):
    src = r"""
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}"""
    mod = load_ptx(nvrtc_ptx(src))
    n = (1 << 18) + 77
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ba, bb, bc = Buf(mem, a), Buf(mem, b), Buf(mem, n=n, dtype=np.float32)
    stats = launch(mod, "vadd", -(-n // 256), 256, ba, bb, bc, n, mem=mem)
    np.testing.assert_array_equal(bc.read(), a + b)
    assert stats.threads == -(-n // 256) * 256
    ba.free(), bb.free(), bc.free()

"""min/max.relu.{s32,s16x2}, min/max.xorsign.abs on f16/bf16 (and pairs) and the predicate
form of lop3, against numpy references written from the PTX ISA: random bit patterns
(NaNs, infinities, subnormals among them), poisoned outputs, every kernel assembled by
ptxas for sm_90 first."""
import numpy as np
import pytest
from helpers.emu_engine import POISON, Buf, launch
from helpers.ptxas import assemble_sm90

from lowlevel.emu.engine.decode import load_ptx

SM90 = ".version 8.2\n.target sm_90\n.address_size 64\n"
N = 512

KERNEL = SM90 + """
.visible .entry k(.param .u64 a_p, .param .u64 b_p, .param .u64 c_p, .param .u64 d_p,
                  .param .u64 p_p)
{
  .reg .b32 %r<8>; .reg .b16 %h<8>; .reg .b64 %rd<12>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [a_p];
  ld.param.u64 %rd2, [b_p];
  ld.param.u64 %rd3, [c_p];
  ld.param.u64 %rd4, [d_p];
  ld.param.u64 %rd5, [p_p];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd6, %r1, 4;
  add.u64 %rd7, %rd1, %rd6;
  ld.global.u32 %r2, [%rd7];
  add.u64 %rd8, %rd2, %rd6;
  ld.global.u32 %r3, [%rd8];
  add.u64 %rd9, %rd3, %rd6;
  ld.global.u32 %r4, [%rd9];
  and.b32 %r6, %r4, 1;
  setp.ne.u32 %p2, %r6, 0;
  cvt.u16.u32 %h2, %r2;
  cvt.u16.u32 %h3, %r3;
  mov.u32 %r5, %r4;
  setp.ne.u32 %p1, %r4, %r4;
  BODY
  add.u64 %rd10, %rd4, %rd6;
  st.global.u32 [%rd10], %r5;
  selp.u32 %r7, 1, 0, %p1;
  add.u64 %rd11, %rd5, %rd6;
  st.global.u32 [%rd11], %r7;
  ret;
}
"""


def run(mem, body, a, b, c):
    text = KERNEL.replace("BODY", body)
    assemble_sm90(text)
    bufs = [Buf(mem, a), Buf(mem, b), Buf(mem, c), Buf(mem, n=N, dtype=np.uint32),
            Buf(mem, n=N, dtype=np.uint32)]
    try:
        launch(load_ptx(text), "k", 1, N, *bufs, mem=mem)
        return bufs[3].read(), bufs[4].read()
    finally:
        for buf in bufs:
            buf.free()


def words(rng):
    return rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)


# --- min/max.relu on s32 and s16x2 ------------------------------------------------------------

@pytest.mark.parametrize("op", ["min", "max"])
def test_relu_s32(mem, rng, op):
    a, b = words(rng), words(rng)
    d, _ = run(mem, f"{op}.relu.s32 %r5, %r2, %r3;", a, b, words(rng))
    fn = np.minimum if op == "min" else np.maximum
    np.testing.assert_array_equal(d.view(np.int32), np.maximum(fn(a.view(np.int32), b.view(np.int32)), 0))


@pytest.mark.parametrize("op", ["min", "max"])
def test_relu_s16x2(mem, rng, op):
    a, b = words(rng), words(rng)
    d, _ = run(mem, f"{op}.relu.s16x2 %r5, %r2, %r3;", a, b, words(rng))
    fn = np.minimum if op == "min" else np.maximum
    ref = np.maximum(fn(a.view(np.int16), b.view(np.int16)), 0).astype(np.int16)
    np.testing.assert_array_equal(d.view(np.int16), ref)


# --- min/max.xorsign.abs on half types --------------------------------------------------------

SPECIAL = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
                    0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7F80, 0xFF80, 0x7FC0, 0x3F80], np.uint32)


def halves(rng):
    """Random 16-bit patterns, the special values mixed in."""
    h = rng.integers(0, 2**16, N).astype(np.uint32)
    h[:SPECIAL.size * 4] = np.tile(SPECIAL, 4)
    return rng.permutation(h)


def to_float(bits, kind, ftz):
    bits = bits.astype(np.uint16)
    if kind == "f16":
        x = bits.view(np.float16).astype(np.float64)
        if ftz:
            x = np.where(np.abs(x) < 2.0**-14, 0.0, x)
        return x
    with np.errstate(invalid="ignore"):         # signalling NaNs quieted: still NaN
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def from_float(x, kind):
    if kind == "f16":
        return x.astype(np.float16).view(np.uint16).astype(np.uint32)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)   # exact here


def xorsign_reference(op, kind, ftz, nan, a, b):
    x, y = to_float(a, kind, ftz), to_float(b, kind, ftz)
    sign = ((a ^ b) >> 15) & 1
    mag = (np.fmin if op == "min" else np.fmax)(np.abs(x), np.abs(y))   # one NaN: the other
    is_nan = np.isnan(mag) | (nan & (np.isnan(x) | np.isnan(y)))
    out = from_float(np.abs(mag), kind) | (sign << 15)
    return np.where(is_nan, 0x7FFF, out).astype(np.uint32)


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("t, mods", [("f16", ""), ("f16", ".ftz"), ("f16", ".NaN"),
                                     ("bf16", ""), ("bf16", ".NaN"),
                                     ("f16x2", ".ftz.NaN"), ("bf16x2", "")])
def test_xorsign_abs(mem, rng, op, t, mods):
    kind, pair = t.removesuffix("x2"), t.endswith("x2")
    lo_a, lo_b, hi_a, hi_b = (halves(rng) for _ in range(4))
    ftz, nan = ".ftz" in mods, ".NaN" in mods
    if pair:
        a, b = lo_a | (hi_a << 16), lo_b | (hi_b << 16)
        d, _ = run(mem, f"{op}{mods}.xorsign.abs.{t} %r5, %r2, %r3;", a, b, words(rng))
        ref = (xorsign_reference(op, kind, ftz, nan, lo_a, lo_b)
               | (xorsign_reference(op, kind, ftz, nan, hi_a, hi_b) << 16))
    else:
        a, b = lo_a | (hi_a << 16), lo_b | (hi_b << 16)          # the high halves ignored
        d, _ = run(mem, f"{op}{mods}.xorsign.abs.{t} %h5, %h2, %h3;\n  cvt.u32.u16 %r5, %h5;",
                   a, b, words(rng))
        ref = xorsign_reference(op, kind, ftz, nan, lo_a, lo_b)
    np.testing.assert_array_equal(d, ref.astype(np.uint32))


# --- lop3 with a predicate result -----------------------------------------------------------

def lut_reference(lut, a, b, c):
    d = np.zeros_like(a)
    for bit in range(32):
        idx = ((a >> bit & 1) << 2) | ((b >> bit & 1) << 1) | (c >> bit & 1)
        d |= ((np.uint32(lut) >> idx) & 1) << bit
    return d


@pytest.mark.parametrize("boolop", ["and", "or"])
@pytest.mark.parametrize("q", ["%p2", "!%p2"])
def test_lop3_predicate_form(mem, rng, boolop, q):
    lut = int(rng.integers(0, 256))
    a, b, c = words(rng), words(rng), words(rng)
    a[:64] = 0                             # some results of 0 with tables that keep zeros
    b[:64] = 0
    c[:64] &= 0xFFFFFFFE
    d, p = run(mem, f"lop3.{boolop}.b32 %r5|%p1, %r2, %r3, %r4, {lut}, {q};", a, b, c)
    ref = lut_reference(lut, a, b, c)
    qv = (c & 1).astype(bool)
    qv = ~qv if q.startswith("!") else qv
    nonzero = ref != 0
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(p.astype(bool), (nonzero & qv) if boolop == "and" else (nonzero | qv))


def test_lop3_predicate_form_with_the_sink(mem, rng):
    a, b, c = words(rng), words(rng), words(rng)
    d, p = run(mem, "lop3.or.b32 _|%p1, %r2, %r3, %r4, 0x80, %p2;", a, b, c)
    np.testing.assert_array_equal(d, c)                     # %r5 kept its value (c)
    np.testing.assert_array_equal(p.astype(bool), ((a & b & c) != 0) | (c & 1).astype(bool))
    assert POISON not in p

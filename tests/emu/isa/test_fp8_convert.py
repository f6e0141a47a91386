"""cvt to and from the 8-bit floats (.e4m3x2, .e5m2x2; sm_89+) and the tf32 forms, on the
emulated GPU, against references written here from the format definitions (PTX ISA,
"Alternate floating point data formats"): every one of the 256 codes decoded, and encodes
of random values and of every boundary (each code, each tie between neighbours and one
f32 ulp either side of it, subnormals, the overflow threshold, infinities, NaN), with and
without .relu. One thread per value; outputs poisoned.
"""
import math

import numpy as np
import pytest

from helpers.fp8 import code_values, encode_reference
from helpers.memory import download, poisoned, upload
from helpers.ptxas import ptxas_refusal
from lowlevel import cuda

BLOCK = 128


# --- the references ---------------------------------------------------------------------

def f16_bits_reference(v, relu):
    v = np.where(relu & (v < 0), 0.0, v)
    bits = v.astype(np.float16).view(np.uint16).astype(np.int64)
    return np.where(np.isnan(v), 0x7FFF, bits)


def encode_inputs(rng, kind):
    """float32 values: each code, the ties between neighbours and an ulp either side,
    beyond the largest value, subnormals, zeros, infinities, NaN, and random magnitudes."""
    vals = code_values(kind)[:128]
    pos = vals[np.isfinite(vals)]
    mids = (pos[1:] + pos[:-1]) / 2
    top = pos[-1]
    special = [top * 1.01, (top + (top - pos[-2]) / 2), top * 2, 1e30, np.inf, np.nan,
               pos[1] / 2, pos[1] * 0.75, pos[1] / 4, 1e-30]
    x = np.concatenate([pos, mids, special]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                        np.nextafter(mids.astype(np.float32), np.float32(0))])
    rand = np.exp2(rng.uniform(-22, 20, 400)) * rng.choice([-1, 1], 400)
    x = np.concatenate([x, -x, rand.astype(np.float32)])
    return x


# --- the kernel -------------------------------------------------------------------------

def kernel(body, target="sm_90", version="8.0"):
    """Thread i reads words {r10, r11} = input i (also as %f1, %f2 and as %h1, the low half
    of r10), runs `body`, which leaves its result in %r12, and stores it."""
    return "\n".join([
        f".version {version}", f".target {target}", ".address_size 64",
        ".visible .entry k(.param .u64 pin, .param .u64 pout, .param .u32 n) {",
        "  .reg .b32 %r<16>; .reg .f32 %f<4>; .reg .b16 %h<4>; .reg .b64 %rd<8>; .reg .pred %p;",
        "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;",
        "  mad.lo.u32 %r1, %r1, %r2, %r3; ld.param.u32 %r4, [n];",
        "  setp.ge.u32 %p, %r1, %r4; @%p bra DONE;",
        "  ld.param.u64 %rd1, [pin]; cvta.to.global.u64 %rd1, %rd1;",
        "  mul.wide.u32 %rd2, %r1, 8; add.u64 %rd3, %rd1, %rd2;",
        "  ld.global.v2.b32 {%r10, %r11}, [%rd3];",
        "  mov.b32 %f1, %r10; mov.b32 %f2, %r11; cvt.u16.u32 %h1, %r10;",
        f"  {body}",
        "  ld.param.u64 %rd4, [pout]; cvta.to.global.u64 %rd4, %rd4;",
        "  mul.wide.u32 %rd5, %r1, 4; add.u64 %rd6, %rd4, %rd5;",
        "  st.global.b32 [%rd6], %r12;",
        "DONE:", "  ret;", "}", ""])


def run(body, words, **kw):
    """The %r12 of every thread, for inputs `words` (n, 2) uint32."""
    n = words.shape[0]
    out = upload(poisoned(n, np.uint32))
    f = cuda.Module.from_ptx(kernel(body, **kw)).get_function("k")
    f.launch((n + BLOCK - 1) // BLOCK, BLOCK, (upload(np.ascontiguousarray(words, np.uint32)), out, np.uint32(n)))
    return download(out, n, np.uint32).astype(np.int64)


def f32_words(a, b):
    return np.stack([np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32)], axis=1)


# --- the tests --------------------------------------------------------------------------

@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_decode_every_code(driver, kind, relu):
    """cvt.rn{.relu}.f16x2.KINDx2: every code, in the upper byte and in the lower; exact,
    NaN as the canonical f16 NaN."""
    hi, lo = np.arange(256), np.arange(256)[::-1]
    got = run(f"cvt.rn{'.relu' if relu else ''}.f16x2.{kind}x2 %r12, %h1;",
              np.stack([(hi << 8) | lo, np.zeros(256, np.int64)], axis=1).astype(np.uint32))
    vals = code_values(kind)
    np.testing.assert_array_equal(got >> 16, f16_bits_reference(vals[hi], relu))
    np.testing.assert_array_equal(got & 0xFFFF, f16_bits_reference(vals[lo], relu))


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_encode_from_f32(driver, rng, kind, relu):
    """cvt.rn.satfinite{.relu}.KINDx2.f32 d, a, b: a to the upper byte, b to the lower."""
    a = encode_inputs(rng, kind)
    b = rng.permutation(a)
    got = run(f"cvt.rn.satfinite{'.relu' if relu else ''}.{kind}x2.f32 %h2, %f1, %f2; cvt.u32.u16 %r12, %h2;",
              f32_words(a, b))
    assert (got >> 16 == 0).all()
    np.testing.assert_array_equal(got >> 8, encode_reference(a, kind, relu))
    np.testing.assert_array_equal(got & 0xFF, encode_reference(b, kind, relu))


@pytest.mark.parametrize("kind", ["e4m3", "e5m2"])
def test_encode_from_f16x2(driver, rng, kind):
    """cvt.rn.satfinite.KINDx2.f16x2 d, a: the upper half to the upper byte (and with .relu)."""
    with np.errstate(over="ignore"):          # 1e30 becomes inf, as it should
        x = encode_inputs(rng, kind).astype(np.float16)
    y = rng.permutation(x)
    word = (x.view(np.uint16).astype(np.uint32) << 16) | y.view(np.uint16)
    words = np.stack([word, np.zeros_like(word)], axis=1)
    for relu in (False, True):
        got = run(f"cvt.rn.satfinite{'.relu' if relu else ''}.{kind}x2.f16x2 %h2, %r10; cvt.u32.u16 %r12, %h2;",
                  words)
        np.testing.assert_array_equal(got >> 8, encode_reference(x, kind, relu))
        np.testing.assert_array_equal(got & 0xFF, encode_reference(y, kind, relu))


def test_fp8_round_trip_on_sm_89(driver, rng):
    """The oldest target ptxas takes them for (sm_89, with PTX 8.1): f32 -> e4m3x2
    -> f16x2 lands on the nearest e4m3 value."""
    a = rng.standard_normal(256).astype(np.float32) * 8
    body = "cvt.rn.satfinite.e4m3x2.f32 %h2, %f1, %f2; cvt.rn.f16x2.e4m3x2 %r12, %h2;"
    got = run(body, f32_words(a, -a), target="sm_89", version="8.1")
    want = code_values("e4m3")[encode_reference(a, "e4m3", False)]
    np.testing.assert_array_equal((got >> 16).astype(np.uint16).view(np.float16), want.astype(np.float16))
    np.testing.assert_array_equal((got & 0xFFFF).astype(np.uint16).view(np.float16), -want.astype(np.float16))


# --- tf32 ------------------------------------------------------------------------------

TF32_MAX = float.fromhex("0x1.ffcp127")            # (2 - 2^-10) 2^127


def tf32_reference(x, mode, relu, satfinite):
    """The tf32 result's value for each float32 x (NaN for NaN), from multiples of its ulp."""
    out = []
    with np.errstate(invalid="ignore"):         # signalling NaNs among the inputs
        x = np.asarray(x, np.float64)
    for v in x:
        if math.isnan(v) or math.isinf(v):
            r = TF32_MAX * math.copysign(1, v) if satfinite and math.isinf(v) else v
        else:
            a = abs(v)
            q = math.ldexp(1.0, max(math.frexp(a)[1] - 1, -126) - 10) if a else 1.0
            down = math.floor(a / q) * q
            up, rem = down + q, a - down
            if mode == "rz" or rem == 0:
                r = down
            elif rem != q / 2:
                r = down if rem < q / 2 else up
            else:
                r = up if mode == "rna" or (down / q) % 2 == 1 else down
            if r > TF32_MAX:
                r = TF32_MAX if satfinite else math.inf
            r = math.copysign(r, v)
        if relu and r < 0:
            r = 0.0
        out.append(r)
    return np.array(out)


@pytest.mark.parametrize("form", ["rna", "rna.satfinite", "rn", "rn.relu", "rz", "rz.relu"])
def test_tf32(driver, rng, form):
    """cvt.rna{.satfinite}.tf32.f32 (sm_80) and cvt.{rn,rz}{.relu}.tf32.f32 (sm_90): ties
    (both parities), an ulp either side, subnormals, overflow, infinities, NaN."""
    mode = form.split(".")[0]
    base = rng.standard_normal(300).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    ties = base | np.uint32(0x1000)
    edge = np.array([0x7F7FF000, 0x7F7FFFFF, 0x7F7FE000, 0x7F800000, 0x7FC00001, 0x00001000,
                     0x00003000, 0x00000001, 0x80000000, 0x00000000], np.uint32)
    bits = np.concatenate([ties, ties + 1, ties - 1, base, edge, rng.integers(0, 2**32, 300, dtype=np.uint32)])
    bits = np.concatenate([bits, bits ^ np.uint32(0x80000000)])
    x = bits.view(np.float32)
    got = run(f"cvt.{form}.tf32.f32 %r12, %f1;", f32_words(x, x), version="8.1").astype(np.uint32)
    want = tf32_reference(x, mode, "relu" in form, "satfinite" in form)
    assert (got & 0x1FFF == 0).all()
    gv = got.view(np.float32).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(gv), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(gv[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(gv[ok]), np.signbit(want[ok]))


# --- what ptxas refuses -------------------------------------------------------------------

@pytest.mark.parametrize("body, target, version, match", [
    ("cvt.rn.satfinite.e4m3x2.f32 %h2, %f1, %f2;", "sm_80", "8.0", "sm_89"),
    ("cvt.rn.satfinite.e4m3x2.f32 %h2, %f1, %f2;", "sm_89", "8.0", "8.1"),
    ("cvt.rn.e4m3x2.f32 %h2, %f1, %f2;", "sm_90", "8.0", "satfinite"),
    ("cvt.rz.satfinite.e5m2x2.f32 %h2, %f1, %f2;", "sm_90", "8.0", "rn"),
    ("cvt.rn.satfinite.e4m3x2.f32 %r12, %f1, %f2;", "sm_90", "8.0", "b16"),
    ("cvt.rn.f16x2.e4m3x2 %r12, %r10;", "sm_90", "8.0", "b16"),
    ("cvt.rn.satfinite.f16x2.e5m2x2 %r12, %h1;", "sm_90", "8.0", "satfinite"),
    ("cvt.rn.bf16x2.e4m3x2 %r12, %h1;", "sm_90", "8.0", "e4m3x2"),
    ("cvt.rn.tf32.f32 %r12, %f1;", "sm_80", "8.0", "sm_90"),
    ("cvt.rna.satfinite.tf32.f32 %r12, %f1;", "sm_80", "8.0", "8.1"),
    ("cvt.rn.satfinite.tf32.f32 %r12, %f1;", "sm_90", "8.0", "sm_100"),
    ("cvt.rna.relu.tf32.f32 %r12, %f1;", "sm_90", "8.0", "relu"),
    ("cvt.rna.tf32.f32 %f3, %f1;", "sm_90", "8.0", "b32"),
    ("cvt.rna.tf32.f32 %r12, %h1;", "sm_90", "8.0", "f32"),
    ("cvt.rn.satfinite.e4m3x2.f32 %h2, %f1, %rd1;", "sm_90", "8.0", "b32"),
    ("cvt.rn.satfinite.e4m3x2.f32 %h2, %f1, 1;", "sm_90", "8.0", "integer"),
    ("cvt.rm.tf32.f32 %r12, %f1;", "sm_90", "8.0", "cvt.rm.tf32.f32"),
])
def test_refused_as_ptxas_refuses(body, target, version, match):
    """What ptxas -arch=sm_90 refuses (checked by hand with ptxas 13.0) is refused at load,
    naming the instruction and the rule."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    ptx = kernel(body + " mov.b32 %r12, 0;", target=target, version=version)
    with pytest.raises(PtxError, match=match) as e:
        load_ptx(ptx)
    assert body.split()[0] in str(e.value)
    assert ptxas_refusal(ptx) != "", "ptxas assembles it"

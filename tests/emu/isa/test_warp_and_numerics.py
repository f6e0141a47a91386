"""Warp-level instructions, bit manipulation, carry chains, half precision, directed
rounding, approximate functions, special registers, device function calls and printf on
the emulated GPU, driven through the engine (and NVRTC-compiled CUDA C).

References are independent: Python integers, exact rationals (fractions.Fraction) for
rounding, numpy float16 for f16. Inputs are fresh random values each run (the seed is
printed on failure); outputs are poisoned before each kernel.
"""
import math
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, PTX_NP, PTX_REG, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def elementwise(mem, body, inputs, outputs, regs="", block=128):
    """Run `body` once per element: inputs [(name, type, array)] land in %name, outputs
    [(name, type)] are stored from %name. Returns the output arrays."""
    n = len(inputs[0][2])
    params = [f".param .u64 p_{nm}" for nm, _, _ in inputs] + \
        [f".param .u64 p_{nm}" for nm, _ in outputs] + [".param .u32 n"]
    decl = "".join(f".reg .{PTX_REG[t]} %{nm};\n" for nm, t, _ in inputs)
    decl += "".join(f".reg .{PTX_REG[t]} %{nm};\n" for nm, t in outputs)

    def access(nm, t, what):
        size = np.dtype(PTX_NP[t]).itemsize
        head = (f"ld.param.u64 %rd1, [p_{nm}];\nmul.wide.u32 %rd2, %idx, {size};\n"
                f"add.s64 %rd3, %rd1, %rd2;\n")
        return head + (f"ld.global.{t} %{nm}, [%rd3];\n" if what == "ld"
                       else f"st.global.{t} [%rd3], %{nm};\n")
    text = HEADER + f""".visible .entry k({", ".join(params)})
{{
  .reg .pred %q<2>;
  .reg .b32 %idx, %nn, %t<4>;
  .reg .b64 %rd<4>;
  {decl}{regs}
  mov.u32 %t1, %tid.x;
  mov.u32 %t2, %ctaid.x;
  mov.u32 %t3, %ntid.x;
  mad.lo.u32 %idx, %t2, %t3, %t1;
  ld.param.u32 %nn, [n];
  setp.ge.u32 %q1, %idx, %nn;
  @%q1 bra DONE;
  {"".join(access(nm, t, "ld") for nm, t, _ in inputs)}
  {body}
  {"".join(access(nm, t, "st") for nm, t in outputs)}
DONE:
  ret;
}}
"""
    mod = load_ptx(text)
    ins = [Buf(mem, np.asarray(a, PTX_NP[t])) for _, t, a in inputs]
    outs = [Buf(mem, n=n, dtype=PTX_NP[t]) for _, t in outputs]
    launch(mod, "k", -(-n // block), block, *ins, *outs, n, mem=mem)
    result = [o.read() for o in outs]
    for b in ins + outs:
        b.free()
    return result if len(result) > 1 else result[0]


def bits(rng, n, dtype):
    return rng.integers(0, 2 ** 63, n, dtype=np.uint64).astype(dtype) if np.dtype(dtype).itemsize < 8 \
        else (rng.integers(0, 2 ** 63, n, dtype=np.uint64) << np.uint64(1)) ^ rng.integers(0, 2, n, dtype=np.uint64)


# --- warp-level ---------------------------------------------------------------------------------

WARP_KERNEL = HEADER + """
.visible .entry shfl(.param .u64 inp, .param .u64 out, .param .u64 outp, .param .u64 bs,
                     .param .u32 c)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 4;
  ld.param.u64 %rd2, [inp];
  add.s64 %rd3, %rd2, %rd1;
  ld.global.u32 %r2, [%rd3];
  ld.param.u64 %rd2, [bs];
  add.s64 %rd4, %rd2, %rd1;
  ld.global.u32 %r3, [%rd4];
  ld.param.u32 %r4, [c];
  shfl.sync.MODE.b32 %r5|%p1, %r2, %r3, %r4, -1;
  ld.param.u64 %rd2, [out];
  add.s64 %rd5, %rd2, %rd1;
  st.global.u32 [%rd5], %r5;
  selp.u32 %r6, 1, 0, %p1;
  ld.param.u64 %rd2, [outp];
  add.s64 %rd6, %rd2, %rd1;
  st.global.u32 [%rd6], %r6;
  ret;
}
"""


def _shfl_ref(mode, lane, b, c):
    bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
    max_lane = (lane & seg) | (cval & ~seg & 31)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~seg & 31)
        ok = j <= max_lane
    return (j if ok else lane), ok


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
def test_shfl_every_mode_odd_clamps_partial_warps(mem, rng, mode):
    mod = load_ptx(WARP_KERNEL.replace("MODE", mode))
    for block in (32, 48, 70):
        for c in (0x1F, 0, 0x0F, 0x181F, 0x1C03, int(rng.integers(0, 0x2000))):
            vals = bits(rng, block, np.uint32)
            uniform = rng.random() < 0.5
            bs = np.full(block, rng.integers(0, 40), np.uint32) if uniform else \
                rng.integers(0, 64, block).astype(np.uint32)
            inp, b_buf = Buf(mem, vals), Buf(mem, bs)
            out, outp = Buf(mem, n=block, dtype=np.uint32), Buf(mem, n=block, dtype=np.uint32)
            launch(mod, "shfl", 1, block, inp, out, outp, b_buf, c, mem=mem)
            got, gotp = out.read(), outp.read()
            for t in range(block):
                lane, base = t % 32, t - t % 32
                j, ok = _shfl_ref(mode, lane, int(bs[t]), c)
                assert gotp[t] == ok, (mode, block, hex(c), t)
                if base + j < block:                       # source lane exists
                    assert got[t] == vals[base + j], (mode, block, hex(c), t, j)


def test_shfl_vote_activemask_after_divergence(mem, rng):
    text = HEADER + """
.visible .entry k(.param .u64 inp, .param .u64 out)
{
  .reg .pred %p<6>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 4;
  ld.param.u64 %rd2, [inp];
  add.s64 %rd3, %rd2, %rd1;
  ld.global.u32 %r2, [%rd3];
  ld.param.u64 %rd4, [out];
  mul.wide.u32 %rd5, %r1, 24;
  add.s64 %rd6, %rd4, %rd5;
  and.b32 %r3, %r2, 1;
  setp.eq.u32 %p1, %r3, 0;
  @%p1 bra EVEN;
  activemask.b32 %r4;
  setp.gt.u32 %p2, %r2, 0x80000000;
  vote.sync.ballot.b32 %r5, %p2, %r4;
  vote.sync.all.pred %p3, %p2, %r4;
  vote.sync.any.pred %p4, %p2, %r4;
  vote.sync.uni.pred %p5, %p2, %r4;
  selp.u32 %r6, 1, 0, %p3;
  selp.u32 %r7, 2, 0, %p4;
  selp.u32 %r8, 4, 0, %p5;
  or.b32 %r6, %r6, %r7;
  or.b32 %r6, %r6, %r8;
  shfl.sync.idx.b32 %r9, %r2, 0, 31, %r4;
  bra.uni STORE;
EVEN:
  activemask.b32 %r4;
  mov.u32 %r5, 0;
  mov.u32 %r6, 0;
  mov.u32 %r9, 0;
STORE:
  st.global.u32 [%rd6], %r4;
  st.global.u32 [%rd6+4], %r5;
  st.global.u32 [%rd6+8], %r6;
  st.global.u32 [%rd6+12], %r9;
  activemask.b32 %r10;
  st.global.u32 [%rd6+16], %r10;
  mov.u32 %r11, %lanemask_lt;
  st.global.u32 [%rd6+20], %r11;
  ret;
}
"""
    mod = load_ptx(text)
    block = 80
    vals = bits(rng, block, np.uint32)
    vals[40:64] |= 1                       # one warp all odd: the branch is converged there
    out = Buf(mem, n=(block, 6), dtype=np.uint32)
    launch(mod, "k", 1, block, Buf(mem, vals), out, mem=mem)
    got = out.read()
    for w in range(0, block, 32):
        lanes = range(w, min(w + 32, block))
        odd = [t for t in lanes if vals[t] & 1]
        even = [t for t in lanes if not vals[t] & 1]
        odd_mask = sum(1 << (t - w) for t in odd)
        even_mask = sum(1 << (t - w) for t in even)
        pb = sum(1 << (t - w) for t in odd if vals[t] > 0x80000000)
        for t in odd:
            assert got[t, 0] == odd_mask and got[t, 1] == pb
            flags = (pb == odd_mask) | (2 * (pb != 0)) | (4 * (pb in (0, odd_mask)))
            assert got[t, 2] == flags
            assert got[t, 3] == vals[w] or (w not in odd)     # lane 0 inactive: undefined
            if w in odd:
                assert got[t, 3] == vals[w]
        for t in even:
            assert got[t, 0] == even_mask
        full = sum(1 << (t - w) for t in lanes)
        for t in lanes:
            assert got[t, 4] == full                          # reconverged
            assert got[t, 5] == (1 << (t - w)) - 1


def test_match_sync(mem, rng):
    a = rng.integers(0, 4, 96).astype(np.uint32)
    a[64:96] = 7
    lane_regs = ".reg .pred %pp;"
    anym, allm, allp = elementwise(
        mem, "match.any.sync.b32 %m1, %a, -1;\nmatch.all.sync.b32 %m2|%pp, %a, -1;\n"
             "selp.u32 %m3, 1, 0, %pp;",
        [("a", "u32", a)], [("m1", "u32"), ("m2", "u32"), ("m3", "u32")], regs=lane_regs, block=96)
    for t in range(96):
        w = t - t % 32
        ref = sum(1 << (j - w) for j in range(w, w + 32) if a[j] == a[t])
        assert anym[t] == ref
        same = len(set(a[w:w + 32].tolist())) == 1
        assert allm[t] == (0xFFFFFFFF if same else 0) and allp[t] == same


# --- bit manipulation --------------------------------------------------------------------------------

def _bfe_ref(a, pos, ln, width, signed):
    pos, ln = pos & 0xFF, ln & 0xFF
    msb = width - 1
    sbit = 0 if (not signed or ln == 0) else (a >> min(pos + ln - 1, msb)) & 1
    d = 0
    for i in range(width):
        bit = (a >> (pos + i)) & 1 if (i < ln and pos + i <= msb) else sbit
        d |= bit << i
    return d


def _bfi_ref(a, b, pos, ln, width):
    pos, ln = pos & 0xFF, ln & 0xFF
    f = b
    for i in range(ln):
        if pos + i > width - 1:
            break
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
    return f


def test_bfe_bfi_edges(mem, rng):
    n = 300
    for width in (32, 64):
        ut = f"u{width}"
        a = bits(rng, n, PTX_NP[ut])
        b = bits(rng, n, PTX_NP[ut])
        pos = rng.integers(0, 80, n).astype(np.uint32)
        ln = rng.integers(0, 80, n).astype(np.uint32)
        pos[:8] = [0, 0, width - 1, width, 255, 256 + 3, 5, width - 4]
        ln[:8] = [0, width, 1, 3, 2, 4, 300, 10]
        for signed in (False, True):
            t = f"{'s' if signed else 'u'}{width}"
            got = elementwise(mem, f"bfe.{t} %d, %a, %p, %l;", [("a", ut, a), ("p", "u32", pos), ("l", "u32", ln)],
                              [("d", ut)])
            ref = [_bfe_ref(int(x), int(p), int(q), width, signed) for x, p, q in zip(a, pos, ln)]
            np.testing.assert_array_equal(got, np.array(ref, dtype=np.uint64).astype(PTX_NP[ut]), err_msg=t)
        got = elementwise(mem, f"bfi.b{width} %d, %a, %b, %p, %l;",
                          [("a", ut, a), ("b", ut, b), ("p", "u32", pos), ("l", "u32", ln)], [("d", ut)])
        ref = [_bfi_ref(int(x), int(y), int(p), int(q), width) for x, y, p, q in zip(a, b, pos, ln)]
        np.testing.assert_array_equal(got, np.array(ref, dtype=np.uint64).astype(PTX_NP[ut]))


_PRMT_SEL = {None: None, "f4e": lambda c, i: c + i, "b4e": lambda c, i: (c + 8 - i) & 7,
             "rc8": lambda c, i: c, "ecl": lambda c, i: max(c, i), "ecr": lambda c, i: min(c, i),
             "rc16": lambda c, i: (c & 1) * 2 + (i & 1)}


def _prmt_ref(a, b, c, mode):
    src = (b << 32) | a
    d = 0
    for i in range(4):
        sel = (c >> (4 * i)) & 0xF if mode is None else _PRMT_SEL[mode](c & 3, i) & 7
        byte = (src >> ((sel & 7) * 8)) & 0xFF
        if mode is None and sel & 8:
            byte = 0xFF if byte & 0x80 else 0
        d |= byte << (8 * i)
    return d


@pytest.mark.parametrize("mode", [None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"])
def test_prmt_modes(mem, rng, mode):
    a, b, c = (bits(rng, 256, np.uint32) for _ in range(3))
    c[:16] = np.arange(16) * 0x1111
    got = elementwise(mem, f"prmt.b32{'.' + mode if mode else ''} %d, %a, %b, %c;",
                      [("a", "u32", a), ("b", "u32", b), ("c", "u32", c)], [("d", "u32")])
    ref = [_prmt_ref(int(x), int(y), int(z), mode) for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(got, np.array(ref, np.uint32))


def test_popc_clz_brev_bfind_fns(mem, rng):
    for width in (32, 64):
        ut = f"u{width}"
        a = bits(rng, 300, PTX_NP[ut])
        a[:6] = [0, 1, 2 ** (width - 1), 2 ** width - 1, 2 ** (width - 2) - 1, 3 << (width - 2)]
        a[6:40] >>= rng.integers(0, width, 34).astype(PTX_NP[ut])
        popc, clz, brev, bfu, bfs, bfsh = elementwise(
            mem, f"popc.b{width} %p, %a;\nclz.b{width} %c, %a;\nbrev.b{width} %r, %a;\n"
                 f"bfind.u{width} %f, %a;\nbfind.s{width} %g, %a;\nbfind.shiftamt.u{width} %h, %a;",
            [("a", ut, a)], [("p", "u32"), ("c", "u32"), ("r", ut), ("f", "u32"), ("g", "u32"), ("h", "u32")])
        for i, v in enumerate(a.tolist()):
            assert popc[i] == bin(v).count("1") and clz[i] == width - v.bit_length()
            assert int(brev[i]) == int(f"{v:0{width}b}"[::-1], 2)
            assert bfu[i] == (v.bit_length() - 1 if v else 0xFFFFFFFF)
            sv = v - (1 << width) if v >> (width - 1) else v
            nv = ~sv if sv < 0 else sv
            assert bfs[i] == (nv.bit_length() - 1 if nv else 0xFFFFFFFF)
            assert bfsh[i] == (width - v.bit_length() if v else 0xFFFFFFFF)
    mask = bits(rng, 300, np.uint32)
    base = rng.integers(0, 32, 300).astype(np.uint32)
    off = rng.integers(-34, 34, 300).astype(np.int32)
    got = elementwise(mem, "fns.b32 %d, %m, %b, %o;", [("m", "u32", mask), ("b", "u32", base), ("o", "s32", off)],
                      [("d", "u32")])
    for i in range(300):
        m, b, o = int(mask[i]), int(base[i]), int(off[i])
        ref = 0xFFFFFFFF
        if o == 0:
            ref = b if (m >> b) & 1 else ref
        else:
            pos, count, inc = b, abs(o) - 1, 1 if o > 0 else -1
            while 0 <= pos < 32:
                if (m >> pos) & 1:
                    if count == 0:
                        ref = pos
                        break
                    count -= 1
                pos += inc
        assert got[i] == ref, (hex(m), b, o)


def test_lop3_random_truth_tables_and_funnel_shifts(mem, rng):
    a, b, c = (bits(rng, 200, np.uint32) for _ in range(3))
    for lut in [0, 0xFF, 0x96, 0xE8, 0xCA] + rng.integers(0, 256, 4).tolist():
        got = elementwise(mem, f"lop3.b32 %d, %a, %b, %c, {lut};",
                          [("a", "u32", a), ("b", "u32", b), ("c", "u32", c)], [("d", "u32")])
        ta, tb, tc = 0xF0, 0xCC, 0xAA
        for i in range(200):
            ref = 0
            for bit in range(32):
                idx = (((int(a[i]) >> bit) & 1) << 2) | (((int(b[i]) >> bit) & 1) << 1) | ((int(c[i]) >> bit) & 1)
                ref |= ((lut >> idx) & 1) << bit
            assert got[i] == ref, (hex(lut), i)
        del ta, tb, tc
    n = rng.integers(0, 70, 200).astype(np.uint32)
    for d in ("l", "r"):
        for mode in ("wrap", "clamp"):
            got = elementwise(mem, f"shf.{d}.{mode}.b32 %d, %a, %b, %n;",
                              [("a", "u32", a), ("b", "u32", b), ("n", "u32", n)], [("d", "u32")])
            for i in range(200):
                s = int(n[i]) & 31 if mode == "wrap" else min(int(n[i]), 32)
                v = (int(b[i]) << 32) | int(a[i])
                ref = ((v << s) >> 32) & 0xFFFFFFFF if d == "l" else (v >> s) & 0xFFFFFFFF
                assert got[i] == ref


def test_integer_extras_mul24_sad_dp4a_slct_copysign_testp(mem, rng):
    a = bits(rng, 256, np.uint32)
    b = bits(rng, 256, np.uint32)
    c = bits(rng, 256, np.uint32)
    outs = elementwise(
        mem, "mul24.lo.u32 %o1, %a, %b;\nmul24.hi.s32 %o2, %a, %b;\nmad24.lo.s32 %o3, %a, %b, %c;\n"
             "sad.s32 %o4, %a, %b, %c;\ndp4a.s32.u32 %o5, %a, %b, %c;\ndp2a.hi.u32.s32 %o6, %a, %b, %c;\n"
             "slct.u32.s32 %o7, %a, %b, %c;",
        [("a", "u32", a), ("b", "u32", b), ("c", "u32", c)], [(f"o{i}", "u32") for i in range(1, 8)])

    def s(v, w):
        return v - (1 << w) if v >> (w - 1) & 1 else v
    for i in range(256):
        x, y, z = int(a[i]), int(b[i]), int(c[i])
        assert outs[0][i] == ((x & 0xFFFFFF) * (y & 0xFFFFFF)) & 0xFFFFFFFF
        assert outs[1][i] == ((s(x & 0xFFFFFF, 24) * s(y & 0xFFFFFF, 24)) >> 16) & 0xFFFFFFFF
        assert outs[2][i] == (s(x & 0xFFFFFF, 24) * s(y & 0xFFFFFF, 24) + z) & 0xFFFFFFFF
        assert outs[3][i] == (z + abs(s(x, 32) - s(y, 32))) & 0xFFFFFFFF
        dp = sum(s((x >> 8 * k) & 0xFF, 8) * ((y >> 8 * k) & 0xFF) for k in range(4))
        assert outs[4][i] == (dp + z) & 0xFFFFFFFF
        dp2 = (x & 0xFFFF) * s((y >> 16) & 0xFF, 8) + (x >> 16) * s((y >> 24) & 0xFF, 8)
        assert outs[5][i] == (dp2 + z) & 0xFFFFFFFF
        assert outs[6][i] == (x if s(z, 32) >= 0 else y)
    f = np.array([1.5, -2.0, np.nan, np.inf, -0.0, 1e-40, -3e-39, 0.0, 3e38], np.float32)
    g = np.array([-1.0, 3.0, 1.0, -2.0, 5.0, -1.0, 2.0, -0.0, -1.0], np.float32)
    cs, fin, sub, nrm, nan = elementwise(
        mem, "copysign.f32 %d, %a, %b;\ntestp.finite.f32 %q0, %b;\nselp.u32 %e1, 1, 0, %q0;\n"
             "testp.subnormal.f32 %q0, %b;\nselp.u32 %e2, 1, 0, %q0;\n"
             "testp.normal.f32 %q0, %b;\nselp.u32 %e3, 1, 0, %q0;\n"
             "testp.notanumber.f32 %q0, %b;\nselp.u32 %e4, 1, 0, %q0;",
        [("a", "f32", g), ("b", "f32", f)], [("d", "f32"), ("e1", "u32"), ("e2", "u32"), ("e3", "u32"), ("e4", "u32")],
        regs=".reg .pred %q0;")
    ref = np.copysign(np.abs(f), g)
    assert np.array_equal(np.signbit(cs), np.signbit(ref)) and np.allclose(cs, ref, equal_nan=True)
    tiny = np.finfo(np.float32).tiny
    np.testing.assert_array_equal(fin, np.isfinite(f))
    np.testing.assert_array_equal(sub, (f != 0) & (np.abs(f) < tiny))
    np.testing.assert_array_equal(nrm, np.isfinite(f) & (np.abs(f) >= tiny))
    np.testing.assert_array_equal(nan, np.isnan(f))


def test_carry_chains_128_bit(mem, rng):
    n = 256
    w = [bits(rng, n, np.uint32) for _ in range(8)]
    w[0][:4] = 0xFFFFFFFF
    w[4][:4] = [1, 0, 0xFFFFFFFF, 1]
    for k in (1, 2, 3):
        w[k][:4] = 0xFFFFFFFF
    body = """
add.cc.u32 %s0, %a0, %b0;
addc.cc.u32 %s1, %a1, %b1;
addc.cc.u32 %s2, %a2, %b2;
addc.u32 %s3, %a3, %b3;
sub.cc.u32 %d0, %a0, %b0;
subc.cc.u32 %d1, %a1, %b1;
subc.cc.u32 %d2, %a2, %b2;
subc.u32 %d3, %a3, %b3;
mul.lo.u32 %m0, %a0, %b0;
mul.hi.u32 %t, %a0, %b0;
mad.lo.cc.u32 %m1, %a1, %b0, %t;
madc.hi.u32 %m2, %a1, %b0, 0;
"""
    names = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    outs = elementwise(mem, body, [(nm, "u32", w[i]) for i, nm in enumerate(names)],
                       [(f"{p}{i}", "u32") for p in "sd" for i in range(4)] + [(f"m{i}", "u32") for i in range(3)],
                       regs=".reg .b32 %t;")
    for i in range(n):
        A = sum(int(w[k][i]) << (32 * k) for k in range(4))
        B = sum(int(w[4 + k][i]) << (32 * k) for k in range(4))
        S = sum(int(outs[k][i]) << (32 * k) for k in range(4))
        D = sum(int(outs[4 + k][i]) << (32 * k) for k in range(4))
        M = sum(int(outs[8 + k][i]) << (32 * k) for k in range(3))
        assert S == (A + B) % 2 ** 128 and D == (A - B) % 2 ** 128
        assert M == ((A & (2 ** 64 - 1)) * int(w[4][i])) % 2 ** 96
    a64, b64 = bits(rng, n, np.uint64), bits(rng, n, np.uint64)
    lo, hi = elementwise(mem, "add.cc.u64 %l, %a, %b;\naddc.u64 %h, 0, 0;",
                         [("a", "u64", a64), ("b", "u64", b64)], [("l", "u64"), ("h", "u64")])
    for i in range(n):
        s = int(a64[i]) + int(b64[i])
        assert int(lo[i]) == s % 2 ** 64 and int(hi[i]) == s >> 64


# --- half precision ----------------------------------------------------------------------------------

F16 = dict(p=11, emin=-14, emax=15)
BF16 = dict(p=8, emin=-126, emax=127)


def _round_exact(x: Fraction, mode, p, emin, emax):
    """Exact value -> nearest representable in a binary format (as Fraction or +-inf)."""
    if x == 0:
        return x
    sign = -1 if x < 0 else 1
    ax = abs(x)
    e = math.floor(math.log2(ax))
    while Fraction(2) ** e > ax:
        e -= 1
    while Fraction(2) ** (e + 1) <= ax:
        e += 1
    q = Fraction(2) ** (max(e, emin) - (p - 1))          # quantum
    lo = (ax // q) * q
    hi = lo + q if lo != ax else lo
    maxv = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if mode == "rn":
        r = lo if (ax - lo < hi - ax or (ax - lo == hi - ax and (lo / q) % 2 == 0)) else hi
        if r > maxv:
            return sign * math.inf if ax >= maxv + q / 2 else sign * maxv
    else:
        toward_zero = mode == "rz" or (mode == "rm" and sign > 0) or (mode == "rp" and sign < 0)
        r = lo if toward_zero else hi
        if r > maxv:
            return sign * (maxv if toward_zero else math.inf)
    return sign * r


def _f16_val(u16):
    return np.uint16(u16).view(np.float16).astype(np.float64)


def _bf16_val(u16):
    return np.float64(np.uint32(int(u16) << 16).view(np.float32))


def _check_half(got_bits, exact, mode, fmt, what):
    val = _f16_val if fmt is F16 else _bf16_val
    for g, x in zip(got_bits.tolist(), exact):
        v = val(g)
        if x is None:
            assert math.isnan(v), what
            continue
        ref = _round_exact(x, mode, **fmt) if isinstance(x, Fraction) else x
        if isinstance(ref, Fraction):
            assert Fraction(float(v)) == ref, (what, float(x), float(v), float(ref))
        else:
            assert v == ref, (what, x, v)


def _special_floats(rng, n, dtype):
    v = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(dtype)
    sp = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 70000, -65520.5, 6e-8, 3e-8,
          2.0 ** -24, 2.0 ** -25, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1e-40, -1e-39, 3.4e38, 1.00390625]
    v[:len(sp)] = np.array(sp, np.float64).astype(dtype)
    return v


def _exact_or(v):
    v = float(v)
    return None if math.isnan(v) else (v if math.isinf(v) else Fraction(v))


@pytest.mark.parametrize("src", ["f32", "f64"])
def test_cvt_to_f16_and_bf16_every_rounding_mode(mem, rng, src):
    x = _special_floats(rng, 400, PTX_NP[src])
    exact = [_exact_or(v) for v in x]
    for mode in ("rn", "rz", "rm", "rp"):
        h = elementwise(mem, f"cvt.{mode}.f16.{src} %h, %a;\ncvt.u32.u16 %d, %h;", [("a", src, x)],
                        [("d", "u32")], regs=".reg .b16 %h;")
        _check_half(h.astype(np.uint16), exact, mode, F16, f"cvt.{mode}.f16.{src}")
        if src == "f32" or mode == "rn":
            b = elementwise(mem, f"cvt.{mode}.bf16.{src} %h, %a;\ncvt.u32.u16 %d, %h;", [("a", src, x)],
                            [("d", "u32")], regs=".reg .b16 %h;")
            _check_half(b.astype(np.uint16), exact, mode, BF16, f"cvt.{mode}.bf16.{src}")
    if src == "f32":     # numpy's own rn conversion agrees; and back to f32 is exact
        h = elementwise(mem, "cvt.rn.f16.f32 %h, %a;\ncvt.f32.f16 %d, %h;", [("a", "f32", x)], [("d", "f32")],
                        regs=".reg .b16 %h;")
        np.testing.assert_array_equal(h, x.astype(np.float16).astype(np.float32))
        p = elementwise(mem, "cvt.rn.f16x2.f32 %d, %a, %b;", [("a", "f32", x), ("b", "f32", x[::-1].copy())],
                        [("d", "u32")])
        np.testing.assert_array_equal((p >> 16).astype(np.uint16), x.astype(np.float16).view(np.uint16) |
                                      np.where(np.isnan(x), 0x7FFF, 0).astype(np.uint16))
        s = elementwise(mem, "cvt.rn.sat.f16.f32 %h, %a;\ncvt.f32.f16 %d, %h;", [("a", "f32", x)], [("d", "f32")],
                        regs=".reg .b16 %h;")
        ref = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(s, ref)


def test_f16_bf16_arithmetic_single_rounding(mem, rng):
    n = 300
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-14, 8, n))).astype(np.float16)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-14, 8, n))).astype(np.float16)
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 8, n))).astype(np.float16)
    a[:6] = [np.inf, np.nan, 6e-8, 65504, -0.0, 1]
    b[:6] = [-np.inf, 1, 6e-8, 65504, 0.0, 2.0 ** -11]
    ins = [(nm, "u16", v.view(np.uint16)) for nm, v in (("a", a), ("b", b), ("c", c))]
    outs = elementwise(mem, "add.f16 %o1, %a, %b;\nsub.f16 %o2, %a, %b;\nmul.f16 %o3, %a, %b;\n"
                            "fma.rn.f16 %o4, %a, %b, %c;\nmin.f16 %o5, %a, %b;\nmax.NaN.f16 %o6, %a, %b;\n"
                            "neg.f16 %o7, %a;\nadd.rn.sat.f16 %o8, %a, %b;",
                       ins, [(f"o{i}", "u16") for i in range(1, 9)])
    F = [_exact_or(v) for v in a.astype(np.float64)], [_exact_or(v) for v in b.astype(np.float64)], \
        [_exact_or(v) for v in c.astype(np.float64)]

    def combine(fn, *xs):
        out = []
        for vals in zip(*xs):
            if any(v is None for v in vals) or any(isinstance(v, float) for v in vals):
                r = fn(*[np.float64(float(v)) if v is not None else np.nan for v in vals])
                out.append(None if np.isnan(r) else float(r))
            else:
                out.append(fn(*vals))
        return out
    _check_half(outs[0], combine(lambda x, y: x + y, F[0], F[1]), "rn", F16, "add.f16")
    _check_half(outs[1], combine(lambda x, y: x - y, F[0], F[1]), "rn", F16, "sub.f16")
    _check_half(outs[2], combine(lambda x, y: x * y, F[0], F[1]), "rn", F16, "mul.f16")
    _check_half(outs[3], combine(lambda x, y, z: x * y + z, *F), "rn", F16, "fma.f16")
    np.testing.assert_array_equal(outs[4].view(np.float16), np.fmin(a, b))
    mx = np.where(np.isnan(a) | np.isnan(b), np.nan, np.maximum(a, b)).astype(np.float16)
    np.testing.assert_array_equal(outs[5].view(np.float16), mx)
    np.testing.assert_array_equal(outs[6], a.view(np.uint16) ^ 0x8000)
    sat = np.where(np.isnan(a + b), 0, np.clip((a.astype(np.float64) + b).astype(np.float16), 0, 1))
    np.testing.assert_array_equal(outs[7].view(np.float16), sat.astype(np.float16))
    # packed pairs: each half on its own; setp.f16x2 p|q takes the low and the high halves
    pa = a.view(np.uint16).astype(np.uint32) | (b.view(np.uint16).astype(np.uint32) << 16)
    pb = c.view(np.uint16).astype(np.uint32) | (a.view(np.uint16).astype(np.uint32) << 16)
    d, p, q = elementwise(mem, "mul.rn.f16x2 %d, %a, %b;\nsetp.lt.f16x2 %p|%q, %a, %b;\n"
                               "selp.u32 %e, 1, 0, %p;\nselp.u32 %f, 1, 0, %q;",
                          [("a", "u32", pa), ("b", "u32", pb)], [("d", "u32"), ("e", "u32"), ("f", "u32")],
                          regs=".reg .pred %p, %q;")
    _check_half((d & 0xFFFF).astype(np.uint16), combine(lambda x, y: x * y, F[0], F[2]), "rn", F16, "mul.f16x2 lo")
    _check_half((d >> 16).astype(np.uint16), combine(lambda x, y: x * y, F[1], F[0]), "rn", F16, "mul.f16x2 hi")
    np.testing.assert_array_equal(p, a < c)
    np.testing.assert_array_equal(q, b < a)
    # bf16: add and fma, one rounding from the exact value
    ab = (rng.standard_normal(n) * np.exp2(rng.integers(-100, 100, n))).astype(np.float32)
    bb = (rng.standard_normal(n) * np.exp2(rng.integers(-100, 100, n))).astype(np.float32)
    ah = (ab.view(np.uint32) >> 16).astype(np.uint16)
    bh = (bb.view(np.uint32) >> 16).astype(np.uint16)
    r1, r2 = elementwise(mem, "add.rn.bf16 %o1, %a, %b;\nfma.rn.bf16 %o2, %a, %b, %a;",
                         [("a", "u16", ah), ("b", "u16", bh)], [("o1", "u16"), ("o2", "u16")])
    fa = [Fraction(float(_bf16_val(v))) for v in ah]
    fb = [Fraction(float(_bf16_val(v))) for v in bh]
    _check_half(r1, [x + y for x, y in zip(fa, fb)], "rn", BF16, "add.bf16")
    _check_half(r2, [x * y + x for x, y in zip(fa, fb)], "rn", BF16, "fma.bf16")
    # ex2.approx.f16: the ISA's maximum relative error is 2^-9.9
    x = rng.uniform(-14, 15, n).astype(np.float16)
    e = elementwise(mem, "ex2.approx.f16 %d, %a;", [("a", "u16", x.view(np.uint16))], [("d", "u16")])
    ref = np.exp2(x.astype(np.float64))
    assert np.all(np.abs(e.view(np.float16).astype(np.float64) - ref) <= ref * 2 ** -9.9 + 2 ** -24)


# --- directed rounding, approximations, min/max ---------------------------------------------------

def _check_directed(exact: Fraction, got, mode, dtype):
    g = float(got)
    if math.isinf(g):
        assert mode in ("rn", "rp", "rm"), (exact, g)
        return
    gf = Fraction(g)
    up = float(np.nextafter(dtype(g), dtype(np.inf)))
    dn = float(np.nextafter(dtype(g), dtype(-np.inf)))
    if mode == "rz":
        nxt = up if exact > 0 else dn
        assert abs(gf) <= abs(exact) and (gf == exact or math.isinf(nxt) or abs(Fraction(nxt)) > abs(exact))
    elif mode == "rm":
        assert gf <= exact and (gf == exact or math.isinf(up) or Fraction(up) > exact)
    else:
        assert gf >= exact and (gf == exact or math.isinf(dn) or Fraction(dn) < exact)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_directed_rounding_div_sqrt_rcp(mem, rng, t):
    dt = PTX_NP[t]
    n = 200
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n))).astype(dt)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-60, 60, n))).astype(dt)
    a[:4] = [1, 3, 1e-30, 7]
    b[:4] = [3, 7, 1e30, 1e-30]
    pos = np.abs(a)
    if t == "f64":
        pos[4:8] = [1e-310, 4e-320, 1e300, 2.0]
        a[4:6] = [1e300, 5e-324]
        b[4:6] = [1e-300, 3.0]
    for mode in ("rz", "rm", "rp"):
        q, r, s = elementwise(mem, f"div.{mode}.{t} %q, %a, %b;\nrcp.{mode}.{t} %r, %b;\nsqrt.{mode}.{t} %s, %p;",
                              [("a", t, a), ("b", t, b), ("p", t, pos)], [("q", t), ("r", t), ("s", t)])
        for i in range(n):
            _check_directed(Fraction(float(a[i])) / Fraction(float(b[i])), q[i], mode, dt)
            _check_directed(1 / Fraction(float(b[i])), r[i], mode, dt)
            x, g = Fraction(float(pos[i])), Fraction(float(s[i]))
            up = Fraction(float(np.nextafter(s[i], dt(np.inf))))
            dn = Fraction(float(np.nextafter(s[i], dt(0))))
            if mode == "rp":
                assert g * g >= x and dn * dn < x
            else:
                assert g * g <= x and up * up > x


def test_approximate_functions_within_isa_bounds(mem, rng):
    x = rng.uniform(-100 * np.pi, 100 * np.pi, 400).astype(np.float32)
    e = rng.uniform(-120, 120, 400).astype(np.float32)
    pos = np.exp2(rng.uniform(-120, 120, 400)).astype(np.float32)
    outs = elementwise(mem, "sin.approx.f32 %o1, %x;\ncos.approx.ftz.f32 %o2, %x;\nex2.approx.f32 %o3, %e;\n"
                            "lg2.approx.f32 %o4, %p;\nrsqrt.approx.f32 %o5, %p;\ntanh.approx.f32 %o6, %e;\n"
                            "sqrt.approx.f32 %o7, %p;\nrcp.approx.ftz.f32 %o8, %p;",
                       [("x", "f32", x), ("e", "f32", e), ("p", "f32", pos)], [(f"o{i}", "f32") for i in range(1, 9)])
    X, E, P = x.astype(np.float64), e.astype(np.float64), pos.astype(np.float64)
    assert np.max(np.abs(outs[0] - np.sin(X))) <= 2 ** -20.5          # ISA: absolute, |x| <= 100 pi
    assert np.max(np.abs(outs[1] - np.cos(X))) <= 2 ** -20.5
    assert np.all(np.abs(outs[2] - np.exp2(E)) <= np.exp2(E) * 2 ** -22)     # 2 ulp
    lg = np.log2(P)             # 2^-22 absolute, or half an ulp where the f32 result is coarser
    assert np.all(np.abs(outs[3] - lg) <= np.maximum(2 ** -22, np.spacing(np.abs(lg).astype(np.float32)) / 2))
    assert np.all(np.abs(outs[4] - 1 / np.sqrt(P)) <= 2 ** -22.9 / np.sqrt(P))
    assert np.all(np.abs(outs[5] - np.tanh(E)) <= 2 ** -11 * np.abs(np.tanh(E)) + 1e-30)
    assert np.all(np.abs(outs[6] - np.sqrt(P)) <= 2 ** -23 * np.sqrt(P))
    assert np.all(np.abs(outs[7] - 1 / P) <= 2 ** -23 * (1 / P))
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0], np.float32)
    lg, ex, rs = elementwise(mem, "lg2.approx.f32 %a, %x;\nex2.approx.f32 %b, %x;\nrsqrt.approx.f32 %c, %x;",
                             [("x", "f32", sp)], [("a", "f32"), ("b", "f32"), ("c", "f32")])
    np.testing.assert_array_equal(lg, [-np.inf, -np.inf, np.inf, np.nan, np.nan, np.nan])
    np.testing.assert_array_equal(ex, [1, 1, np.inf, 0, np.nan, 0.5])
    np.testing.assert_array_equal(rs, [np.inf, -np.inf, 0, np.nan, np.nan, np.nan])
    d = elementwise(mem, "rcp.approx.ftz.f64 %d, %a;", [("a", "f64", P)], [("d", "f64")])
    np.testing.assert_allclose(d, 1 / P, rtol=2 ** -50)


def test_min_max_nan_rules(mem):
    a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, 2.0, -np.inf], np.float32)
    b = np.array([1.0, np.nan, np.nan, 0.0, -0.0, 3.0, np.nan], np.float32)
    mn, mx, mnn, mxn = elementwise(mem, "min.f32 %a1, %a, %b;\nmax.f32 %a2, %a, %b;\n"
                                        "min.NaN.f32 %a3, %a, %b;\nmax.NaN.f32 %a4, %a, %b;",
                                   [("a", "f32", a), ("b", "f32", b)], [(f"a{i}", "f32") for i in range(1, 5)])
    np.testing.assert_array_equal(mn, [1, 1, np.nan, -0.0, -0.0, 2, -np.inf])
    np.testing.assert_array_equal(np.signbit(mn[3:5]), [True, True])
    np.testing.assert_array_equal(mx, [1, 1, np.nan, 0, 0, 3, -np.inf])
    np.testing.assert_array_equal(np.signbit(mx[3:5]), [False, False])
    assert np.isnan(mnn[[0, 1, 2, 6]]).all() and np.isnan(mxn[[0, 1, 2, 6]]).all()
    assert mnn[5] == 2 and mxn[5] == 3


# --- special registers ----------------------------------------------------------------------------------

def test_clock_globaltimer_smid_nanosleep(mem):
    text = HEADER + """
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.u32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd1, %r4, 48;
  ld.param.u64 %rd2, [out];
  add.s64 %rd3, %rd2, %rd1;
  mov.u64 %rd4, %clock64;
  nanosleep.u32 100;
  mov.u64 %rd5, %clock64;
  mov.u32 %r5, %clock;
  mov.u64 %rd6, %globaltimer;
  mov.u32 %r6, %smid;
  mov.u32 %r7, %nsmid;
  st.global.u64 [%rd3], %rd4;
  st.global.u64 [%rd3+8], %rd5;
  st.global.u64 [%rd3+16], %rd6;
  st.global.u32 [%rd3+24], %r5;
  st.global.u32 [%rd3+28], %r6;
  st.global.u32 [%rd3+32], %r7;
  mov.u64 %rd7, %gridid;
  st.global.u64 [%rd3+40], %rd7;
  ret;
}
"""
    import time
    mod = load_ptx(text)
    out = Buf(mem, n=(300 * 64, 6), dtype=np.uint64)
    t0 = time.time_ns()
    launch(mod, "k", 300, 64, out, mem=mem)
    got = out.read()
    assert (got[:, 1] > got[:, 0]).all()
    assert (got[:, 2] >= t0).all() and (got[:, 2] <= time.time_ns()).all()
    smid = got[:, 3] >> np.uint64(32)
    nsm = got[:, 4] & np.uint64(0xFFFFFFFF)
    assert (nsm == 132).all() and (smid < nsm).all() and len(set(smid.tolist())) > 1
    assert len(set(got[:, 5].tolist())) == 1


# --- calls and printf ------------------------------------------------------------------------------------

def test_device_function_calls_inlined(mem, rng):
    text = HEADER + """
.func (.param .b32 r) clampsum(.param .b32 a, .param .b32 b)
{
  .reg .b32 %x<4>;
  .reg .pred %p;
  ld.param.b32 %x1, [a];
  ld.param.b32 %x2, [b];
  add.s32 %x3, %x1, %x2;
  setp.lt.s32 %p, %x3, 0;
  @%p bra NEG;
  st.param.b32 [r], %x3;
  ret;
NEG:
  mov.u32 %x3, 0;
  st.param.b32 [r], %x3;
  ret;
}
.func bump(.param .b64 ptr)
{
  .reg .b64 %y;
  .reg .b32 %z;
  ld.param.b64 %y, [ptr];
  ld.global.u32 %z, [%y];
  add.u32 %z, %z, 1000;
  st.global.u32 [%y], %z;
  ret;
}
.visible .entry k(.param .u64 inp, .param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 4;
  ld.param.u64 %rd2, [inp];
  add.s64 %rd3, %rd2, %rd1;
  ld.global.s32 %r2, [%rd3];
  ld.param.u64 %rd4, [out];
  add.s64 %rd5, %rd4, %rd1;
  {
  .param .b32 param0;
  st.param.b32 [param0], %r2;
  .param .b32 param1;
  st.param.b32 [param1], %r1;
  .param .b32 retval0;
  call.uni (retval0), clampsum, (param0, param1);
  ld.param.b32 %r3, [retval0];
  }
  st.global.u32 [%rd5], %r3;
  {
  .param .b64 param0;
  st.param.b64 [param0], %rd5;
  call.uni bump, (param0);
  }
  ret;
}
"""
    mod = load_ptx(text)
    x = rng.integers(-100, 100, 96).astype(np.int32)
    out = Buf(mem, n=96, dtype=np.int32)
    launch(mod, "k", 1, 96, Buf(mem, x), out, mem=mem)
    np.testing.assert_array_equal(out.read(), np.maximum(x + np.arange(96), 0) + 1000)
    recursive = HEADER + """
.func f(.param .b32 a)
{
  {
  .param .b32 param0;
  call.uni f, (param0);
  }
  ret;
}
.visible .entry k() { call.uni f, (param0); ret; }
"""
    endless = load_ptx(recursive.replace("call.uni f, (param0); ret; }",
                                         "{ .param .b32 param0; call.uni f, (param0); } ret; }"))
    with pytest.raises(KernelFault, match="stack overflow in the recursion of 'f'"):
        launch(endless, "k", 1, 32, mem=mem)     # a real call (isa/recursion.py), endlessly


def test_printf_formats_in_thread_order(mem, rng):
    src = r"""
extern "C" __device__ int printf(const char*, ...);
extern "C" __global__ void p(const float* x, int tag) {
    int t = threadIdx.x;
    if (t % 3 == 0)
        printf("[%d] t=%03d u=%u x=%08x f=%.2f e=%e g=%g s=%s c=%c ll=%lld %5.1f|%-4d|\n", tag, t,
               4000000000u, 0xbeefu + t, x[t], x[t], (double)x[t], "str", 'A' + t % 26,
               -1234567890123ll * t, x[t], t);
}
"""
    mod = load_ptx(nvrtc_ptx(src))
    x = rng.uniform(-50, 50, 40).astype(np.float32)
    tag = int(rng.integers(1, 999))
    stats = launch(mod, "p", 1, 40, Buf(mem, x), tag, mem=mem)
    lines = stats.printed.splitlines()
    ref = []
    for t in range(0, 40, 3):
        v = float(x[t])
        ref.append(f"[{tag}] t={t:03d} u=4000000000 x={0xbeef + t:08x} f={v:.2f} e={v:e} g={v:g} s=str "
                   f"c={chr(65 + t % 26)} ll={-1234567890123 * t} {v:5.1f}|{t:<4d}|")
    assert lines == ref


# --- CUDA C through NVRTC -------------------------------------------------------------------------

def _include():
    pathfinder = pytest.importorskip("cuda.pathfinder")
    inc = pathfinder.find_nvidia_header_directory("cudart")
    if inc is None or not (pathlib.Path(inc) / "cuda_fp16.h").is_file():
        pytest.skip("cuda_fp16.h not found")
    return f"-I{inc}"


CUDA_SRC = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __device__ int printf(const char*, ...);
__device__ __noinline__ unsigned mix(unsigned a, unsigned b) { return __brev(a) ^ __byte_perm(a, b, 0x4152); }
extern "C" __global__ void kern(const float* x, const unsigned* u, float* red, unsigned* bitsout,
                                __half* h, __nv_bfloat16* bf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    float s = v, m = v;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    unsigned b = __ballot_sync(0xffffffffu, v > 0.0f);
    if ((threadIdx.x & 31) == 0) { red[2 * (i / 32)] = s; red[2 * (i / 32) + 1] = m + __popc(b); }
    if (i >= n) return;
    unsigned a = u[i];
    bitsout[4 * i] = mix(a, a * 7u);
    bitsout[4 * i + 1] = __clz(a) + (__popc(a) << 8) + (__ffs(a) << 16);
    bitsout[4 * i + 2] = __funnelshift_l(a, a ^ 0x5a5a5a5au, i);
    bitsout[4 * i + 3] = __funnelshift_r(a, a * 3u, i);
    __half hx = __float2half_rn(v);
    __half2 p = __halves2half2(hx, __hmul(hx, __float2half_rn(0.5f)));
    p = __hadd2(p, p);
    h[2 * i] = __hadd(__low2half(p), __float2half_rn(1.0f));
    h[2 * i + 1] = __high2half(p);
    bf[i] = __float2bfloat16(v * 3.0f);
    if (i == 3) printf("v=%.3f i=%d\n", v, i);
}
"""


@pytest.mark.parametrize("opts", [(), ("--use_fast_math",), ("-G",)], ids=["O3", "fastmath", "G"])
def test_nvrtc_warp_half_bits_call_printf(mem, rng, opts):
    mod = load_ptx(nvrtc_ptx(CUDA_SRC, options=[_include(), *opts]))
    n = 90
    x = rng.uniform(-8, 8, 96).astype(np.float32)
    u = bits(rng, n, np.uint32)
    red = Buf(mem, n=6, dtype=np.float32)
    bo = Buf(mem, n=4 * n, dtype=np.uint32)
    h = Buf(mem, n=2 * n, dtype=np.uint16)
    bf = Buf(mem, n=n, dtype=np.uint16)
    stats = launch(mod, "kern", 1, 96, Buf(mem, x), Buf(mem, u), red, bo, h, bf, n, mem=mem)
    xv = np.where(np.arange(96) < n, x, 0).astype(np.float32)
    r = red.read().reshape(3, 2)
    for w in range(3):
        seg = xv[32 * w:32 * w + 32]
        np.testing.assert_allclose(r[w, 0], seg.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)
        assert r[w, 1] == seg.max() + np.float32(np.count_nonzero(seg > 0))
    got = bo.read().reshape(n, 4)
    for i, a in enumerate(u.tolist()):
        b = (a * 7) & 0xFFFFFFFF
        src = (b << 32) | a
        perm = 0
        for k, sel in enumerate([2, 5, 1, 4]):
            perm |= ((src >> (8 * sel)) & 0xFF) << (8 * k)
        assert got[i, 0] == int(f"{a:032b}"[::-1], 2) ^ perm
        ffs = (a & -a).bit_length()
        assert got[i, 1] == (32 - a.bit_length()) + (bin(a).count("1") << 8) + (ffs << 16)
        hi = a ^ 0x5A5A5A5A
        assert got[i, 2] == ((((hi << 32) | a) << (i & 31)) >> 32) & 0xFFFFFFFF
        assert got[i, 3] == ((((a * 3 & 0xFFFFFFFF) << 32) | a) >> (i & 31)) & 0xFFFFFFFF
    hx = x[:n].astype(np.float16)
    lo = (hx.astype(np.float32) * 2).astype(np.float16)
    hi = ((hx * np.float16(0.5)).astype(np.float32) * 2).astype(np.float16)
    hv = h.read().view(np.float16).reshape(n, 2)
    np.testing.assert_array_equal(hv[:, 0], (lo.astype(np.float32) + 1).astype(np.float16))
    np.testing.assert_array_equal(hv[:, 1], hi)
    prod = (x[:n] * np.float32(3)).astype(np.float32) if "--use_fast_math" not in opts else x[:n] * np.float32(3)
    bfx = [_round_exact(Fraction(float(v)), "rn", **BF16) for v in prod]
    np.testing.assert_array_equal([Fraction(float(_bf16_val(g))) for g in bf.read()], bfx)
    assert stats.printed == f"v={float(x[3]):.3f} i=3\n"


def test_printf_reaches_stdout_through_the_driver(capfd):
    from lowlevel import cuda
    src = r"""
extern "C" __device__ int printf(const char*, ...);
extern "C" __global__ void hello(int k) { if (threadIdx.x < 2) printf("hello %d from %d\n", k, threadIdx.x); }
"""
    f = cuda.Module.from_ptx(nvrtc_ptx(src)).get_function("hello")
    capfd.readouterr()
    f.launch(1, 32, (7,))
    cuda.synchronize()
    assert capfd.readouterr().out == "hello 7 from 0\nhello 7 from 1\n"


def test_redux_sync_partial_warp(mem, rng):
    a = bits(rng, 80, np.uint32)
    s, mn, x = elementwise(mem, "redux.sync.add.s32 %d1, %a, -1;\nredux.sync.min.u32 %d2, %a, -1;\n"
                                "redux.sync.xor.b32 %d3, %a, -1;",
                           [("a", "u32", a)], [("d1", "u32"), ("d2", "u32"), ("d3", "u32")], block=96)
    for t in range(80):
        w = a[t - t % 32:min(t - t % 32 + 32, 80)].astype(np.uint64)        # live lanes only
        assert s[t] == int(w.sum()) & 0xFFFFFFFF and mn[t] == w.min()
        assert x[t] == np.bitwise_xor.reduce(w)

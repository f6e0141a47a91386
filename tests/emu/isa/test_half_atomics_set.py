"""Half-precision atomics (atomicCAS on 16 bits, atomicAdd on __half, __half2,
__nv_bfloat16, __nv_bfloat162: atom.cas.b16, atom.add.noftz.{f16,bf16,f16x2,bf16x2}) and
comparisons into a half pair (__hgt2: set.gt.f16x2.f16x2, __hle2_mask: set.le.u32.f16x2),
as NVRTC compiles them for sm_80 and sm_90.

References are independent of the emulator: numpy float16 and a bit-level bfloat16
rounding; the atomic tests are built so that the order threads reach an address in (which
a GPU leaves open) does not change the answer. Inputs random, outputs poisoned.
"""
import numpy as np
import pytest

from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, poisoned, upload
from lowlevel import cuda

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void cas16(unsigned short* p, const unsigned short* cmp, const unsigned short* val,
                                 unsigned short* old) {
    int t = threadIdx.x; old[t] = atomicCAS(p + (t % 4), cmp[t], val[t]); }
extern "C" __global__ void addh2(__half2* p, const __half2* v) { int t = threadIdx.x; atomicAdd(p + (t % 3), v[t]); }
extern "C" __global__ void addbf2(__nv_bfloat162* p, const __nv_bfloat162* v) { int t = threadIdx.x; atomicAdd(p + (t % 3), v[t]); }
extern "C" __global__ void addh(__half* p, const __half* v) { int t = threadIdx.x; atomicAdd(p + (t % 3), v[t]); }
extern "C" __global__ void addbf(__nv_bfloat16* p, const __nv_bfloat16* v) { int t = threadIdx.x; atomicAdd(p + (t % 3), v[t]); }
extern "C" __global__ void cmph2(const __half2* a, const __half2* b, __half2* o, unsigned* m) {
    int t = threadIdx.x; o[t] = __hgt2(a[t], b[t]); m[t] = __hle2_mask(a[t], b[t]); }
"""
ARCHS = ["compute_80", "compute_90"]


def module(driver, arch):
    ptx = nvrtc_ptx(SOURCE, arch=arch)
    assert "atom.global.cas.b16" in ptx and "set.gt.f16x2.f16x2" in ptx
    if arch == "compute_90":
        assert "atom.add.noftz.bf16x2" in ptx
        if driver.runs_sass and cuda.GPU(0).compute_capability < (9, 0):
            pytest.skip("sm_90 PTX needs an sm_90 GPU")
    return load_compiled(ptx)


def bf16_bits(x64):
    """float64 -> bfloat16 bits, round to nearest even (through float32: double rounding
    is harmless at these precisions)."""
    u = np.asarray(x64, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("arch", ARCHS)
def test_atomic_cas_16_bits(driver, rng, arch):
    f = module(driver, arch).get_function("cas16")
    n = 96
    start = rng.integers(0, 2**16, 4).astype(np.uint16)
    val = rng.permutation(2**16)[:n].astype(np.uint16)           # all different
    cmp = start[np.arange(n) % 4]                                 # every thread expects the start
    p, old = upload(start), upload(poisoned(n, np.uint16))
    f.launch(1, n, (p, upload(cmp), upload(val), old))
    final, seen = download(p, 4, np.uint16), download(old, n, np.uint16)
    for k in range(4):
        mine = np.arange(n) % 4 == k
        winners = mine & (seen == start[k])
        assert winners.sum() == 1, (k, seen[mine], start[k])       # one thread swaps...
        assert final[k] == val[winners][0]                         # ...its value stays
        assert (seen[mine & ~winners] == final[k]).all()           # the rest see it and fail


def exact_addends(rng, n, step):
    """Multiples of `step` small enough that every partial sum is exact: any order of the
    adds gives the same result."""
    return rng.integers(-16, 17, n) * step


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", ["h", "h2", "bf", "bf2"])
def test_atomic_add_half_many_threads(driver, rng, arch, kind):
    f = module(driver, arch).get_function({"h": "addh", "h2": "addh2", "bf": "addbf", "bf2": "addbf2"}[kind])
    lanes = 2 if kind.endswith("2") else 1
    n = 96
    bf = kind.startswith("bf")
    step = 2.0 ** -2 if bf else 2.0 ** -4
    start = exact_addends(rng, 3 * lanes, step)
    v = exact_addends(rng, n * lanes, step)
    enc = bf16_bits if bf else (lambda x: np.asarray(x, np.float16).view(np.uint16))
    p = upload(enc(start))
    f.launch(1, n, (p, upload(enc(v))))
    want = start + v.reshape(n, lanes).reshape(-1, 3, lanes).sum(0).reshape(-1)
    got = download(p, 3 * lanes, np.uint16)
    got = bf16_value(got) if bf else got.view(np.float16).astype(np.float64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arch", ARCHS)
def test_atomic_add_half_rounds_each_add(driver, rng, arch):
    """One thread per address: the new value is the sum rounded once to the element type
    (numpy float16; bfloat16 by bits), subnormals kept (.noftz)."""
    mod = module(driver, arch)
    for name, bf in (("addh2", False), ("addbf2", True)):
        a = rng.standard_normal(6) * np.array([1, 1e-5, 3, 1e4, 2e-7, 1])
        b = rng.standard_normal(6) * np.array([1e-3, 1e-5, 3, 1, 3e-7, 1e-4])
        if bf:
            a, b = a * 1e30, b * 1e30
            abits, bbits = bf16_bits(a), bf16_bits(b)
            want = bf16_bits(bf16_value(abits) + bf16_value(bbits))
        else:
            abits, bbits = a.astype(np.float16).view(np.uint16), b.astype(np.float16).view(np.uint16)
            want = (abits.view(np.float16).astype(np.float64)
                    + bbits.view(np.float16).astype(np.float64)).astype(np.float16).view(np.uint16)
        p = upload(abits)
        mod.get_function(name).launch(1, 3, (p, upload(bbits)))
        np.testing.assert_array_equal(download(p, 6, np.uint16), want, err_msg=name)


@pytest.mark.parametrize("arch", ARCHS)
def test_set_into_half_pairs(driver, rng, arch):
    f = module(driver, arch).get_function("cmph2")
    n = 64
    a = rng.standard_normal(2 * n).astype(np.float16)
    b = rng.standard_normal(2 * n).astype(np.float16)
    b[::5] = a[::5]
    a[3::7], b[4::9] = np.nan, np.nan
    o, m = upload(poisoned(2 * n, np.uint16)), upload(poisoned(n, np.uint32))
    f.launch(1, n, (upload(a), upload(b), o, m))
    with np.errstate(invalid="ignore"):
        gt, le = a > b, a <= b                                    # NaN: false, as ordered compares
    np.testing.assert_array_equal(download(o, 2 * n, np.uint16),
                                  np.where(gt, np.float16(1).view(np.uint16), 0).astype(np.uint16))
    halves = np.where(le, 0xFFFF, 0).astype(np.uint32).reshape(n, 2)
    np.testing.assert_array_equal(download(m, n, np.uint32), halves[:, 0] | (halves[:, 1] << 16))


SET_PTX = """.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 po)
{
  .reg .pred %p<3>;
  .reg .b16 %h<4>;
  .reg .b32 %r<9>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [po];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  ld.global.u32 %r2, [%rd5];
  ld.global.u32 %r3, [%rd6];
  mov.b32 {%h1, %h2}, %r2;
  mov.b32 {%h3, _}, %r3;
  and.b32 %r4, %r1, 1;
  setp.ne.u32 %p1, %r4, 0;                  // odd threads: the .and operand is true
  set.ltu.u32.f16 %r5, %h1, %h3;            // scalar, unordered: 0xFFFFFFFF or 0
  set.ge.and.f16.f16 %h2, %h1, %h3, %p1;    // scalar into a half: 1.0 or 0.0
  set.ne.bf16x2.bf16x2 %r6, %r2, %r3;       // pairs of bfloat16
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd7, %rd3, %rd4;
  cvt.u32.u16 %r7, %h2;
  st.global.v4.u32 [%rd7], {%r5, %r7, %r6, %r6};
  ret;
}
"""


def test_set_on_half_scalars_and_bf16_pairs(driver, rng):
    n = 64
    a = rng.standard_normal(2 * n).astype(np.float16)
    b = rng.standard_normal(2 * n).astype(np.float16)
    b[::4] = a[::4]
    a[2::7], b[6::11] = np.nan, np.nan
    abf = rng.integers(0, 5, 2 * n).astype(np.uint16) + np.uint16(0x3F80)   # bf16 1.0 ... nearby
    bbf = rng.integers(0, 5, 2 * n).astype(np.uint16) + np.uint16(0x3F80)
    abf[5::13] = 0x7FC1                                                  # a bf16 NaN
    # one word per thread: low half an f16 (for the scalar sets), both halves a bf16 pair
    # for set.ne.bf16x2: build the words so that the low halves are the f16 inputs
    wa = a.view(np.uint16).reshape(n, 2)[:, 0].astype(np.uint32) | (abf.reshape(n, 2)[:, 1].astype(np.uint32) << 16)
    wb = b.view(np.uint16).reshape(n, 2)[:, 0].astype(np.uint32) | (bbf.reshape(n, 2)[:, 1].astype(np.uint32) << 16)
    out = upload(poisoned((n, 4), np.uint32))
    cuda.Module.from_ptx(SET_PTX).get_function("k").launch(1, n, (upload(wa), upload(wb), out))
    got = download(out, (n, 4), np.uint32)
    x = (wa & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    y = (wb & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    nan = np.isnan(x) | np.isnan(y)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got[:, 0], np.where((x < y) | nan, 0xFFFFFFFF, 0).astype(np.uint32))
        odd = np.arange(n) % 2 == 1
        np.testing.assert_array_equal(got[:, 1], np.where((x >= y) & odd, 0x3C00, 0).astype(np.uint32))
        want = np.zeros(n, np.uint32)
        for i in range(2):
            xa = bf16_value((wa >> (16 * i)) & 0xFFFF)
            yb = bf16_value((wb >> (16 * i)) & 0xFFFF)
            ne = (xa != yb) & ~(np.isnan(xa) | np.isnan(yb))
            want |= np.where(ne, 0x3F80, 0).astype(np.uint32) << (16 * i)
    np.testing.assert_array_equal(got[:, 2], want)

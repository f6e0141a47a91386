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
        if driver.runs_sass and cuda.Device(0).compute_capability < (9, 0):
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

"""Triton as a client: kernels compiled at test time by the real Triton compiler
(triton_kernels.py; no GPU needed to compile) for sm_80 and for sm_90a, run on the driver
in use, against numpy on fresh random inputs, outputs poisoned first. Bounds come from the
inputs: an f32 sum of K exact products is within (K + 2) * 2^-24 * sum |a| |b| of the
float64 one; tf32 rounds each input to 11 significant bits first.

For sm_90a Triton emits Hopper's tensor-core, TMA and register instructions (wgmma,
cp.async.bulk.tensor and tensormap.replace, setmaxnreg): those kernels run on the emulated
GPU too, against the same references; test_hopper_instructions_recorded checks that their
PTX still uses the Hopper instructions these tests are meant to cover.

Skips, saying so, where triton is not installed (pip install -e '.[triton]').
"""
import math

import numpy as np
import pytest
from helpers.fp8 import random_codes
from triton_support import compile_kernel, device, hopper_families, hopper_instructions, host, poisoned

import triton_kernels as tk

ARCHS = (80, 90)
# The Hopper families each kernel's sm_90a PTX uses, and its wgmma.mma_async's shape and types.
HOPPER_FAMILIES = {
    "vector_add": set(), "softmax": set(), "layernorm": set(),
    **{f"matmul_{t}": {"wgmma"} for t in ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8")},
    "matmul_descriptors": {"wgmma", "tensormap", "cp.async.bulk.tensor"},
    "matmul_warp_specialized": {"wgmma", "tensormap", "cp.async.bulk.tensor", "setmaxnreg"},
    "attention": {"wgmma"},
}
WGMMA_FORMS = {
    **{f"matmul_{t}": f"m64n64k16.f32.{t}.{t}" for t in ("f16", "bf16")},
    "matmul_tf32": "m64n64k8.f32.tf32.tf32",
    **{f"matmul_{t}": f"m64n64k32.f32.{t}.{t}" for t in ("e4m3", "e5m2")},
    "matmul_s8": "m64n64k32.s32.s8.s8",
    "matmul_descriptors": "m64n64k16.f32.f16.f16", "matmul_warp_specialized": "m64n64k16.f32.f16.f16",
    "attention": "m64n32k16.f32.f16.f16",
}


# ---- elementwise and row-wise kernels ------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_vector_add(arch, rng):
    k = compile_kernel(tk.vector_add, {"x": "*fp32", "y": "*fp32", "z": "*fp32", "n": "i32"}, {"BLOCK": 256}, arch)
    n = 1000                                            # not a multiple of BLOCK: the mask matters
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    z = poisoned(n, np.float32)
    k.launch((math.ceil(n / 256),), device(x), device(y), z, n)
    np.testing.assert_array_equal(host(z, n, np.float32), x + y)   # one f32 rounding each


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_softmax(arch, rng):
    rows, cols = 6, 100
    k = compile_kernel(tk.softmax, {"x": "*fp32", "y": "*fp32", "cols": "i32"}, {"BLOCK": 128}, arch)
    x = (4 * rng.standard_normal((rows, cols))).astype(np.float32)
    y = poisoned((rows, cols), np.float32)
    k.launch((rows,), device(x), y, cols)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    # exp by ex2.approx of x * log2(e) (2^-22 relative, the argument's rounding is at most
    # |x - max| * 2^-24), the sum's cols roundings, one division
    arg = np.abs(x - x.max(axis=1, keepdims=True)).astype(np.float64)
    bound = ref * ((cols + 8) * 2.0 ** -24 + 2.0 ** -21 + arg * 2.0 ** -23) + 1e-30
    err = np.abs(host(y, (rows, cols), np.float32) - ref)
    assert np.all(err <= bound), f"error {err.max()}, at most {np.nanmax(err / bound):.3g} x its bound"


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_layernorm(arch, rng):
    rows, cols = 5, 200
    sig = {"x": "*fp32", "w": "*fp32", "b": "*fp32", "y": "*fp32", "cols": "i32", "eps": "fp32"}
    k = compile_kernel(tk.layernorm, sig, {"BLOCK": 256}, arch)
    x = (3 + 2 * rng.standard_normal((rows, cols))).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    eps = 1e-5
    y = poisoned((rows, cols), np.float32)
    k.launch((rows,), device(x), device(w), device(b), y, cols, eps)
    x64 = x.astype(np.float64)
    d = x64 - x64.mean(axis=1, keepdims=True)
    xhat = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    ref = xhat * w + b
    # the mean's error (cols roundings, relative to sum |x|) shifts every d; the variance
    # sum, sqrt and division scale xhat; then the affine step's two roundings
    rstd = 1 / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    mean_err = (cols + 2) * 2.0 ** -24 * np.abs(x64).mean(axis=1, keepdims=True)
    rstd_rel = (cols + 16) * 2.0 ** -24 + 2.0 ** -21
    bound = np.abs(w) * rstd * (mean_err + np.abs(d) * rstd_rel) + (np.abs(xhat * w) + np.abs(b)) * 2.0 ** -22
    err = np.abs(host(y, (rows, cols), np.float32) - ref)
    assert np.all(err <= bound), f"error {err.max()}, at most {np.nanmax(err / bound):.3g} x its bound"


# ---- matrix products -----------------------------------------------------------------------
M, N, K = 128, 64, 64
TILES = {"BM": 64, "BN": 64, "BK": 32}


def _bf16(r, shape):
    """Random bf16 values: (float64 values, the 16-bit codes)."""
    f = r.uniform(-1, 1, shape).astype(np.float32)
    codes = (f.view(np.uint32) >> 16).astype(np.uint16)
    return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64), codes


def _operands(kind, r):
    """(A values, A as stored, B values, B as stored) for a matmul of `kind`."""
    if kind == "f16":
        a, b = r.uniform(-1, 1, (M, K)).astype(np.float16), r.uniform(-1, 1, (K, N)).astype(np.float16)
        return a.astype(np.float64), a, b.astype(np.float64), b
    if kind == "bf16":
        (av, ac), (bv, bc) = _bf16(r, (M, K)), _bf16(r, (K, N))
        return av, ac, bv, bc
    if kind == "tf32":
        a, b = r.uniform(-1, 1, (M, K)).astype(np.float32), r.uniform(-1, 1, (K, N)).astype(np.float32)
        return a.astype(np.float64), a, b.astype(np.float64), b
    if kind in ("e4m3", "e5m2"):
        (av, ac), (bv, bc) = random_codes(r, kind, (M, K), 4.0), random_codes(r, kind, (K, N), 4.0)
        return av, ac.astype(np.uint8), bv, bc.astype(np.uint8)
    a, b = r.integers(-128, 128, (M, K), dtype=np.int8), r.integers(-128, 128, (K, N), dtype=np.int8)
    return a.astype(np.float64), a, b.astype(np.float64), b


POINTER = {"f16": "*fp16", "bf16": "*bf16", "tf32": "*fp32", "e4m3": "*fp8e4nv", "e5m2": "*fp8e5", "s8": "*i8"}


def _check_product(got, av, bv, kind):
    ref = av @ bv
    if kind == "s8":
        np.testing.assert_array_equal(got, ref.astype(np.int64))
        return
    scale = np.abs(av) @ np.abs(bv)
    rel = (K + 2) * 2.0 ** -24 + (2.0 ** -9 if kind == "tf32" else 0.0)
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= rel * scale + 1e-30), f"max error {err.max()} (bound {(rel * scale).max()})"


def matmul_kernel(kind: str, arch: int):
    sig = {"a": POINTER[kind], "b": POINTER[kind], "c": "*i32" if kind == "s8" else "*fp32",
           "M": "i32", "N": "i32", "K": "i32"}
    extra = {"PRECISION": "tf32" if kind == "tf32" else "ieee", "INTEGER": kind == "s8"}
    return compile_kernel(tk.matmul, sig, {**TILES, **extra}, arch)


@pytest.mark.parametrize("kind", list(POINTER))
@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_matmul(arch, kind, rng):
    if arch == 80 and kind == "e4m3":
        pytest.skip("Triton 3.9 offers fp8e4nv (e4m3) for sm_89 and later only")
    out = np.int32 if kind == "s8" else np.float32
    k = matmul_kernel(kind, arch)
    av, a, bv, b = _operands(kind, rng)
    c = poisoned((M, N), out)
    k.launch((M // 64, N // 64), device(a), device(b), c, M, N, K)
    _check_product(host(c, (M, N), out), av, bv, kind)


@pytest.mark.parametrize("name", ["matmul_descriptors", "matmul_warp_specialized"])
@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_matmul_tma(arch, name, rng):
    sig = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    k = compile_kernel(getattr(tk, name), sig, TILES, arch)
    av, a, bv, b = _operands("f16", rng)
    c = poisoned((M, N), np.float32)
    k.launch((M // 64, N // 64), device(a), device(b), c, M, N, K)
    _check_product(host(c, (M, N), np.float32), av, bv, "f16")


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: f"sm_{a}")
def test_flash_attention(arch, rng):
    L, D = 128, 32
    sig = {"q": "*fp16", "k": "*fp16", "v": "*fp16", "o": "*fp32", "L": "i32", "scale": "fp32"}
    k = compile_kernel(tk.attention, sig, {"BM": 64, "BN": 32, "D": D}, arch)
    q, kk, v = (rng.standard_normal((L, D)).astype(np.float16) for _ in range(3))
    scale = 1 / math.sqrt(D)
    o = poisoned((L, D), np.float32)
    k.launch((L // 64,), device(q), device(kk), device(v), o, L, scale)
    s = q.astype(np.float64) @ kk.astype(np.float64).T * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)
    # P is rounded to f16 (2^-11 relative, and its rows sum to 1) before P V: at most
    # 2^-11 max |v| per column; the exps, sums and the f32 accumulation add far less (x 4)
    bound = 2.0 ** -9 * np.abs(v.astype(np.float64)).max(axis=0)
    assert np.all(np.abs(host(o, (L, D), np.float32) - ref) <= bound)


# ---- what sm_90a asks of the emulated GPU ----------------------------------------------------
def test_hopper_instructions_recorded():
    """HOPPER_FAMILIES and WGMMA_FORMS say what Triton 3.9 emits for sm_90a: each kernel's PTX
    uses exactly the Hopper families and the wgmma form recorded for it (so the sm_90a tests
    above keep covering them)."""
    sig = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    attention = {"q": "*fp16", "k": "*fp16", "v": "*fp16", "o": "*fp32", "L": "i32", "scale": "fp32"}
    kernels = {
        **{f"matmul_{kind}": matmul_kernel(kind, 90) for kind in POINTER},
        "attention": compile_kernel(tk.attention, attention, {"BM": 64, "BN": 32, "D": 32}, 90),
        "matmul_descriptors": compile_kernel(tk.matmul_descriptors, sig, TILES, 90),
        "matmul_warp_specialized": compile_kernel(tk.matmul_warp_specialized, sig, TILES, 90),
        "softmax": compile_kernel(tk.softmax, {"x": "*fp32", "y": "*fp32", "cols": "i32"}, {"BLOCK": 128}, 90),
    }
    for name, kernel in kernels.items():
        assert hopper_families(kernel.ptx) == HOPPER_FAMILIES[name], (name, hopper_instructions(kernel.ptx))
        forms = {ins.split(".aligned.")[1] for ins in hopper_instructions(kernel.ptx)
                 if ins.startswith("wgmma.mma_async")}
        assert forms == ({WGMMA_FORMS[name]} if name in WGMMA_FORMS else set()), (name, forms)
    ws = hopper_instructions(kernels["matmul_warp_specialized"].ptx)
    assert {"setmaxnreg.inc.sync.aligned.u32", "setmaxnreg.dec.sync.aligned.u32"} <= set(ws)
    assert kernels["matmul_warp_specialized"].metadata.num_warps > 4       # a producer warpgroup

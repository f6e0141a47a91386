"""Matmuls compiled by the real Triton compiler for sm_90a (wgmma with Triton's own
shared-memory layouts, swizzles and descriptors, software-pipelined with wait_group 1)
run on the GPU in use and agree with numpy: f16, bf16, tf32, e4m3, e5m2 and int8, A and
B in either major order, tiles chosen so that Triton picks each swizzle; and a flash
attention forward (P @ V with A from registers, the accumulator rescaled between the
products). Compiled at test time where triton is installed (no GPU needed to compile),
skipped elsewhere.
Kernels with tensor descriptors (TMA) are not here: they need cp.async.bulk.tensor.
"""
import numpy as np
import pytest

from helpers.memory import download, poisoned, upload
from helpers.fp8 import random_codes
from lowlevel import cuda

triton = pytest.importorskip("triton", reason="triton is not installed (pip install triton)")
tl = pytest.importorskip("triton.language")


@triton.jit
def matmul(a, b, c, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), ACC)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc = tl.dot(x, y, acc, input_precision=PRECISION, out_dtype=ACC)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


TRITON_TYPES = {"f16": "*fp16", "bf16": "*bf16", "tf32": "*fp32", "e4m3": "*fp8e4nv", "e5m2": "*fp8e5",
                "s8": "*i8"}
# name: (type, BM, BN, BK, A MN-major, B K-major, warps, stages)
CASES = {
    "f16 128x128x64": ("f16", 128, 128, 64, False, False, 4, 3),
    "f16 A MN-major B K-major 64x64x32": ("f16", 64, 64, 32, True, True, 4, 2),
    "bf16 64x128x16 eight warps": ("bf16", 64, 128, 16, False, False, 8, 3),
    "tf32 64x64x32": ("tf32", 64, 64, 32, False, True, 4, 2),
    "e4m3 64x64x64": ("e4m3", 64, 64, 64, False, True, 4, 3),
    "e5m2 64x32x128": ("e5m2", 64, 32, 128, False, True, 4, 2),
    "s8 64x64x64": ("s8", 64, 64, 64, False, True, 4, 3),
}


def compile_matmul(kind, bm, bn, bk, warps, stages):
    from triton.backends.compiler import GPUTarget
    acc = "tl.int32" if kind == "s8" else "tl.float32"
    sig = {"a": TRITON_TYPES[kind], "b": TRITON_TYPES[kind], "c": "*i32" if kind == "s8" else "*fp32",
           **{x: "i32" for x in ("M", "N", "K", "sam", "sak", "sbk", "sbn")},
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "ACC": "constexpr", "PRECISION": "constexpr"}
    consts = {"BM": bm, "BN": bn, "BK": bk, "ACC": tl.int32 if kind == "s8" else tl.float32,
              "PRECISION": "tf32" if kind == "tf32" else "ieee"}
    src = triton.compiler.ASTSource(fn=matmul, signature=sig, constexprs=consts)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    assert ".target sm_90a" in k.asm["ptx"] and "wgmma.mma_async" in k.asm["ptx"], acc
    return k.asm["ptx"], k.metadata.shared, k.metadata.name


def inputs(rng, kind, shape):
    """(values as float64/int64, the array uploaded)."""
    if kind in ("e4m3", "e5m2"):
        values, codes = random_codes(rng, kind, shape)
        return values, codes.astype(np.uint8)
    if kind == "s8":
        v = rng.integers(-128, 128, shape)
        return v, v.astype(np.int8)
    if kind == "tf32":                       # values tf32 holds exactly: the result is the same
        v = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return v.astype(np.float64), v
    if kind == "bf16":
        u = rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16
        return (u << 16).view(np.float32).astype(np.float64), u.astype(np.uint16)
    v = rng.standard_normal(shape).astype(np.float16)
    return v.astype(np.float64), v


@pytest.mark.parametrize("name", CASES)
def test_triton_matmul_sm90(driver, rng, name):
    kind, bm, bn, bk, a_mn, b_k, warps, stages = CASES[name]
    if cuda.GPU(0).compute_capability != (9, 0):
        pytest.skip("sm_90a kernels run on compute capability 9.0 only (H100, H200)")
    ptx, shared, kname = compile_matmul(kind, bm, bn, bk, warps, stages)
    m, n, k = 2 * bm, bn, 3 * bk
    a, ha = inputs(rng, kind, (m, k))
    b, hb = inputs(rng, kind, (k, n))
    ha = np.ascontiguousarray(ha.T) if a_mn else ha              # stored K x M: A is M-major
    hb = np.ascontiguousarray(hb.T) if b_k else hb               # stored N x K: B is K-major
    sam, sak = (1, m) if a_mn else (k, 1)
    sbk, sbn = (1, k) if b_k else (n, 1)
    out_type = np.int32 if kind == "s8" else np.float32
    dc = upload(poisoned((m, n), out_type))
    f = cuda.Module.from_ptx(ptx).get_function(kname)
    if shared > 48 * 1024:
        f.max_dynamic_shared_memory = shared
    args = [upload(ha), upload(hb), dc, *(np.int32(x) for x in (m, n, k, sam, sak, sbk, sbn)), 0, 0]
    f.launch((m // bm, n // bn), 32 * warps, args, shared_mem=shared)
    got = download(dc, (m, n), out_type)
    want = a @ b
    if kind == "s8":
        np.testing.assert_array_equal(got, want)
        return
    bound = (k + 1) * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


@triton.jit
def attention(Q, K, V, O, N_CTX, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    q = tl.load(Q + rm[:, None] * D + rd[None, :])
    m_i = tl.full([BM], -float("inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for s in range(0, N_CTX, BN):
        k = tl.load(K + (s + rn)[None, :] * D + rd[:, None])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + (s + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_new
    tl.store(O + rm[:, None] * D + rd[None, :], acc / l_i[:, None])


@pytest.mark.parametrize("warps, stages", [(4, 2), (8, 3)])
def test_triton_flash_attention_sm90(driver, rng, warps, stages):
    if cuda.GPU(0).compute_capability != (9, 0):
        pytest.skip("sm_90a kernels run on compute capability 9.0 only (H100, H200)")
    from triton.backends.compiler import GPUTarget
    bm, bn, d, n_ctx = 64, 64, 64, 256
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "O": "*fp32", "N_CTX": "i32", "D": "constexpr",
           "BM": "constexpr", "BN": "constexpr"}
    src = triton.compiler.ASTSource(fn=attention, signature=sig, constexprs={"D": d, "BM": bm, "BN": bn})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ptx = k.asm["ptx"]
    assert "wgmma.mma_async" in ptx and "}, {%r" in ptx            # P @ V takes A from registers
    q, kk, v = (rng.standard_normal((n_ctx, d)).astype(np.float16) for _ in range(3))
    out = upload(poisoned((n_ctx, d), np.float32))
    f = cuda.Module.from_ptx(ptx).get_function(k.metadata.name)
    f.launch(n_ctx // bm, 32 * warps, [upload(q), upload(kk), upload(v), out, np.int32(n_ctx), 0, 0],
             shared_mem=k.metadata.shared)
    got = download(out, (n_ctx, d))
    s = q.astype(np.float64) @ kk.astype(np.float64).T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    v = v.astype(np.float64)
    # P is rounded to f16 for P @ V (2^-11 relative, 2^-25 absolute below f16's normals);
    # f32 sums and exp are far finer
    bound = 2.0**-10 * (p @ np.abs(v)) + n_ctx * 2.0**-24 * np.abs(v).max()
    assert (np.abs(got - p @ v) <= bound).all(), np.abs(got - p @ v).max()

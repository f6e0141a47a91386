"""Kernels written in Triton, compiled at test time by the real Triton compiler
(test_triton_kernels.py). Imported only where `triton` is installed.

Each kernel is the plain textbook form of its subject, small enough to run on the emulated
GPU in a second or two: the point is what Triton emits for them (mma.sync, ldmatrix and
cp.async for sm_80; wgmma, TMA and setmaxnreg for sm_90a), not their speed.
"""
import triton
import triton.language as tl


@triton.jit
def vector_add(x, y, z, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < n
    tl.store(z + offs, tl.load(x + offs, mask=inside) + tl.load(y + offs, mask=inside), mask=inside)


@triton.jit
def softmax(x, y, cols, BLOCK: tl.constexpr):
    """One program per row; the row's max subtracted before exp, as every softmax does."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    inside = offs < cols
    v = tl.load(x + row * cols + offs, mask=inside, other=float("-inf"))
    e = tl.exp(v - tl.max(v, 0))
    tl.store(y + row * cols + offs, e / tl.sum(e, 0), mask=inside)


@triton.jit
def layernorm(x, w, b, y, cols, eps, BLOCK: tl.constexpr):
    """One program per row: (x - mean) / sqrt(var + eps) * w + b."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    inside = offs < cols
    v = tl.load(x + row * cols + offs, mask=inside, other=0.0)
    mean = tl.sum(v, 0) / cols
    d = tl.where(inside, v - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, 0) / cols + eps)
    out = d * rstd * tl.load(w + offs, mask=inside) + tl.load(b + offs, mask=inside)
    tl.store(y + row * cols + offs, out, mask=inside)


@triton.jit
def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           PRECISION: tl.constexpr, INTEGER: tl.constexpr):
    """C (M x N) = A (M x K) B (K x N), all row-major, a BM x BN tile per program; the
    accumulator is int32 for integer inputs, else f32. M, N, K multiples of the tiles."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if INTEGER:
        acc = tl.zeros((BM, BN), dtype=tl.int32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ta = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
        tb = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(ta, tb, acc, input_precision=PRECISION)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def matmul_descriptors(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The same product through tensor descriptors made in the kernel: TMA on sm_90 (the
    descriptors are written with tensormap.replace into global scratch), plain loads on
    sm_80."""
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    dc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        acc = tl.dot(da.load([pm * BM, k0]), db.load([k0, pn * BN]), acc)
    dc.store([pm * BM, pn * BN], acc)


@triton.jit
def matmul_warp_specialized(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The product with a warp-specialised loop: on sm_90 a producer warpgroup loads tiles
    by TMA while consumers run wgmma, trading registers by setmaxnreg. (Triton's warp
    specialisation on Hopper needs descriptor loads.)"""
    da = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    db = tl.make_tensor_descriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, warp_specialize=True):
        acc = tl.dot(da.load([pm * BM, k0]), db.load([k0, pn * BN]), acc)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def attention(q, k, v, o, L, scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """Flash attention forward, one head: softmax(Q K^T * scale) V over L keys, BN at a
    time with the running max and sum (the online softmax); P goes to f16 for the second
    product, as in Triton's tutorial."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    tq = tl.load(q + rm[:, None] * D + rd[None, :])
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for n0 in range(0, L, BN):
        rn = n0 + tl.arange(0, BN)
        tk = tl.load(k + rn[:, None] * D + rd[None, :])
        tv = tl.load(v + rn[:, None] * D + rd[None, :])
        s = tl.dot(tq, tl.trans(tk)) * scale
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), tv)
        m_i = m_new
    tl.store(o + rm[:, None] * D + rd[None, :], acc / l_i[:, None])

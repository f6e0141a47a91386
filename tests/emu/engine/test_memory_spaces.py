"""Shared, local and generic memory, barriers, atomics, module variables, faults, the
watchdog and racecheck of the emulated GPU, driven through the engine directly.

Kernels come from NVRTC where natural (what compilers really emit) and are handwritten
where a test needs one exact instruction sequence. References are independent numpy
computations on fresh random inputs; outputs are poisoned first.
"""
import struct

import numpy as np
import pytest

from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.scheduler import run_kernel
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError
from lowlevel.emu.engine.memory import DeviceMemory
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.isa.addressing import LOCAL_WINDOW, SHARED_WINDOW

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

POISON_FF = np.uint8(0xFF)      # this module's output buffers start as 0xFF bytes (NaN as float32)


def cu(source, options=()):
    return load_ptx(nvrtc_ptx('extern "C" {\n' + source + "\n}", options=options))


# --- shared memory -----------------------------------------------------------------------

def test_static_and_dynamic_shared_memory_per_cta(mem, rng):
    mod = cu("""
    __global__ void k(const float* in, float* out, int n) {
        __shared__ float s[128];
        __shared__ int tag;
        extern __shared__ float d[];
        int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
        if (t == 0) tag = blockIdx.x * 7;
        s[t] = i < n ? in[i] : -1.0f;
        d[t] = 2.0f * t + blockIdx.x;
        __syncthreads();
        if (i < n) out[i] = s[blockDim.x - 1 - t] + d[(t + 1) % blockDim.x] + tag;
    }""")
    k = mod.kernels["k"]
    assert k.shared_bytes == 128 * 4 + 4
    n, block = 1000, 128
    x = rng.standard_normal(n).astype(np.float32)
    a, out = Buf(mem, x), Buf(mem, n=n, dtype=np.float32, poison=POISON_FF)
    grid = -(-n // block)
    launch(mod, "k", grid, block, a, out, n, mem=mem, shared=block * 4)
    xp = np.concatenate([x, np.full(grid * block - n, -1, np.float32)]).reshape(grid, block)
    t = np.arange(block)
    b = np.arange(grid)[:, None]
    expect = (xp[:, ::-1] + (2.0 * ((t + 1) % block) + b).astype(np.float32)) + (7 * b).astype(np.float32)
    np.testing.assert_array_equal(out.read(), expect.reshape(-1)[:n].astype(np.float32))
    # without the dynamic part, d[] lies outside the block's shared window
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", grid, block, a, out, n, mem=mem, shared=0)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS" and "shared" in e.value.message


def test_shared_alignment_and_module_scope_shared():
    mod = load_ptx(HEADER + """
.shared .align 8 .b8 common[12];
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out)
{
    .shared .align 4 .b8 a[3];
    .shared .align 16 .f32 b[5];
    .reg .b64 %rd<6>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, a;
    st.global.u64 [%rd1], %rd2;
    mov.u64 %rd2, b;
    st.global.u64 [%rd1+8], %rd2;
    mov.u64 %rd2, common;
    st.global.u64 [%rd1+16], %rd2;
    mov.u64 %rd2, dyn;
    st.global.u64 [%rd1+24], %rd2;
    cvta.shared.u64 %rd3, %rd2;
    st.global.u64 [%rd1+32], %rd3;
    ret;
}
""")
    k = mod.kernels["k"]
    # module-scope `common` first (offset 0, 12 bytes), a at 12 (3 bytes), b at 16 (20 bytes)
    assert k.shared_bytes == 36
    mem = DeviceMemory(1 << 20)
    out = Buf(mem, n=5, dtype=np.uint64, poison=POISON_FF)
    launch(mod, "k", 1, 32, out, mem=mem, shared=8)
    assert out.read().tolist() == [12, 16, 0, 48, SHARED_WINDOW + 48]


# --- barriers ----------------------------------------------------------------------------

@pytest.mark.parametrize("options", [(), ("-G",)])
def test_tree_reduction_with_barriers_after_divergence(mem, rng, options):
    mod = cu("""
    __global__ void reduce(const float* x, float* out, int n) {
        __shared__ float s[256];
        int t = threadIdx.x, i = blockIdx.x * 256 + t;
        s[t] = i < n ? x[i] : 0.0f;
        __syncthreads();
        for (int st = 128; st > 0; st >>= 1) {
            if (t < st) s[t] += s[t + st];
            __syncthreads();
        }
        if (t == 0) out[blockIdx.x] = s[0];
    }""", options)
    n = int(rng.integers(3000, 6000))
    x = rng.standard_normal(n).astype(np.float32)
    grid = -(-n // 256)
    a, out = Buf(mem, x), Buf(mem, n=grid, dtype=np.float32, poison=POISON_FF)
    launch(mod, "reduce", grid, 256, a, out, n, mem=mem)
    s = np.zeros(grid * 256, np.float32)
    s[:n] = x
    s = s.reshape(grid, 256)
    st = 128
    while st:
        s[:, :st] = s[:, :st] + s[:, st:2 * st]          # float32, same order as the kernel
        st //= 2
    np.testing.assert_array_equal(out.read(), s[:, 0])


DIVERGENT_BARRIERS = HEADER + """
// Odd and even threads reach bar.sync 0 through different instructions, after loops of
// different trip counts; threads t >= live exit first (they count as arrived).
.visible .entry k(.param .u64 out, .param .u32 live)
{
    .shared .align 4 .b32 s[128];
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    mov.u32 %r1, %tid.x;
    ld.param.u32 %r9, [live];
    and.b32 %r2, %r1, 7;            // trip count t % 8
    mov.u32 %r3, 0;
    mov.u32 %r4, 0;
LOOP:
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra AFTER;
    add.u32 %r4, %r4, %r1;
    add.u32 %r3, %r3, 1;
    bra LOOP;
AFTER:
    setp.ge.u32 %p3, %r1, %r9;
    @%p3 bra DONE;                  // these threads exit without reaching a barrier
    shl.b32 %r5, %r1, 2;
    mov.u32 %r6, s;
    add.u32 %r6, %r6, %r5;
    st.shared.u32 [%r6], %r4;
    and.b32 %r7, %r1, 1;
    setp.eq.u32 %p2, %r7, 1;
    @%p2 bra ODD;
    bar.sync 0;
    bra JOIN;
ODD:
    add.u32 %r4, %r4, 1000;
    bar.sync 0;
JOIN:
    // read the neighbour's value (t ^ 1): written before the barrier by another thread
    xor.b32 %r8, %r1, 1;
    setp.ge.u32 %p3, %r8, %r9;
    mov.u32 %r10, 0xFFFFFFFF;
    @%p3 bra STORE;
    shl.b32 %r8, %r8, 2;
    mov.u32 %r6, s;
    add.u32 %r6, %r6, %r8;
    ld.shared.u32 %r10, [%r6];
STORE:
    ld.param.u64 %rd1, [out];
    mov.u32 %r11, %ctaid.x;
    mad.lo.u32 %r11, %r11, 128, %r1;
    mul.wide.u32 %rd2, %r11, 4;
    add.u64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r10;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("live", [128, 77])
def test_barriers_reached_from_divergent_paths_and_exited_threads(mem, live):
    mod = load_ptx(DIVERGENT_BARRIERS)
    grid = 3
    out = Buf(mem, n=grid * 128, dtype=np.uint32, poison=POISON_FF)
    stats = launch(mod, "k", grid, 128, out, live, mem=mem)
    assert stats.divergent_steps > 0
    t = np.arange(128)
    partial = (t % 8) * t                             # sum of t over t % 8 iterations
    nb = t ^ 1
    expect = np.where(nb < live, partial[nb % 128], 0xFFFFFFFF).astype(np.uint32)
    expect = np.where(t < live, expect, 0xFFFFFFFF)   # exited threads store nothing
    got = out.read().reshape(grid, 128)
    for b in range(grid):
        np.testing.assert_array_equal(got[b], expect)


def test_barrier_deadlock_is_reported(mem):
    mod = load_ptx(HEADER + """
.visible .entry k()
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 1;
    @%p1 bra ODD;
    bar.sync 0;
    ret;
ODD:
    bar.sync 1;
    ret;
}
""")
    with pytest.raises(KernelFault) as e:
        run_kernel(mod, "k", 2, 64, b"", mem)
    msg = e.value.message
    assert e.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "deadlock" in msg and "block (0,0,0)" in msg
    assert "line 13" in msg and "line 16" in msg and "k:" in msg


def test_barrier_with_thread_count_never_reached_is_a_deadlock(mem):
    mod = load_ptx(HEADER + """
.visible .entry k()
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 32;
    @%p1 bra DONE;
    bar.sync 1, 64;
DONE:
    ret;
}
""")
    with pytest.raises(KernelFault, match="deadlock"):
        run_kernel(mod, "k", 1, 128, b"", mem)


# --- atomics -----------------------------------------------------------------------------

@pytest.mark.parametrize("options", [(), ("-G",)])
def test_histogram_global_and_shared_atomics(mem, rng, options):
    mod = cu("""
    __global__ void hist_global(const unsigned* x, unsigned* bins, int n, int nbins) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomicAdd(&bins[x[i] % nbins], 1u);
    }
    __global__ void hist_shared(const unsigned* x, unsigned* bins, int n, int nbins) {
        __shared__ unsigned local[64];
        for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
        __syncthreads();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            atomicAdd(&local[x[i] % nbins], 1u);
        __syncthreads();
        for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&bins[b], local[b]);
    }""", options)
    n, nbins = int(rng.integers(20000, 40000)), 7
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    expect = np.bincount(x % nbins, minlength=nbins).astype(np.uint32)
    for name, grid in (("hist_global", -(-n // 256)), ("hist_shared", 5)):
        bins = Buf(mem, np.zeros(nbins, np.uint32))
        launch(mod, name, grid, 256, Buf(mem, x), bins, n, nbins, mem=mem)
        np.testing.assert_array_equal(bins.read(), expect, err_msg=name)


def _check_chain(init, olds, operands, final, step):
    """The (old, operand) pairs of one address form a serialization starting at init and
    ending at final: following old -> step(old, operand) visits every pair exactly once.
    (Operations that leave the value unchanged, e.g. adding a tiny number, go first.)"""
    todo = {}
    for o, v in zip(olds.tolist(), operands.tolist()):
        todo.setdefault(o, []).append(v)
    cur = init
    for _ in range(len(olds)):
        assert cur in todo and todo[cur], f"no thread saw the value {cur!r}"
        vs = todo[cur]
        same = [i for i, v in enumerate(vs) if step(cur, v) == cur]
        cur = step(cur, vs.pop(same[0] if same else -1))
    assert cur == final


def test_float_atomic_add_returns_a_serialization(mem, rng):
    mod = cu("""
    __global__ void k(float* acc, const float* v, float* old, int n, int naddr) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) old[i] = atomicAdd(&acc[i % naddr], v[i]);
    }
    __global__ void k_shared(float* acc, const float* v, float* old, int n, int naddr) {
        __shared__ float s[4];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (threadIdx.x < 4) s[threadIdx.x] = acc[threadIdx.x];
        __syncthreads();
        if (i < n) old[i] = atomicAdd(&s[i % naddr], v[i]);
        __syncthreads();
        if (threadIdx.x < 4) acc[threadIdx.x] = s[threadIdx.x];
    }""")
    f32 = np.float32
    for name, n, grid in (("k", 3000, 12), ("k_shared", 256, 1)):
        naddr = 3
        init = (rng.standard_normal(4) * 100).astype(np.float32)
        # positive addends of mixed magnitudes: each step rounds, and the running value
        # never returns to an earlier one, so the chain of old values is unambiguous
        v = (np.abs(rng.standard_normal(n)) * np.exp2(rng.integers(-10, 10, n))).astype(np.float32)
        acc, old = Buf(mem, init), Buf(mem, n=n, dtype=np.float32, poison=POISON_FF)
        launch(mod, name, grid, 256, acc, Buf(mem, v), old, n, naddr, mem=mem)
        got, olds = acc.read(), old.read()
        for a in range(naddr):
            sel = np.arange(n) % naddr == a
            _check_chain(f32(init[a]), olds[sel].astype(f32), v[sel], f32(got[a]),
                         lambda o, x: f32(f32(o) + f32(x)))
        assert got[3] == init[3]


@pytest.mark.parametrize("options", [(), ("-G",)])
def test_integer_atomics_of_every_kind(mem, rng, options):
    mod = cu("""
    __global__ void k(unsigned* u, int* s, unsigned long long* q, long long* sq,
                      const unsigned* x, unsigned* olds, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        unsigned v = x[i];
        int a = i % 4;
        olds[i] = atomicExch(&u[0 + a], v);
        atomicMin(&u[4 + a], v);
        atomicMax(&u[8 + a], v);
        atomicAnd(&u[12 + a], v | 0x0F0F0F0Fu);
        atomicOr(&u[16 + a], v & 0x80808080u);
        atomicXor(&u[20 + a], v);
        atomicInc(&u[24 + a], 37u);
        atomicDec(&u[28 + a], 41u);
        atomicMin(&s[a], (int)v);
        atomicMax(&s[4 + a], (int)v);
        atomicAdd(&s[8 + a], (int)v);
        atomicAdd(&q[a], (unsigned long long)v * 12345ull);
        atomicMin(&sq[a], -(long long)v * 3);
        atomicMax(&sq[4 + a], (long long)v << 20);
    }""", options)
    n = 2000
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    u0 = rng.integers(0, 2 ** 32, 32, dtype=np.uint32)
    u0[24:32] = rng.integers(0, 30, 8)
    s0 = rng.integers(-2 ** 31, 2 ** 31, 12).astype(np.int32)
    q0 = rng.integers(0, 2 ** 63, 4, dtype=np.uint64)
    sq0 = rng.integers(-2 ** 40, 2 ** 40, 8).astype(np.int64)
    u, s, q, sq = Buf(mem, u0), Buf(mem, s0), Buf(mem, q0), Buf(mem, sq0)
    olds = Buf(mem, n=n, dtype=np.uint32, poison=POISON_FF)
    launch(mod, "k", -(-n // 128), 128, u, s, q, sq, Buf(mem, x), olds, n, mem=mem)
    U, S, Q, SQ, O = u.read(), s.read(), q.read(), sq.read(), olds.read()
    xs = x.astype(np.int32)
    for a in range(4):
        g = x[a::4]
        _check_chain(int(u0[a]), O[a::4], g, int(U[a]), lambda o, v: v)     # exch
        assert U[4 + a] == min(u0[4 + a], g.min())
        assert U[8 + a] == max(u0[8 + a], g.max())
        assert U[12 + a] == np.bitwise_and.reduce(np.append(g | 0x0F0F0F0F, u0[12 + a]))
        assert U[16 + a] == np.bitwise_or.reduce(np.append(g & 0x80808080, u0[16 + a]))
        assert U[20 + a] == np.bitwise_xor.reduce(np.append(g, u0[20 + a]))
        inc = int(u0[24 + a])
        for _ in g:
            inc = 0 if inc >= 37 else inc + 1
        assert U[24 + a] == inc
        dec = int(u0[28 + a])
        for _ in g:
            dec = 41 if dec == 0 or dec > 41 else dec - 1
        assert U[28 + a] == dec
        assert S[a] == min(s0[a], xs[a::4].min())
        assert S[4 + a] == max(s0[4 + a], xs[a::4].max())
        assert S[8 + a] == np.int32((int(s0[8 + a]) + int(xs[a::4].astype(np.int64).sum()) + 2 ** 31)
                                    % 2 ** 32 - 2 ** 31)
        assert Q[a] == (int(q0[a]) + sum(int(v) * 12345 for v in g)) % 2 ** 64
        assert SQ[a] == min(int(sq0[a]), min(-int(v) * 3 for v in g))
        assert SQ[4 + a] == max(int(sq0[4 + a]), max(int(v) << 20 for v in g))


def test_cas_loop_float_atomic_max(mem, rng):
    mod = cu("""
    __device__ float atomic_max_float(float* addr, float v) {
        int* p = (int*)addr;
        int old = *p, assumed;
        do {
            assumed = old;
            if (__int_as_float(assumed) >= v) break;
            old = atomicCAS(p, assumed, __float_as_int(v));
        } while (assumed != old);
        return __int_as_float(old);
    }
    __global__ void k(float* m, const float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) atomic_max_float(&m[i % 5], x[i]);
    }""")
    n = 1500
    x = rng.standard_normal(n).astype(np.float32)
    m = Buf(mem, np.full(5, -np.inf, np.float32))
    launch(mod, "k", -(-n // 256), 256, m, Buf(mem, x), n, mem=mem)
    np.testing.assert_array_equal(m.read(), [x[a::5].max() for a in range(5)])


def test_f64_and_generic_atomics_and_red(mem, rng):
    mod = load_ptx(HEADER + """
.visible .entry k(.param .u64 acc, .param .u64 x, .param .u64 out)
{
    .shared .align 8 .f64 s[2];
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .f64 %fd<4>;
    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [acc];
    ld.param.u64 %rd2, [x];
    mul.wide.u32 %rd3, %r1, 8;
    add.u64 %rd4, %rd2, %rd3;
    ld.global.f64 %fd1, [%rd4];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra WAIT;
    mov.f64 %fd2, 0d0000000000000000;
    st.shared.f64 [s], %fd2;
    st.shared.f64 [s+8], %fd2;
WAIT:
    bar.sync 0;
    // generic atomics on a shared address and on a global address
    mov.u64 %rd5, s;
    cvta.shared.u64 %rd6, %rd5;
    atom.add.f64 %fd3, [%rd6], %fd1;
    atom.relaxed.gpu.add.f64 %fd3, [%rd1], %fd1;
    red.shared.add.f64 [s+8], %fd1;
    red.global.add.u32 [%rd1+8], 1;
    bar.sync 0;
    @%p1 bra DONE;
    ld.param.u64 %rd7, [out];
    ld.shared.f64 %fd2, [s];
    st.global.f64 [%rd7], %fd2;
    ld.shared.f64 %fd2, [s+8];
    st.global.f64 [%rd7+8], %fd2;
DONE:
    ret;
}
""")
    # exactly representable values: any serialization gives the same sums
    x = rng.integers(-1000, 1000, 200).astype(np.float64) / 4
    acc = Buf(mem, np.zeros(2, np.float64))
    out = Buf(mem, n=2, dtype=np.float64, poison=POISON_FF)
    launch(mod, "k", 1, 200, acc, Buf(mem, x), out, mem=mem)
    assert out.read().tolist() == [x.sum(), x.sum()]
    assert acc.read()[0] == x.sum()
    assert acc.read()[1:].view(np.uint32)[0] == 200


# --- module variables --------------------------------------------------------------------

def test_module_globals_with_initializers_through_the_driver():
    from lowlevel import cuda
    cuda.use_driver("emu")
    ptx = nvrtc_ptx("""
    __device__ int table[5] = {1, 2, 3, -4, 5};
    __constant__ float coef[3] = {0.5f, 1.5f, -2.0f};
    __device__ char msg[] = "hello";
    __device__ unsigned long long counter;
    extern "C" __global__ void k(float* out) {
        int t = threadIdx.x;
        out[t] = table[t % 5] * coef[t % 3] + msg[t % 5];
        if (t == 0) table[4] = 50;
        atomicAdd(&counter, 1ull);
    }""")
    mod = cuda.Module.from_ptx(ptx)
    names = {n for n in ("table", "coef", "msg", "counter")}
    got = {n: mod.get_global(n) for n in names}
    assert got["table"][1] == 20 and got["coef"][1] == 12 and got["msg"][1] == 6
    host = np.zeros(5, np.int32)
    cuda.memcpy_dtoh(host, got["table"][0])
    assert host.tolist() == [1, 2, 3, -4, 5]
    text = np.zeros(6, np.uint8)
    cuda.memcpy_dtoh(text, got["msg"][0])
    assert text.tobytes() == b"hello\0"
    cuda.memcpy_htod(got["coef"][0], np.array([1.0, 2.0, 3.0], np.float32))   # cudaMemcpyToSymbol
    out = cuda.mem_alloc(64 * 4)
    mod.get_function("k").launch(1, 64, (out,))
    res = np.zeros(64, np.float32)
    cuda.memcpy_dtoh(res, out)
    t = np.arange(64)
    expect = np.array([1, 2, 3, -4, 5])[t % 5] * np.array([1.0, 2.0, 3.0])[t % 3] \
        + np.frombuffer(b"hello", np.uint8)[t % 5]
    np.testing.assert_array_equal(res, expect.astype(np.float32))
    cuda.memcpy_dtoh(host, got["table"][0])
    assert host[4] == 50
    cnt = np.zeros(1, np.uint64)
    cuda.memcpy_dtoh(cnt, got["counter"][0])
    assert cnt[0] == 64
    with pytest.raises(cuda.CudaError, match="NOT_FOUND"):
        mod.get_global("nope")
    # the variables belong to the context's memory and go with the module
    used = cuda.mem_get_info()[0]
    mod.unload()
    assert cuda.mem_get_info()[0] > used


def test_module_global_initializer_forms():
    mod = load_ptx(HEADER + """
.global .align 4 .u32 a = 7;
.global .align 8 .f64 b[3] = {1.5, 0d4000000000000000, -3};
.const .align 4 .f32 c[2][2] = {{0f3F800000, 2.0}, {3, 4}};
.global .align 1 .b8 s[] = {104, 105, 0};
.global .align 2 .s16 partial[4] = {-1, 2};
.visible .entry k() { ret; }
""")
    mem = DeviceMemory(1 << 20)
    from lowlevel.emu.engine.spaces import allocate_globals
    sym = allocate_globals(mod, mem)

    def raw(name, dt):
        addr, size = sym[name]
        return mem.u8[addr + mem.shift:addr + mem.shift + size].view(dt).tolist()
    assert raw("a", np.uint32) == [7]
    assert raw("b", np.float64) == [1.5, 2.0, -3.0]
    assert raw("c", np.float32) == [1.0, 2.0, 3.0, 4.0]
    assert raw("s", np.uint8) == [104, 105, 0]
    assert raw("partial", np.int16) == [-1, 2, 0, 0]


# --- local memory and generic addressing ------------------------------------------------

def test_local_arrays_and_generic_pointers(mem, rng):
    src = """
    __device__ __noinline__ float pick(const float* p, int j) { return p[j]; }
    __device__ float sum3(const float* p) { return p[0] + p[1] + p[2]; }
    __global__ void k(const float* in, const int* idx, float* out, int n) {
        __shared__ float sh[64];
        float a[16];
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        sh[threadIdx.x] = (float)threadIdx.x;
        __syncthreads();
        if (i >= n) return;
        for (int j = 0; j < 16; j++) a[j] = in[i * 16 + j];
        int j = idx[i] & 15;
        const float* p = (j & 1) ? a : in + i * 16;          // local or global
        const float* q = (j & 2) ? sh + (threadIdx.x % 59) : p; // or shared
        out[i] = a[j] + sum3(q + (j & 3));
    }"""
    n = 300
    x = rng.standard_normal(n * 16).astype(np.float32)
    idx = rng.integers(0, 1 << 20, n).astype(np.int32)
    t = np.arange(n) % 64
    rows = x.reshape(n, 16)
    j = idx & 15
    expect = np.empty(n, np.float32)
    for i in range(n):
        base = (np.arange(64, dtype=np.float32)[t[i] % 59:]) if j[i] & 2 else rows[i]
        o = j[i] & 3
        expect[i] = rows[i, j[i]] + (base[o] + base[o + 1] + base[o + 2])
    for options in ((), ("-G",)):
        try:
            mod = cu(src, options)
        except PtxError as e:                # `call` belongs to another part of the emulator
            if "call" in str(e):
                pytest.skip(f"-G build needs call: {e}")
            raise
        out = Buf(mem, n=n, dtype=np.float32, poison=POISON_FF)
        launch(mod, "k", -(-n // 64), 64, Buf(mem, x), Buf(mem, idx), out, n, mem=mem)
        np.testing.assert_array_equal(out.read(), expect, err_msg=str(options))


def test_cvta_windows_and_local_depot(mem):
    mod = load_ptx(HEADER + """
.visible .entry k(.param .u64 out)
{
    .local .align 8 .b8 __local_depot0[32];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    mov.u32 %r1, %tid.x;
    st.u32 [%SP+4], %r1;             // generic store into local memory
    ld.local.u32 %r2, [%SPL+4];
    cvta.to.local.u64 %rd1, %SP;
    ld.param.u64 %rd2, [out];
    mul.wide.u32 %rd3, %r1, 24;
    add.u64 %rd2, %rd2, %rd3;
    st.global.u64 [%rd2], %SP;
    st.global.u64 [%rd2+8], %rd1;
    cvt.u64.u32 %rd4, %r2;
    st.global.u64 [%rd2+16], %rd4;
    ret;
}
""")
    assert mod.kernels["k"].local_bytes == 32
    out = Buf(mem, n=(40, 3), dtype=np.uint64, poison=POISON_FF)
    launch(mod, "k", 1, 40, out, mem=mem)
    got = out.read()
    assert (got[:, 0] == LOCAL_WINDOW).all() and (got[:, 1] == 0).all()
    assert got[:, 2].tolist() == list(range(40))


def test_isspacep_tells_the_windows_apart(mem):
    mod = cu("""
    __global__ void k(float* g, int* out) {
        __shared__ float s[4];
        float l[3];
        l[0] = 1.0f;
        float* ps[3] = {g, s, l};
        int t = threadIdx.x;
        float* q = ps[(t + (int)l[0]) % 3];
        out[t] = __isShared(q) * 4 + __isGlobal(q) * 2 + __isLocal(q);
    }""")
    out = Buf(mem, n=64, dtype=np.int32, poison=POISON_FF)
    launch(mod, "k", 1, 64, Buf(mem, np.zeros(4, np.float32)), out, mem=mem)
    assert out.read().tolist() == [[4, 1, 2][t % 3] for t in range(64)]


# --- faults ------------------------------------------------------------------------------

FAULTS = HEADER + """
.visible .entry k(.param .u32 where, .param .u32 off)
{
    .shared .align 4 .b8 s[64];
    .local .align 4 .b8 l[16];
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u32 %r1, [where];
    ld.param.u32 %r2, [off];
    mov.u32 %r3, %tid.x;
    setp.eq.u32 %p1, %r3, 5;        // only thread 5 misbehaves
    selp.u32 %r2, %r2, 0, %p1;
    setp.eq.u32 %p2, %r1, 0;
    @%p2 bra SHARED;
    setp.eq.u32 %p2, %r1, 1;
    @%p2 bra LOCAL;
    mov.u64 %rd1, s;
    cvta.shared.u64 %rd1, %rd1;
    cvt.u64.u32 %rd2, %r2;
    add.u64 %rd1, %rd1, %rd2;
    ld.u32 %r4, [%rd1];
    ret;
SHARED:
    mov.u32 %r5, s;
    add.u32 %r5, %r5, %r2;
    st.shared.u32 [%r5], %r3;
    ret;
LOCAL:
    mov.u64 %rd1, l;
    cvt.u64.u32 %rd2, %r2;
    add.u64 %rd1, %rd1, %rd2;
    ld.local.u32 %r4, [%rd1];
    ret;
}
"""


@pytest.mark.parametrize("where, space, line", [(0, "shared", 30), (1, "local", 36),
                                                (2, "generic", 25)])
def test_out_of_bounds_and_misaligned_name_the_space(mem, where, space, line):
    mod = load_ptx(FAULTS)
    run_kernel(mod, "k", 2, 32, struct.pack("<II", where, 12), mem)       # in bounds: fine
    for off, code, what in ((128 if where != 1 else 16, "CUDA_ERROR_ILLEGAL_ADDRESS", "out-of-bounds"),
                            (6, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned")):
        with pytest.raises(KernelFault) as e:
            run_kernel(mod, "k", 2, 32, struct.pack("<II", where, off), mem)
        m = e.value.message
        assert e.value.code_name == code, m
        assert what in m and "4-byte" in m and f"PTX line {line}" in m, m
        assert "thread (5,0,0)" in m and "block (0,0,0)" in m and "k:" in m, m
        assert f"{space} {'load' if where else 'store'}" in m, m
        if space == "generic":
            assert "shared offset" in m, m


# --- watchdog -----------------------------------------------------------------------------

def test_watchdog_stops_a_kernel_that_never_finishes(mem, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_EMU_WATCHDOG_S", "0.3")
    mod = cu("""
    __global__ void spin(volatile int* flag, int* out) {
        if (threadIdx.x == 3) { while (*flag == 0) {} out[0] = 1; }
    }""")
    with pytest.raises(KernelFault) as e:
        launch(mod, "spin", 1, 32, Buf(mem, np.zeros(1, np.int32)), Buf(mem, np.zeros(1, np.int32)),
               mem=mem)
    assert e.value.code_name == "CUDA_ERROR_LAUNCH_TIMEOUT"
    assert "spin" in e.value.message and "LOWLEVEL_EMU_WATCHDOG_S" in e.value.message


def test_a_module_variable_cannot_be_freed_by_hand():
    from lowlevel import cuda
    cuda.use_driver("emu")
    ptx = (".version 7.0\n.target sm_60\n.address_size 64\n.visible .global .align 4 .u32 counter = 5;\n"
           ".visible .entry k()\n{\n    ret;\n}\n")
    module = cuda.Module.from_ptx(ptx)
    address, size = module.get_global("counter")
    with pytest.raises(cuda.CudaError) as info:
        cuda.get_driver().cuMemFree(address)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and "counter" in info.value.details

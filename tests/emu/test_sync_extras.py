"""Barrier reductions (bar.red: __syncthreads_count/_and/_or), asynchronous copies
(cp.async, __pipeline_memcpy_async) and device assert() (__assertfail) on the emulated GPU,
driven through the engine directly.

Kernels come from NVRTC (plain and -G builds) where natural and are handwritten PTX for
the edge cases: lanes arriving at a reduction from different code paths (the divergent
scheduler), predicates of exited threads, zero-fill, ignore-src, faults. References are
numpy on fresh random inputs; outputs are poisoned first.
"""
import numpy as np
import pytest

from cuda_c import nvrtc_ptx
from engine_helpers import HEADER, Buf, launch
from lowlevel.emu.driver.errors import describe
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError
from lowlevel.emu.engine.decode import load_ptx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BUILDS = [(), ("-G",)]


def cu(source, options=()):
    return load_ptx(nvrtc_ptx(source, options=list(options)))


# --- bar.red ---------------------------------------------------------------------------------

BAR_RED = r"""
extern "C" __global__ void red(const int* x, int n, int lo, int hi, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? x[i] : 0;
    int c = __syncthreads_count(v > lo);
    int a = __syncthreads_and(v > -hi);
    int o = __syncthreads_or(v > hi);
    if (i < n) { out[3 * i] = c; out[3 * i + 1] = a; out[3 * i + 2] = o; }
}
"""


@pytest.mark.parametrize("options", BUILDS, ids=["nvrtc", "nvrtc-G"])
def test_syncthreads_count_and_or_every_thread(mem, rng, options):
    mod = cu(BAR_RED, options)
    block = int(rng.choice([37, 64, 100, 256]))         # 37, 100: padding lanes in the last warp
    n = int(rng.integers(1000, 3000))
    grid = -(-n // block)
    x = rng.integers(-100, 100, size=n).astype(np.int32)
    quiet = rng.random(grid) < 0.4                      # some blocks: all > -hi, none > hi
    for b in np.flatnonzero(quiet):
        x[b * block:(b + 1) * block] = np.abs(x[b * block:(b + 1) * block]) % 50
    lo, hi = int(rng.integers(-20, 20)), 90
    out = Buf(mem, n=3 * n, dtype=np.int32)
    launch(mod, "red", grid, block, Buf(mem, x), n, lo & 0xFFFFFFFF, hi, out, mem=mem)
    v = np.zeros(grid * block, np.int64)
    v[:n] = x
    w = v.reshape(grid, block)
    per_cta = np.stack([(w > lo).sum(1), (w > -hi).all(1), (w > hi).any(1)], axis=1)
    expect = np.repeat(per_cta, block, axis=0)[:n].astype(np.int32)
    np.testing.assert_array_equal(out.read().reshape(n, 3), expect)


# Two bar.red instructions on barrier 0 in the two arms of a branch (sm_70+ barriers count
# threads, whatever instruction they wait at): lanes park at two different blocks, so the
# divergent scheduler releases them and reduces over both. Threads with x < 0 exit first:
# they count as arrived and contribute nothing (not even to .and).
DIVERGENT = HEADER + r"""
.visible .entry k(.param .u64 px, .param .u64 pout, .param .u32 pmode)
{
    .reg .pred %p<6>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r9, [pmode];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.s32 %r5, [%rd4];
    setp.lt.s32 %p1, %r5, 0;
    @%p1 exit;
    setp.gt.s32 %p2, %r5, 50;                  // the predicate reduced
    and.b32 %r6, %r3, 1;
    setp.eq.s32 %p3, %r6, 0;
    setp.eq.s32 %p5, %r9, 1;
    @%p5 bra AND;
    @%p3 bra EVEN;
    bar.red.popc.u32 %r7, 0, %p2;              // odd threads
    bra.uni DONE;
EVEN:
    bar.red.popc.u32 %r7, 0, !%p2;             // even threads count the negation
    bra.uni DONE;
AND:
    @%p3 bra EVEN2;
    bar.red.and.pred %p4, 0, %p2;
    bra.uni DONE2;
EVEN2:
    bar.red.or.pred %p4, 0, %p2;               // same barrier: the engine keys on the id
    bra.uni DONE2;                             // (op of each lane's own instruction)
DONE2:
    selp.u32 %r7, 1, 0, %p4;
DONE:
    mul.wide.s32 %rd5, %r4, 4;
    add.s64 %rd6, %rd2, %rd5;
    st.global.u32 [%rd6], %r7;
    ret;
}
"""


def test_bar_red_divergent_arrival_and_exited_threads(mem, rng):
    mod = load_ptx(DIVERGENT)
    block, grid = 96, int(rng.integers(3, 9))
    n = block * grid
    x = rng.integers(-30, 100, size=n).astype(np.int32)
    x[:block] = np.abs(x[:block])                      # block 0: nobody exits
    out = Buf(mem, n=n, dtype=np.int32)
    stats = launch(mod, "k", grid, block, Buf(mem, x), out, 0, mem=mem)
    assert stats.divergent_steps > 0                   # the lanes did arrive separately
    w = x.reshape(grid, block)
    alive = w >= 0
    odd = (np.arange(block) % 2 == 1)[None, :]
    contrib = np.where(odd, w > 50, ~(w > 50)) & alive
    expect = np.repeat(contrib.sum(1), block).reshape(grid, block)
    got = out.read().reshape(grid, block)
    np.testing.assert_array_equal(got[alive], expect[alive])
    assert (got[~alive] == np.int32(np.uint32(0xDEADBEEF).view(np.int32))).all()

    out2 = Buf(mem, n=n, dtype=np.int32)
    launch(mod, "k", grid, block, Buf(mem, x), out2, 1, mem=mem)
    p = (w > 50) & alive
    a = np.where(alive, w > 50, True).all(1)           # .and over the arrived (live) threads
    o = p.any(1)
    expect2 = np.where(odd, a[:, None], o[:, None]).astype(np.int32)
    got2 = out2.read().reshape(grid, block)
    np.testing.assert_array_equal(got2[alive], expect2[alive])


def test_bar_red_refusals():
    body = ".visible .entry k() {{ .reg .pred %p<3>; .reg .b32 %r<3>; setp.eq.u32 %p1, 1, 1; {} ret; }}"
    for bad, why in [("@%p1 bar.red.popc.u32 %r1, 0, %p1;", "predicated"),
                     ("bar.red.popc.pred %p2, 0, %p1;", "destination"),
                     ("bar.red.popc.u32 %r1, %r2, %p1;", "register"),
                     ("bar.red.add.u32 %r1, 0, %p1;", "not supported")]:
        with pytest.raises(PtxError, match=why):
            load_ptx(HEADER + body.format(bad))


# --- cp.async --------------------------------------------------------------------------------

PIPELINE = r"""
#include <cuda_pipeline.h>
extern "C" __global__ void stage(const int* in, int* out) {
    __shared__ __align__(16) int tile[3 * 256];
    const int* src = in + blockIdx.x * 3 * 256;
    int t = threadIdx.x;
    // 16-byte copies whose last 4 bytes are zero-filled, 8-byte copies, 4-byte copies of
    // which every fifth is all zero-fill (src-size 0); they cover the whole tile
    for (int c = t; c < 64; c += blockDim.x)
        __pipeline_memcpy_async(&tile[4 * c], &src[4 * c], 16, 4);
    __pipeline_commit();
    for (int c = t; c < 128; c += blockDim.x)
        __pipeline_memcpy_async(&tile[256 + 2 * c], &src[256 + 2 * c], 8);
    for (int c = t; c < 256; c += blockDim.x)
        __pipeline_memcpy_async(&tile[512 + c], &src[512 + c], 4, c % 5 == 0 ? 4 : 0);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int k = t; k < 3 * 256; k += blockDim.x) out[blockIdx.x * 3 * 256 + k] = tile[3 * 256 - 1 - k];
}
"""


def _cudart_include():
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        inc = find_nvidia_header_directory("cudart")
    except Exception:
        inc = None
    if inc is None:
        pytest.skip("cuda_pipeline.h not found (pip install nvidia-cuda-runtime)")
    return inc


@pytest.mark.parametrize("options", BUILDS, ids=["nvrtc", "nvrtc-G"])
def test_pipeline_memcpy_async_sizes_and_zfill(mem, rng, options):
    inc = _cudart_include()
    mod = cu(PIPELINE, (*options, f"--include-path={inc}"))
    grid, block = int(rng.integers(2, 6)), int(rng.choice([32, 48, 64]))
    x = rng.integers(-2**31, 2**31, size=grid * 768, dtype=np.int64).astype(np.int32)
    out = Buf(mem, n=grid * 768, dtype=np.int32)
    launch(mod, "stage", grid, block, Buf(mem, x), out, mem=mem)
    tile = x.reshape(grid, 768).copy()
    tile[:, 3:256:4] = 0                               # the zero-filled last word of each 16
    tile[:, 512::5] = 0                                # the 4-byte copies of src-size 0
    np.testing.assert_array_equal(out.read().reshape(grid, 768), tile[:, ::-1])


CP = HEADER + r"""
.visible .entry cp(.param .u64 pin, .param .u64 pout, .param .u32 pbad, .param .u32 pdst)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    .shared .align 16 .b8 tile[1024];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r9, [pbad];
    ld.param.u32 %r10, [pdst];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 4;                       // 16 bytes per thread
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd1, %rd3;
    cvt.u64.u32 %rd7, %r9;
    add.s64 %rd4, %rd4, %rd7;                  // + pbad: misaligned / out of bounds on demand
    mov.u32 %r3, tile;
    add.s32 %r4, %r3, %r2;
    add.s32 %r4, %r4, %r10;                    // + pdst: outside the window on demand
    and.b32 %r5, %r1, 15;                      // src-size: tid % 16 (a register)
    setp.eq.u32 %p1, %r5, 3;                   // ignore-src for tid % 16 == 3
    setp.lt.u32 %p2, %r1, 32;
    @%p2 cp.async.ca.shared.global.L2::128B [%r4], [%rd4], 16, %r5;
    @!%p2 cp.async.cg.shared::cta.global [%r4], [%rd4], 16, %p1;
    cp.async.commit_group;
    cp.async.wait_group 0;
    cp.async.wait_all;
    bar.sync 0;
    mov.u32 %r6, tile;
    add.s32 %r7, %r6, %r2;
    ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r7];
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r8, %r9, %r10, %r11};
    ret;
}
"""


def test_cp_async_src_size_register_and_ignore_src(mem, rng):
    mod = load_ptx(CP)
    x = rng.integers(1, 255, size=64 * 16).astype(np.uint8)
    inp, out = Buf(mem, x), Buf(mem, n=64 * 16, dtype=np.uint8, poison=np.uint8(0xFF))
    launch(mod, "cp", 1, 64, inp, out, 0, 0, mem=mem)
    expect = x.reshape(64, 16).copy()
    t = np.arange(64)
    k = t % 16
    for i in range(32):                                # src-size = tid % 16, then zeros
        expect[i, k[i]:] = 0
    expect[32:][k[32:] == 3] = 0                       # ignore-src: all zeros
    np.testing.assert_array_equal(out.read().reshape(64, 16), expect)


def test_cp_async_faults_name_the_instruction(mem, rng):
    mod = load_ptx(CP)
    x = rng.integers(0, 255, size=64 * 16).astype(np.uint8)
    inp, out = Buf(mem, x), Buf(mem, n=64 * 16, dtype=np.uint8)
    with pytest.raises(KernelFault) as e:              # src 4 bytes off a 16-byte boundary
        launch(mod, "cp", 1, 64, inp, out, 4, 0, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert "cp.async" in e.value.message and "thread (1,0,0)" in e.value.message
    with pytest.raises(KernelFault) as e:              # past the end of the input
        launch(mod, "cp", 1, 64, inp, out, 1 << 30, 0, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "global load" in e.value.message and "cp.async" in e.value.message
    # thread 0 reads 0 bytes (src-size 0): only thread 1 touches global memory there
    assert "thread (1,0,0)" in e.value.message
    with pytest.raises(KernelFault) as e:              # dst past the 1024-byte shared window
        launch(mod, "cp", 1, 64, inp, out, 0, 512, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "shared store" in e.value.message and "thread (32,0,0)" in e.value.message


def test_cp_async_refusals():
    body = (".visible .entry k(.param .u64 a) {{ .reg .b64 %rd<3>; .reg .b32 %r<3>; "
            ".shared .align 16 .b8 s[64]; mov.u32 %r1, s; ld.param.u64 %rd1, [a]; {} ret; }}")
    for bad, why in [("cp.async.cg.shared.global [%r1], [%rd1], 8;", "16 bytes"),
                     ("cp.async.ca.shared.global [%r1], [%rd1], 12;", "4, 8 or 16"),
                     ("cp.async.ca.shared.global [%r1], [%rd1], 8, 9;", "src-size"),
                     ("cp.async.wait_group %r2;", "integer constant"),
                     ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                      "[%r1], [%rd1], 16, [%r1];", "not supported"),
                     ("cp.async.mbarrier.arrive.shared.b64 [%r1];", "not supported")]:
        with pytest.raises(PtxError, match=why):
            load_ptx(HEADER + body.format(bad))


# --- device assert() -----------------------------------------------------------------------

ASSERT = r"""
#define DEVICE_ASSERT(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
extern "C" __global__ void check(const int* x, int n, int* out) {
    int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
    if (i < n) {
        DEVICE_ASSERT(x[i] != 7);
        out[i] = 2 * x[i];
    }
}
"""


@pytest.mark.parametrize("options", BUILDS, ids=["nvrtc", "nvrtc-G"])
def test_device_assert_reports_the_first_failing_thread(mem, rng, capsys, options):
    mod = cu(ASSERT, options)
    grid, block = (3, 2), (8, 4)
    n = 3 * 2 * 32 - int(rng.integers(1, 20))
    x = rng.integers(8, 1000, size=n).astype(np.int32)
    out = Buf(mem, n=n, dtype=np.int32)
    launch(mod, "check", grid, block, Buf(mem, x), n, out, mem=mem)   # passes: no fault
    np.testing.assert_array_equal(out.read(), 2 * x)
    assert capsys.readouterr().err == ""

    bad = np.sort(rng.choice(np.arange(40, n), size=3, replace=False))
    x[bad] = 7
    with pytest.raises(KernelFault) as e:
        launch(mod, "check", grid, block, Buf(mem, x), n, out, mem=mem)
    first = int(bad[0])
    cta, t = divmod(first, 32)
    expect = (f".cu:6: check: block: [{cta % 3},{cta // 3},0], "
              f"thread: [{t % 8},{t // 8},0] Assertion `x[i] != 7` failed.")
    assert e.value.code_name == "CUDA_ERROR_ASSERT"
    file, _, rest = e.value.message.partition(".cu:")     # the name NVRTC was given
    assert file and "\n" not in file and ".cu:" + rest == expect, e.value.message
    assert capsys.readouterr().err.strip() == e.value.message
    assert describe(710) and "assert" in describe(710)


ASSERT_PTX = HEADER + r"""
.global .align 1 .b8 msg[5] = {111, 111, 112, 115, 0};
.global .align 1 .b8 file[4] = {97, 46, 99, 0};
.global .align 1 .b8 fn[2] = {102, 0};
.extern .func __assertfail(.param .b64 a0, .param .b64 a1, .param .b32 a2, .param .b64 a3,
                           .param .b64 a4);
.visible .entry k(.param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r2, %r1;
    mov.u64 %rd1, msg;
    cvta.global.u64 %rd1, %rd1;
    mov.u64 %rd2, file;
    cvta.global.u64 %rd2, %rd2;
    mov.u64 %rd3, fn;
    cvta.global.u64 %rd3, %rd3;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 param2;
    st.param.b32 [param2+0], 42;
    .param .b64 param3;
    st.param.b64 [param3+0], %rd3;
    .param .b64 param4;
    st.param.b64 [param4+0], 1;
    @%p1 call.uni __assertfail, (param0, param1, param2, param3, param4);
    }
    ret;
}
"""


def test_guarded_assertfail_call_in_handwritten_ptx(mem, rng, capsys):
    mod = load_ptx(ASSERT_PTX)
    launch(mod, "k", 2, 64, 1000, mem=mem)            # nobody's guard holds
    t = int(rng.integers(0, 64))
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", 2, 64, t, mem=mem)
    msg = f"a.c:42: f: block: [0,0,0], thread: [{t},0,0] Assertion `oops` failed."
    assert e.value.code_name == "CUDA_ERROR_ASSERT" and e.value.message == msg
    assert msg in capsys.readouterr().err

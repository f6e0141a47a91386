"""Barrier reductions (bar.red: __syncthreads_count/_and/_or) on the emulated GPU, driven
through the engine directly: lanes arriving from different code paths (the divergent
scheduler), predicates of exited threads, refusals.

Kernels come from NVRTC (plain and -G builds) where natural and are handwritten PTX for
the edge cases. References are numpy on fresh random inputs; outputs are poisoned first.
"""
import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.ptx.errors import PtxError

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

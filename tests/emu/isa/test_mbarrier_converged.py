"""mbarrier arrive and wait of converged CTAs on their own barrier (isa/mbarfast.py: per CTA
arithmetic instead of sorting every lane through the atomics), against a one-thread-at-a-
time model in plain Python, with the per-CTA path on and off: several CTAs at different
phases, exited threads, CTAs not a multiple of 32 threads, counts above 1, arrive_drop,
phases completing at the last arrival, before it (the exact path's case) or not at all;
and that the common case no longer goes through the lane-sorting atomics."""
import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine import spaces
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.isa import mbarfast
from lowlevel.emu.isa.mbarstate import Arrive

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

WORDS = 8         # per thread: two pending counts, four wait results, two zeros


def kernel(form):
    return load_ptx(HEADER + f"""
.visible .entry k(.param .u64 pout, .param .u32 pc, .param .u32 pa, .param .u32 pn)
{{
    .reg .pred %p<10>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b64 pad;
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd10, [pout];
    ld.param.u32 %r10, [pc];
    ld.param.u32 %r11, [pa];
    ld.param.u32 %r12, [pn];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;
    mul.wide.u32 %rd11, %r4, {4 * WORDS};
    add.s64 %rd12, %rd10, %rd11;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared.b64 [bar], %r12;
    bar.sync 0;
    and.b32 %r5, %r2, 1;
    setp.ne.u32 %p2, %r5, 0;
    and.pred %p3, %p1, %p2;
    @%p3 mbarrier.{form}.shared.b64 %rd1, [bar], %r10;
    bar.sync 0;
    setp.ge.u32 %p4, %r1, %r11;
    @%p4 ret;
    mbarrier.{form}.shared.b64 %rd2, [bar], %r10;
    mbarrier.test_wait.shared.b64 %p5, [bar], %rd2;
    mbarrier.{form}.shared.b64 %rd3, [bar], %r10;
    mbarrier.test_wait.shared.b64 %p6, [bar], %rd3;
    mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
    mbarrier.test_wait.parity.shared.b64 %p8, [bar], 1;
    mbarrier.pending_count.b64 %r6, %rd2;
    mbarrier.pending_count.b64 %r7, %rd3;
    selp.u32 %r8, 1, 0, %p5;
    selp.u32 %r9, 1, 0, %p6;
    selp.u32 %r13, 1, 0, %p7;
    selp.u32 %r14, 1, 0, %p8;
    mov.u32 %r15, 0;
    st.global.v4.u32 [%rd12], {{%r6, %r7, %r8, %r9}};
    st.global.v4.u32 [%rd12+16], {{%r13, %r14, %r15, %r15}};
    ret;
}}""")


def model(grid, threads, arriving, c, n, drop):
    """What one thread at a time in lane order leaves in the output (None: poison)."""
    out = np.full((grid * threads, WORDS), -1, np.int64)
    for cta in range(grid):
        bar = {"pending": n, "expected": n, "phase": 0}

        def arrive():
            assert c <= bar["pending"], "the case would fault"
            state = (bar["pending"], bar["phase"])
            bar["pending"] -= c
            if drop:
                bar["expected"] -= c
            if bar["pending"] == 0:
                bar["phase"] ^= 1
                bar["pending"] = bar["expected"]
            return state
        if cta % 2:
            arrive()                               # thread 0, before the others
        first = [arrive() for _ in range(arriving)]
        waits1 = [s[1] != bar["phase"] for s in first]
        second = [arrive() for _ in range(arriving)]
        waits2 = [s[1] != bar["phase"] for s in second]
        for t in range(arriving):
            out[cta * threads + t] = (first[t][0], second[t][0], waits1[t], waits2[t],
                                      bar["phase"] != 0, bar["phase"] != 1, 0, 0)
    return out


CASES = [  # (threads, arriving, count, init count, drop)
    (64, 64, 1, 64, False),        # every phase completes at a CTA's last arrival
    (64, 64, 1, 200, False),       # no phase completes
    (96, 70, 2, 140, False),       # exited threads; completes at the last arrival
    (50, 50, 1, 50, False),        # padding lanes
    (96, 70, 2, 282, False),       # odd CTAs complete at their last arrival, even ones not
    (50, 50, 1, 101, False),
    (64, 64, 1, 16, False),        # phases complete mid-instruction: the exact path
    (64, 48, 3, 300, True),
]


@pytest.mark.parametrize("per_cta", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_converged_arrivals_match_lane_order(mem, rng, monkeypatch, case, per_cta):
    threads, arriving, c, n, drop = CASES[case]
    if not per_cta:
        monkeypatch.setattr(mbarfast, "arrive", lambda *a: None)
        monkeypatch.setattr(mbarfast, "wait", lambda *a: None)
    grid = int(rng.integers(1, 6))
    want = model(grid, threads, arriving, c, n, drop)
    out = Buf(mem, n=grid * threads * WORDS, dtype=np.int32)
    launch(kernel("arrive_drop" if drop else "arrive"), "k", grid, threads, out,
           c, arriving, n, mem=mem)
    got = out.read().reshape(-1, WORDS).astype(np.int64)
    poisoned = want[:, 0] < 0
    assert (got[poisoned] == np.array([0xDEADBEEF], np.uint32).view(np.int32)[0]).all()
    np.testing.assert_array_equal(got[~poisoned], want[~poisoned])


def test_block_arrivals_skip_the_lane_sort(mem, rng, monkeypatch):
    """Converged CTAs arriving once each on their own barrier: no arrive goes through the
    atomics' sort of every lane (it cost 0.3 ms an arrive at 8192 lanes); the result is
    still the lane-order one."""
    sorted_arrives = []
    real = spaces.atomic_rmw

    def counting(view, idx, op, *rest):
        if isinstance(op, Arrive):
            sorted_arrives.append(idx.size)
        return real(view, idx, op, *rest)
    monkeypatch.setattr(spaces, "atomic_rmw", counting)
    grid, threads = int(rng.integers(2, 6)), 128
    out = Buf(mem, n=grid * threads * WORDS, dtype=np.int32)
    n = 2 * threads + 1             # the odd CTAs complete a phase at their last arrival
    launch(kernel("arrive"), "k", grid, threads, out, 1, threads, n, mem=mem)
    got = out.read().reshape(-1, WORDS).astype(np.int64)
    np.testing.assert_array_equal(got, model(grid, threads, threads, 1, n, False))
    # only the odd CTAs' early arrive of thread 0 (a guarded one) sorts, once
    assert sorted_arrives == [grid // 2]

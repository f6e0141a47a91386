"""mbarrier on the emulated GPU, through the engine: the phase, pending-count and tx-count
rules of the PTX ISA on handwritten PTX, what `cuda::barrier` and `cuda::pipeline` compile
to (NVRTC), waits that yield to the threads they wait for, and the misuse the ISA leaves
undefined faulting instead of working.
"""
import numpy as np
import pytest
from helpers.barrier_kernels import BARRIER_KERNELS
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SM90 = HEADER.replace("sm_80", "sm_90")


def ptx(body, params=".param .u64 pout", regs=""):
    return load_ptx(SM90 + f"""
.visible .entry k({params})
{{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .shared .align 8 .b64 bar;
    .shared .align 8 .b64 bar2;
    {regs}
    ld.param.u64 %rd10, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd11, %r1, 4;
    add.s64 %rd12, %rd10, %rd11;
{body}
    ret;
}}""")


def run(mod, threads, n_out=None, mem=None, **kw):
    out = Buf(mem, n=(n_out or threads) * kw.pop("words", 1), dtype=np.int32)
    launch(mod, "k", 1, threads, out, mem=mem)
    return out.read()


INIT = """
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared.b64 [bar], {count};
    bar.sync 0;
"""


def test_arrivals_complete_the_phase_and_states_record_it(mem, rng):
    """Every thread arrives once on a barrier of `threads`: the states hold the pending
    count before each arrive (lane order), every state's phase is over afterwards, and the
    parity waits see phase 0 done and phase 1 running."""
    threads = int(rng.choice([32, 64, 96]))
    mod = ptx(INIT.format(count=threads) + """
    mbarrier.arrive.shared.b64 %rd1, [bar];
    mbarrier.pending_count.b64 %r2, %rd1;
    mbarrier.test_wait.shared.b64 %p2, [bar], %rd1;
    mbarrier.test_wait.parity.shared.b64 %p3, [bar], 1;
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [bar], 0;
    selp.u32 %r3, 1000, 0, %p2;
    selp.u32 %r4, 100, 0, %p3;
    selp.u32 %r5, 10, 0, %p4;
    add.u32 %r2, %r2, %r3;
    add.u32 %r2, %r2, %r4;
    add.u32 %r2, %r2, %r5;
    st.global.u32 [%rd12], %r2;""")
    got = run(mod, threads, mem=mem)
    np.testing.assert_array_equal(got, threads - np.arange(threads) + 1000 + 10)


def test_a_wait_before_the_last_arrival_fails(mem):
    """Thread 0 tests before the others arrive (its state's phase is not over), then again
    after a bar.sync (it is)."""
    mod = ptx(INIT.format(count=2) + """
    setp.eq.u32 %p5, %r1, 1;
    mov.pred %p2, 0;
    mov.pred %p3, 0;
    @%p1 mbarrier.arrive.shared.b64 %rd1, [bar];
    @%p1 mbarrier.test_wait.shared.b64 %p2, [bar], %rd1;
    bar.sync 0;
    @%p5 mbarrier.arrive.shared.b64 %rd2, [bar];
    bar.sync 0;
    @%p1 mbarrier.test_wait.shared.b64 %p3, [bar], %rd1;
    selp.u32 %r2, 1, 0, %p2;
    selp.u32 %r3, 2, 0, %p3;
    add.u32 %r2, %r2, %r3;
    st.global.u32 [%rd12], %r2;""")
    assert run(mod, 32, mem=mem)[0] == 2


def test_arrive_counts_drop_and_tx_counts(mem):
    """One thread: arrive with a count, arrive_drop lowering the expected count of later
    phases, expect_tx/complete_tx holding a phase open with no arrivals pending."""
    mod = ptx("""
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra DONE;
    mbarrier.init.shared.b64 [bar], 5;
    mov.u32 %r9, 3;
    mbarrier.arrive.shared::cta.b64 %rd1, [bar], %r9;      // pending 5 -> 2
    mbarrier.arrive_drop.shared.b64 %rd2, [bar], 2;       // pending 0: phase 0 done; expected 3
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], 64;   // pending 2, tx 64
    mbarrier.arrive.shared::cta.b64 %rd4, [bar], 2;       // pending 0, tx 64: still phase 1
    mbarrier.test_wait.shared.b64 %p2, [bar], %rd4;
    mbarrier.complete_tx.shared::cta.b64 [bar], 60;
    mbarrier.test_wait.shared.b64 %p3, [bar], %rd4;
    mbarrier.complete_tx.shared::cta.b64 [bar], 4;        // tx 0: phase 1 done
    mbarrier.test_wait.shared.b64 %p4, [bar], %rd4;
    mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], 8;
    mbarrier.arrive.shared.b64 %rd5, [bar];               // phase 2: pending 3 -> 2
    mbarrier.pending_count.b64 %r2, %rd1;
    mbarrier.pending_count.b64 %r3, %rd2;
    mbarrier.pending_count.b64 %r4, %rd3;
    mbarrier.pending_count.b64 %r5, %rd4;
    mbarrier.pending_count.b64 %r6, %rd5;
    mbarrier.test_wait.parity.shared.b64 %p5, [bar], 1;
    st.global.v4.u32 [%rd12], {%r2, %r3, %r4, %r5};
    selp.u32 %r7, 1, 0, %p2;
    selp.u32 %r8, 1, 0, %p3;
    selp.u32 %r9, 1, 0, %p4;
    selp.u32 %r10, 1, 0, %p5;
    st.global.v4.u32 [%rd12+16], {%r6, %r7, %r8, %r9};
    st.global.u32 [%rd12+32], %r10;
DONE:""")
    got = run(mod, 1, n_out=9, mem=mem)
    np.testing.assert_array_equal(got, [5, 2, 3, 2, 3, 0, 0, 1, 1])


def test_cp_async_mbarrier_arrive(mem):
    """.noinc counts as an arrival; without it the ISA adds one pending arrival first."""
    mod = ptx(INIT.format(count=2) + """
    @!%p1 bra DONE;
    cp.async.mbarrier.arrive.shared.b64 [bar];
    mbarrier.arrive.shared.b64 %rd1, [bar];
    mbarrier.pending_count.b64 %r2, %rd1;
    cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
    mbarrier.test_wait.shared.b64 %p2, [bar], %rd1;
    selp.u32 %r3, 10, 0, %p2;
    add.u32 %r2, %r2, %r3;
    st.global.u32 [%rd12], %r2;
DONE:""")
    assert run(mod, 32, mem=mem)[0] == 12


def _need_cccl() -> None:
    """NVRTC searches the CCCL headers by default; without them, skip."""
    from cuda.pathfinder import find_nvidia_header_directory
    if find_nvidia_header_directory("cccl") is None:
        pytest.skip("the CCCL headers (cuda/barrier) are not installed")


@pytest.fixture(scope="module")
def barrier_mod():
    _need_cccl()
    return load_ptx(nvrtc_ptx(BARRIER_KERNELS, arch="compute_90"))


@pytest.mark.parametrize("consumers_first", [1, 0])
def test_cuda_barrier_producer_consumer(mem, rng, barrier_mod, consumers_first):
    grid = 2
    x = rng.standard_normal(grid * 32).astype(np.float32)
    out = Buf(mem, n=grid * 32, dtype=np.float32)
    launch(barrier_mod, "produce_consume", grid, 64, Buf(mem, x), out, consumers_first, mem=mem)
    np.testing.assert_array_equal(out.read(), x * np.float32(3))


def test_cuda_pipeline_and_arrive_and_drop(mem, rng, barrier_mod):
    n = 3
    x = rng.standard_normal(64 * n).astype(np.float32)
    out = Buf(mem, n=64, dtype=np.float32)
    launch(barrier_mod, "pipelined_sum", 1, 64, Buf(mem, x), out, n, mem=mem)
    ref = sum(x[64 * i:64 * i + 64][(np.arange(64) + 1) % 64] for i in range(n))
    np.testing.assert_allclose(out.read(), ref, rtol=1e-6)
    out = Buf(mem, n=96, dtype=np.float32)
    launch(barrier_mod, "dropouts", 1, 96, out, mem=mem)
    np.testing.assert_array_equal(out.read()[32:], 1 + np.arange(32, 96, dtype=np.float32))


# --- what the ISA leaves undefined ------------------------------------------------------------

SPIN = """
WAIT:
    mbarrier.try_wait.shared.b64 %p2, [bar], %rd1;
    @!%p2 bra WAIT;
"""

MISUSE = {
    "uninitialised": ("mbarrier.arrive.shared.b64 %rd1, [bar];", "not initialised"),
    "invalidated": (INIT.format(count=32) + "@%p1 mbarrier.inval.shared.b64 [bar];\nbar.sync 0;\n"
                    "mbarrier.arrive.shared.b64 %rd1, [bar];", "not initialised"),
    "overstored": (INIT.format(count=32) + "@%p1 st.shared.u64 [bar], 0;\nbar.sync 0;\n"
                   "mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;", "not initialised"),
    "count beyond pending": (INIT.format(count=16) + "mov.u32 %r2, 17;\n"
                             "@%p1 mbarrier.arrive.shared::cta.b64 %rd1, [bar], %r2;",
                             "count 17 while only 16 arrivals are pending"),
    "arrive while tx pending": (INIT.format(count=1) +
                                "@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [bar], 8;\n"
                                "@%p1 mbarrier.arrive.shared.b64 %rd1, [bar];",
                                "while only 0 arrivals are pending"),
    "noComplete completes": (INIT.format(count=32) +
                             "mbarrier.arrive.noComplete.shared.b64 %rd1, [bar], 1;",
                             ".noComplete completed the phase"),
    "init count 0": ("mov.u32 %r2, 0;\nmbarrier.init.shared.b64 [bar], %r2;", "outside 1..1048575"),
    "arrive count 0": (INIT.format(count=32) + "mov.u32 %r2, 0;\n"
                       "mbarrier.arrive.shared::cta.b64 %rd1, [bar], %r2;", "outside 1..1048575"),
    "global address": ("mbarrier.init.b64 [%rd10], 1;", "outside shared memory"),
    "garbage state": (INIT.format(count=32) + "mov.u64 %rd1, 12345;\n"
                      "mbarrier.test_wait.shared.b64 %p2, [bar], %rd1;", "no mbarrier.arrive returned"),
    "converged deadlock": (INIT.format(count=33) + "mbarrier.arrive.shared.b64 %rd1, [bar];" + SPIN,
                           "mbarrier deadlock"),
    "divergent deadlock": (INIT.format(count=32) + "setp.lt.u32 %p3, %r1, 16;\n@%p3 bra SKIP;\n"
                           "mbarrier.arrive.shared.b64 %rd1, [bar];" + SPIN + "SKIP:",
                           "mbarrier deadlock"),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_undefined_use_faults(mem, case):
    body, message = MISUSE[case]
    mod = ptx(body)
    with pytest.raises(KernelFault) as info:
        run(mod, 32, mem=mem)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert message in info.value.message and "PTX line" in info.value.message.replace(
        "waits at an mbarrier wait (PTX line", "PTX line")


@pytest.mark.parametrize("line", [
    "mbarrier.init.shared::cluster.b64 [%r2], 1;",
    "mbarrier.try_wait.shared.b32 %p1, [bar], %rd1;",
    "mbarrier.arrive.bogus.shared.b64 %rd1, [bar];",
])
def test_refused_by_name(line):
    with pytest.raises(PtxError, match="mbarrier"):
        ptx(line)

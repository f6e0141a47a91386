"""setmaxnreg.inc/dec (sm_90a) on the emulated GPU, through the engine: warpgroups trading
registers with their CTA's pool as warp-specialised kernels do, an .inc that blocks until
another warpgroup's .dec releases enough (whichever runs first), and what the PTX ISA leaves
undefined or ptxas refuses faulting or refused, naming the instruction and its line.

Each kernel writes, per thread, its thread index times 3 plus the warpgroup's path, so a
thread that did not get through shows as poison."""
import numpy as np
import pytest
from helpers.emu_engine import Buf, launch
from helpers.ptxas import ptxas_refusal

from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.isa.setmaxnreg import entry_registers
from lowlevel.emu.ptx.errors import PtxError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def kernel(body: str, bounds: str = ".maxnreg 168", target: str = "sm_90a") -> str:
    """A kernel of `body` that ends by storing tid * 3 + %r9 to out[tid]; %r2 is the warpgroup."""
    return f"""
.version 8.0
.target {target}
.address_size 64
.visible .entry k(.param .u64 pout) {bounds}
{{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd10, [pout];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 7;
    mov.u32 %r9, 0;
{body}
DONE:
    mad.lo.u32 %r3, %r1, 3, %r9;
    mul.wide.u32 %rd11, %r1, 4;
    add.s64 %rd12, %rd10, %rd11;
    st.global.u32 [%rd12], %r3;
    ret;
}}"""


def run(text: str, threads: int, mem):
    assert ptxas_refusal(text, "sm_90a") in ("", None), ptxas_refusal(text, "sm_90a")
    out = Buf(mem, n=threads, dtype=np.uint32)
    launch(load_ptx(text), "k", 2, threads, out, mem=mem)        # two CTAs: a pool each
    return out.read()


def expected(threads: int, path) -> np.ndarray:
    tid = np.arange(threads, dtype=np.uint32)
    return tid * 3 + np.asarray(path, np.uint32)[tid // 128]


# Warpgroup 0 claims 88 more registers per thread (168 -> 256: 11264 of a pool that starts
# empty), warpgroups 1 and 2 give back 48 each (168 -> 120: 12288). Then registers go round:
# the consumer gives its 88 back, the producers take 40 each, and back again.
CONSUMER = """
    setmaxnreg.inc.sync.aligned.u32 256;
    mov.u32 %r9, 1;
    bar.sync 0;
    setmaxnreg.dec.sync.aligned.u32 168;
    bar.sync 0;
    setmaxnreg.inc.sync.aligned.u32 232;
    bra DONE;
"""
PRODUCER = """
    setmaxnreg.dec.sync.aligned.u32 {count};
    mov.u32 %r9, 2;
    bar.sync 0;
    setmaxnreg.inc.sync.aligned.u32 160;
    bar.sync 0;
    setmaxnreg.dec.sync.aligned.u32 120;
    bra DONE;
"""


@pytest.mark.parametrize("consumer_first", [True, False], ids=["inc-first", "dec-first"])
def test_a_warpgroup_waits_at_inc_until_others_release(mem, consumer_first):
    """Whichever branch the emulator runs first (lowest PC), the .inc that the empty pool
    cannot serve waits for the .decs, and every thread finishes."""
    first, second = (CONSUMER, PRODUCER.format(count=120))
    if not consumer_first:
        first, second = second, first
    cond = "setp.eq.u32 %p1, %r2, 0;" if consumer_first else "setp.ne.u32 %p1, %r2, 0;"
    body = f"    {cond}\n    @!%p1 bra OTHER;\n{first}OTHER:\n{second}"
    np.testing.assert_array_equal(run(kernel(body), 384, mem), expected(384, [1, 2, 2]))


def test_converged_inc_splits_the_warpgroups_it_cannot_serve(mem):
    """All three warpgroups release 8 registers each (3072 in the pool), then all ask for 16
    (2048 each): one goes on, the others wait until it gives them back."""
    body = """
    setmaxnreg.dec.sync.aligned.u32 160;
    setmaxnreg.inc.sync.aligned.u32 176;
    add.u32 %r9, %r2, 5;
    setmaxnreg.dec.sync.aligned.u32 160;
"""
    np.testing.assert_array_equal(run(kernel(body), 384, mem), expected(384, [5, 6, 7]))


def test_register_counts_from_launch_bounds():
    """ptxas's register count at entry: .maxnreg, or 64K over minnctapersm CTAs of maxntid
    threads in units of 8; none without (then ptxas drops setmaxnreg)."""
    parsed = load_ptx(kernel("", ".maxntid 384, 1, 1 .minnctapersm 1")).kernels["k"]
    assert entry_registers(parsed) == 168
    assert entry_registers(load_ptx(kernel("", ".maxnreg 200")).kernels["k"]) == 200
    assert entry_registers(load_ptx(kernel("", ".maxntid 384, 1, 1")).kernels["k"]) is None


def test_without_a_known_register_count_setmaxnreg_does_nothing(mem):
    """As ptxas: "'setmaxnreg' ignored; unable to determine register count at entry" (so this
    .inc, which no warpgroup could ever serve, does not block)."""
    body = "    setmaxnreg.inc.sync.aligned.u32 256;\n    mov.u32 %r9, 4;\n"
    np.testing.assert_array_equal(run(kernel(body, bounds=""), 256, mem), expected(256, [4, 4]))


MISUSE = {
    # warpgroup 0 waits at its .inc for 11264 registers, the others released 2048 and wait
    # for it at a CTA barrier
    "too few released": (384, "    setp.eq.u32 %p1, %r2, 0;\n    @!%p1 bra OTHER;\n" + CONSUMER
                         + "OTHER:\n" + PRODUCER.format(count=160), "128 at setmaxnreg.inc"),
    "converged over-subscription": (256, "    setmaxnreg.inc.sync.aligned.u32 176;\n", "setmaxnreg deadlock"),
    "inc below the count": (256, "    setmaxnreg.inc.sync.aligned.u32 160;\n", "may only raise"),
    "dec above the count": (256, "    setmaxnreg.dec.sync.aligned.u32 120;\n    setmaxnreg.dec.sync.aligned.u32 160;\n",
                            "only lower"),
    "part of a warpgroup": (256, "    setp.lt.u32 %p1, %r1, 64;\n    @%p1 setmaxnreg.dec.sync.aligned.u32 120;\n",
                            "64 of the 128 threads"),
    "warps diverged": (256, "    setp.lt.u32 %p1, %r1, 32;\n    @%p1 bra DONE;\n    setmaxnreg.dec.sync.aligned.u32 120;\n",
                       "96 of the 128 threads"),
    "block not whole warpgroups": (160, "    setmaxnreg.dec.sync.aligned.u32 120;\n", "not four whole warps"),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_undefined_use_faults(mem, case):
    threads, body, message = MISUSE[case]
    text = kernel(body, bounds=".maxntid 384, 1, 1 .minnctapersm 1" if threads != 256 else ".maxnreg 168")
    with pytest.raises(KernelFault) as info:
        run(text, threads, mem)
    assert info.value.code_name == "CUDA_ERROR_LAUNCH_FAILED"
    assert message in info.value.message and "PTX line" in info.value.message
    assert "setmaxnreg" in info.value.message


@pytest.mark.parametrize("line, target, message", [
    ("setmaxnreg.inc.sync.aligned.u32 100;", "sm_90a", "multiple of 8"),
    ("setmaxnreg.inc.sync.aligned.u32 264;", "sm_90a", "in [24, 256]"),
    ("setmaxnreg.dec.sync.aligned.u32 16;", "sm_90a", "in [24, 256]"),
    ("setmaxnreg.inc.sync.aligned.u32 232;", "sm_90", "sm_90a"),
    ("setmaxnreg.inc.aligned.u32 232;", "sm_90a", ".sync.aligned"),
    ("setmaxnreg.inc.sync.aligned.u32 %r1;", "sm_90a", "integer constant"),
])
def test_refused_at_load_as_ptxas_refuses(line, target, message):
    text = kernel("    " + line + "\n", target=target)
    assert ptxas_refusal(text, target) != "", "ptxas assembles it"
    with pytest.raises(PtxError, match="setmaxnreg") as info:
        load_ptx(text)
    assert message in str(info.value)

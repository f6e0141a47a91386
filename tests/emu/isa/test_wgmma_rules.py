"""wgmma's rules on the emulated GPU: what the PTX ISA leaves undefined faults, naming the
instruction, its PTX line and the register (the accumulators or A registers of a pending
mma_async touched before the wait_group that covers it; no wgmma.fence between register
accesses and the mma_async; a warpgroup that is not four whole converged warps; a
descriptor that differs between lanes, names bytes past the shared window or has a base
offset the ISA does not allow); what ptxas refuses is refused at load, checked against
ptxas itself where it is installed.
"""
import numpy as np
import pytest

from helpers.emu_engine import Buf, launch
from helpers.ptxas import ptxas_refusal
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError

MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, %rd3, 1, 1, 1, 0;"
KERNEL = r"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pd, .param .u64 bdesc)
{
    .reg .b32 %d<4>;                    // the accumulators
    .reg .b32 %a<4>;                    // A's fragment
    .reg .b32 %r<8>;                    // %r7 stays 0
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    .shared .align 1024 .b8 sb[8192];   // B
    mov.u32 %r0, %tid.x;
    mov.u32 %r7, 0;
    mov.u32 %r1, sb;                    // B = 0: each thread zeroes 16 bytes at 16*tid ...
    mad.lo.u32 %r2, %r0, 16, %r1;
    st.shared.v4.b32 [%r2], {%r7, %r7, %r7, %r7};
    st.shared.v4.b32 [%r2+4096], {%r7, %r7, %r7, %r7};   // ... and 4096 bytes further
    bar.sync 0;
    mov.b32 %d0, 0;                     // D = 0
    mov.b32 %d1, 0;
    mov.b32 %d2, 0;
    mov.b32 %d3, 0;
    mov.b32 %a0, 0;                     // A = 0
    mov.b32 %a1, 0;
    mov.b32 %a2, 0;
    mov.b32 %a3, 0;
    mov.u32 %r1, sb;                    // B's descriptor: its shared address >> 4 ...
    cvt.u64.u32 %rd1, %r1;
    shr.u64 %rd1, %rd1, 4;
    ld.param.u64 %rd2, [bdesc];         // ... and the rest from the parameter
    add.u64 %rd3, %rd1, %rd2;
    PROLOGUE
    wgmma.fence.sync.aligned;
    BODY
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
SKIP:
    ld.param.u64 %rd4, [pd];            // each thread stores its D
    mul.wide.u32 %rd5, %r0, 16;
    add.u64 %rd4, %rd4, %rd5;
    st.global.v4.b32 [%rd4], {%d0, %d1, %d2, %d3};
    ret;
}
"""
INTERLEAVE = (8 << 16) | (16 << 32)               # LBO 128, SBO 256, no swizzle


def kernel(prologue="", body=MMA, fence=True, wait="wgmma.wait_group.sync.aligned 0;"):
    text = KERNEL.replace("PROLOGUE", prologue).replace("BODY", body)
    if not fence:
        text = text.replace("    wgmma.fence.sync.aligned;\n", "")
    return text.replace("wgmma.wait_group.sync.aligned 0;", wait)


def run(mem, text, threads=128, desc=INTERLEAVE):
    out = Buf(mem, n=4 * threads, dtype=np.uint32)
    launch(load_ptx(text), "k", 1, threads, out, desc, mem=mem)
    return out.read()


def assert_faults(mem, text, *words, threads=128, desc=INTERLEAVE, code="CUDA_ERROR_ILLEGAL_INSTRUCTION"):
    with pytest.raises(KernelFault) as e:
        run(mem, text, threads, desc)
    assert e.value.code_name == code
    for w in words:
        assert w in e.value.message, e.value.message
    return e.value.message


def test_the_rules_kept_it_runs(mem):
    """The baseline every fault below changes one thing of: A = 0, so D = 0."""
    assert not ptxas_refusal(kernel(), "sm_90a")
    np.testing.assert_array_equal(run(mem, kernel()), 0)


@pytest.mark.parametrize("name, change, words", [
    ("read before the wait", {"wait": "mov.b32 %r2, %d1;"}, ["%d1", "pending", "wgmma.mma_async at PTX line"]),
    ("wait_group 1 leaves the group pending", {"wait": "wgmma.wait_group.sync.aligned 1;"}, ["%d0", "pending"]),
    ("written before the wait", {"wait": "mov.b32 %d2, 7;\n    wgmma.wait_group.sync.aligned 0;"},
     ["%d2", "pending"]),
    ("A overwritten before the wait", {"wait": "mov.b32 %a1, 7;\n    wgmma.wait_group.sync.aligned 0;"},
     ["%a1", "pending"]),
    ("no commit: the wait does not cover it", {"body": MMA + "\n    wgmma.wait_group.sync.aligned 0;\n"
                                                      "    st.shared.b32 [sb], %d3;"}, ["%d3", "pending"]),
    ("no wgmma.fence at all", {"fence": False}, ["wgmma.fence", "%d0"]),
    ("a register written after the fence", {"body": "mov.b32 %d3, 1;\n    " + MMA}, ["wgmma.fence", "%d3"]),
    ("A read after the fence", {"body": "mov.b32 %r3, %a2;\n    " + MMA}, ["wgmma.fence", "%a2"]),
    ("a pending accumulator chained into another shape",
     {"body": MMA + "\n    wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%d0, %d1}, {%a0, %a1, %a2, %a3}, "
                    "%rd3, 1, 1, 1, 0;"}, ["%d0", "pending"]),
])
def test_undefined_register_use_faults(mem, name, change, words):
    text = kernel(**change)
    assert not ptxas_refusal(text, "sm_90a")          # valid PTX: undefined only when it runs
    message = assert_faults(mem, text, *words)
    assert message.startswith("k: ") and "PTX line" in message
    line = text.splitlines().index("    " + MMA) + 1
    if "pending" in words:                      # names the mma_async that holds the register
        assert f"mma_async at PTX line {line} " in message


def test_chained_accumulation_of_one_shape_runs(mem):
    """Two mma_asyncs on one pending accumulator, same shape: ordered by the ISA itself."""
    np.testing.assert_array_equal(run(mem, kernel(body=MMA + "\n    " + MMA)), 0)


@pytest.mark.parametrize("name, threads, prologue", [
    ("three warps in the block", 96, ""),
    ("the fourth warp branches around it", 128, "setp.ge.u32 %p1, %r0, 96;\n    @%p1 bra SKIP;"),
    ("warps 1-4 of a 160-thread block", 160, "setp.lt.u32 %p1, %r0, 32;\n    @%p1 bra SKIP;"),
    ("one lane left", 128, "setp.eq.u32 %p1, %r0, 77;\n    @%p1 bra SKIP;"),
])
def test_warpgroup_collective(mem, name, threads, prologue):
    message = assert_faults(mem, kernel(prologue=prologue), "warpgroup-collective", threads=threads)
    assert "wgmma.fence" in message       # the first wgmma instruction on the path faults


def test_predicated_mma_of_part_of_a_warpgroup_faults(mem):
    body = "setp.lt.u32 %p2, %r0, 64;\n    @%p2 " + MMA
    assert_faults(mem, kernel(body=body), "warpgroup-collective", "mma_async")


def test_two_warpgroups_may_skip_independently(mem):
    """Warpgroup 1 of a 256-thread block skips the wgmma: warpgroup 0 alone is whole."""
    prologue = "setp.ge.u32 %p1, %r0, 128;\n    @%p1 bra SKIP;"
    got = run(mem, kernel(prologue=prologue), threads=256)
    np.testing.assert_array_equal(got[:512], 0)


@pytest.mark.parametrize("name, desc, code, words", [
    ("past the shared window", INTERLEAVE + (4000 << 16), "CUDA_ERROR_ILLEGAL_ADDRESS", ["shared window"]),
    ("128B swizzle with a base offset for an aligned start", (1 << 62) | (64 << 32) | (3 << 49),
     "CUDA_ERROR_ILLEGAL_INSTRUCTION", ["base offset is 3"]),
    ("128B swizzle, start 128 bytes in, no base offset", (1 << 62) | (64 << 32) | 8,
     "CUDA_ERROR_ILLEGAL_INSTRUCTION", ["needs 1"]),
])
def test_bad_descriptors_fault(mem, name, desc, code, words):
    assert_faults(mem, kernel(), "B", *words, desc=desc, code=code)


def test_base_offset_of_an_unaligned_start_runs(mem):
    np.testing.assert_array_equal(run(mem, kernel(), desc=(1 << 62) | (64 << 32) | 8 | (1 << 49)), 0)


def test_descriptor_differing_between_lanes_faults(mem):
    body = "setp.eq.u32 %p2, %r0, 5;\n    selp.b64 %rd6, 16, 0, %p2;\n    add.u64 %rd3, %rd3, %rd6;\n    " + MMA
    assert_faults(mem, kernel(body=body), "differs between the lanes")


REFUSED = [
    ("wgmma.mma_async.sync.aligned.m64n8k256.s32.b1.b1.xor.popc {%d0, %d1, %d2, %d3}, %rd3, %rd3, 1;", "b1"),
    ("wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%d0, %d1, %d2, %d3}, %rd3, %rd3, 1, 1, 1, 0, 0;",
     "imm-scale-b"),
    ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %d0, %d1, %d2, "
     "%d3, %a0, %a1, %a2, %a3, %r0, %r1, %r2, %r3}, %rd3, %rd3, 1;", "illegal shape"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %rd3, %rd3, 1, 2, 1, 0, 0;",
     "imm-scale-a"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16 {%d0, %d1}, %rd3, %rd3, 1, 1, 1, 0, 0;", "types"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, %rd3, "
     "1, 1, 1, 0, 0;", "imm-trans-b"),
    ("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.u8 {%d0, %d1, %d2, %d3}, %rd3, %rd3, 1;", "8.4"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%d0, %d1, %d2, %d3}, %r1, %rd3, 1, 1, 1, 0, 0;",
     "64-bit register"),
    ("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8 {%d0, %d1, %d2}, %rd3, %rd3, 1;", "vector of 4"),
    ("wgmma.wait_group.sync.aligned %r1;", "integer constant"),
]


@pytest.mark.parametrize("body, match", REFUSED, ids=[m for _, m in REFUSED])
def test_refused_as_ptxas_refuses(body, match):
    text = kernel(body=body)
    with pytest.raises(PtxError, match=match):
        load_ptx(text)
    assert ptxas_refusal(text, "sm_90a") != "", "ptxas assembles it"


def test_sm_90_without_a_is_refused():
    """ptxas: "Instruction 'wgmma.fence' not supported on .target 'sm_90'"."""
    text = kernel().replace(".target sm_90a", ".target sm_90")
    with pytest.raises(PtxError, match="sm_90a"):
        load_ptx(text)
    assert ptxas_refusal(text, "sm_90") != "", "ptxas assembles it"


def test_racecheck_sees_the_shared_reads_of_wgmma(mem):
    """B written by every thread and read by the wgmma with no bar.sync between: a race
    (read-after-write) for LOWLEVEL_EMU_RACECHECK; with the barrier, none."""
    from lowlevel.emu.tools.racecheck import RaceCheck
    out = Buf(mem, n=4 * 128, dtype=np.uint32)
    for text, races in ((kernel(), False), (kernel().replace("    bar.sync 0;\n", ""), True)):
        stats = launch(load_ptx(text), "k", 1, 128, out, INTERLEAVE, mem=mem, tools=[RaceCheck()])
        assert bool(stats.races) == races, stats.races


def test_wait_group_1_completes_all_but_the_newest_group(mem):
    """Two groups on two accumulators; wait_group 1: the first is complete (its registers
    may be read), the second still pending (reading it faults), as in a pipelined loop."""
    second = MMA.replace("{%d0, %d1, %d2, %d3}", "{%e0, %e1, %e2, %e3}")
    prologue = ".reg .b32 %e<4>;\n    " + "\n    ".join(f"mov.b32 %e{i}, 0;" for i in range(4))
    body = MMA + "\n    wgmma.commit_group.sync.aligned;\n    " + second
    wait = "wgmma.wait_group.sync.aligned 1;\n    mov.b32 %r2, %d0;"
    text = kernel(prologue=prologue, body=body, wait=wait)
    assert not ptxas_refusal(text, "sm_90a")
    np.testing.assert_array_equal(run(mem, text), 0)
    late = kernel(prologue=prologue, body=body, wait=wait + "\n    mov.b32 %r3, %e2;")
    assert_faults(mem, late, "%e2", "pending")


def test_shared_operand_written_before_the_wait_faults(mem):
    """The GPU may read B any time until the wait: a store to it in between makes the
    product undefined, so the wait that completes the group faults (the emulator read B
    when the mma_async issued)."""
    text = kernel(wait="st.shared.b32 [%r2], %r0;\n    wgmma.wait_group.sync.aligned 0;")
    assert not ptxas_refusal(text, "sm_90a")
    assert_faults(mem, text, "shared memory", "written before a wgmma.wait_group", "wgmma.wait_group")
    # after the wait the bytes are free again
    text = kernel(wait="wgmma.wait_group.sync.aligned 0;\n    st.shared.b32 [%r2], %r0;")
    np.testing.assert_array_equal(run(mem, text), 0)

"""The emulated GPU's cluster instructions, driven through the engine: generic mapa into
another CTA's shared memory, and the faults a GPU would hang or misbehave on (a rank the
cluster does not have, a wait without an arrive, mapa of a non-shared address)."""
import numpy as np
import pytest
from helpers.emu_engine import Buf, pack_params

from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.engine.scheduler import run_kernel

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _kernel(body: str) -> str:
    return HEADER + (".visible .entry k(.param .u64 out_p)\n{\n"
                     "  .reg .pred %p<4>;\n  .reg .b32 %r<16>;\n  .reg .b64 %rd<12>;\n"
                     "  .shared .align 8 .u64 slot[32];\n"
                     "  ld.param.u64 %rd1, [out_p];\n  mov.u32 %r1, %tid.x;\n"
                     "  mov.u32 %r2, %cluster_ctarank;\n  mov.u32 %r3, %ctaid.x;\n"
                     f"{body}\n  ret;\n}}\n")


def _run(mem, body, grid, cluster, out):
    mod = load_ptx(_kernel(body))
    params = pack_params(mod.kernels["k"], [out])
    run_kernel(mod, "k", grid, (32, 1, 1), params, mem, cluster=cluster)


GENERIC = """
  cvta.shared.u64 %rd2, slot;
  mul.wide.u32 %rd3, %r1, 8;
  add.u64 %rd4, %rd2, %rd3;
  cvt.u64.u32 %rd5, %r3;
  st.u64 [%rd4], %rd5;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  add.u32 %r4, %r2, 1;
  rem.u32 %r4, %r4, 4;
  mapa.u64 %rd6, %rd4, %r4;
  ld.u64 %rd7, [%rd6];
  mov.u32 %r5, %ntid.x;
  mad.lo.u32 %r6, %r3, %r5, %r1;
  mul.wide.u32 %rd8, %r6, 8;
  add.u64 %rd9, %rd1, %rd8;
  st.global.u64 [%rd9], %rd7;
  barrier.cluster.arrive;
  barrier.cluster.wait;
"""


def test_generic_mapa_reads_the_next_ctas_shared_memory(mem):
    out = Buf(mem, n=8 * 32, dtype=np.uint64)
    _run(mem, GENERIC, (8, 1, 1), (4, 1, 1), out)
    cta = np.arange(8)
    peer = cta // 4 * 4 + (cta % 4 + 1) % 4
    np.testing.assert_array_equal(out.read().reshape(8, 32), np.repeat(peer[:, None], 32, 1))


@pytest.mark.parametrize("body, code, words", [
    ("  mov.u32 %r4, 2;\n  mapa.shared::cluster.u32 %r5, 0, %r4;\n  ld.shared::cluster.u32 %r6, [%r5];",
     "CUDA_ERROR_ILLEGAL_ADDRESS", "names CTA rank 2, the cluster has 2"),
    ("  barrier.cluster.wait;", "CUDA_ERROR_LAUNCH_FAILED", "waits without having arrived"),
    ("  barrier.cluster.arrive;\n  barrier.cluster.arrive;", "CUDA_ERROR_LAUNCH_FAILED", "arrives a second time"),
    ("  mapa.u64 %rd6, %rd1, 0;", "CUDA_ERROR_ILLEGAL_ADDRESS", "outside shared memory"),
])
def test_what_a_gpu_would_hang_on_is_a_fault(mem, body, code, words):
    out = Buf(mem, n=64, dtype=np.uint64)
    with pytest.raises(KernelFault) as fault:
        _run(mem, body, (4, 1, 1), (2, 1, 1), out)
    assert fault.value.code_name == code and words in str(fault.value)


def test_a_cluster_barrier_waits_for_every_cta_of_the_cluster(mem):
    """CTA rank 1 writes its slot only after a divergent loop; rank 0 reads it after the
    barrier: the barrier must hold rank 0 until rank 1 has arrived."""
    body = """
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra WAIT;
  mov.u32 %r7, 0;
SPIN:
  add.u32 %r7, %r7, 1;
  setp.lt.u32 %p1, %r7, %r1;
  @%p1 bra SPIN;
  mul.wide.u32 %rd2, %r1, 8;
  cvt.u64.u32 %rd3, %r7;
  mov.u32 %r8, slot;
  cvt.u64.u32 %rd4, %r8;
  add.u64 %rd5, %rd4, %rd2;
  cvt.u32.u64 %r9, %rd5;
  st.shared.u64 [%r9], %rd3;
WAIT:
  barrier.cluster.arrive;
  barrier.cluster.wait;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra END;
  mov.u32 %r8, slot;
  mul.lo.u32 %r10, %r1, 8;
  add.u32 %r8, %r8, %r10;
  mapa.shared::cluster.u32 %r9, %r8, 1;
  ld.shared::cluster.u64 %rd6, [%r9];
  mul.wide.u32 %rd7, %r3, 256;
  add.u64 %rd8, %rd1, %rd7;
  mul.wide.u32 %rd9, %r1, 8;
  add.u64 %rd10, %rd8, %rd9;
  st.global.u64 [%rd10], %rd6;
END:
"""
    out = Buf(mem, n=4 * 32, dtype=np.uint64)
    _run(mem, body, (4, 1, 1), (2, 1, 1), out)
    got = out.read().reshape(4, 32)
    spins = np.maximum(np.arange(32), 1)
    np.testing.assert_array_equal(got[[0, 2]], np.stack([spins, spins]))


def test_the_shared_memory_of_an_exited_cta_is_gone(mem):
    """Rank 0 exits at once; rank 1 then reads rank 0's shared memory (no cluster barrier
    keeps it): a fault, not the stale bytes."""
    body = """
  barrier.cluster.arrive;
  barrier.cluster.wait;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 exit;
  mov.u32 %r8, slot;
  mapa.shared::cluster.u32 %r9, %r8, 0;
  ld.shared::cluster.u64 %rd6, [%r9];
  st.global.u64 [%rd1], %rd6;
"""
    out = Buf(mem, n=4, dtype=np.uint64)
    with pytest.raises(KernelFault) as fault:
        _run(mem, body, (2, 1, 1), (2, 1, 1), out)
    assert fault.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS" and "have all exited" in str(fault.value)


WHERE = """
  rem.u32 %r4, %r1, 4;                       // the target rank: tid % 4
  mov.u32 %r5, slot;
  mapa.shared::cluster.u32 %r6, %r5, %r4;    // rank r4's slot, a shared::cluster address
  cvt.u64.u32 %rd2, %r6;
  cvta.shared::cluster.u64 %rd3, %rd2;       // its generic address
  cvta.to.shared::cluster.u64 %rd4, %rd3;
  cvt.u32.u64 %r7, %rd4;                     // back again: equals %r6
  getctarank.u64 %r8, %rd3;
  getctarank.shared::cluster.u32 %r9, %r6;
  getctarank.shared::cluster.u32 %r10, slot;
  isspacep.shared::cluster %p1, %rd3;
  isspacep.shared::cta %p2, %rd3;
  cvta.shared.u64 %rd5, slot;
  isspacep.shared %p3, %rd5;
  selp.u32 %r11, 1, 0, %p1;
  selp.u32 %r12, 2, 0, %p2;
  or.b32 %r11, %r11, %r12;
  selp.u32 %r12, 4, 0, %p3;
  or.b32 %r11, %r11, %r12;
  setp.eq.u32 %p1, %r7, %r6;
  selp.u32 %r12, 8, 0, %p1;
  or.b32 %r11, %r11, %r12;
  mov.u32 %r5, %ntid.x;
  mad.lo.u32 %r12, %r3, %r5, %r1;
  mul.wide.u32 %rd6, %r12, 16;
  add.u64 %rd7, %rd1, %rd6;
  st.global.v4.u32 [%rd7], {%r8, %r9, %r10, %r11};
  barrier.cluster.arrive;
  barrier.cluster.wait;
"""


def test_getctarank_and_the_cluster_windows(mem):
    """getctarank of generic and shared::cluster addresses and of a variable; cvta to and
    from .shared::cluster; isspacep.shared::cluster true for every CTA of the cluster,
    .shared::cta (and plain .shared) only for the executing CTA's shared memory."""
    from helpers.ptxas import assemble_sm90
    assemble_sm90(_kernel(WHERE))
    out = Buf(mem, n=8 * 32 * 2, dtype=np.uint64)
    _run(mem, WHERE, (8, 1, 1), (4, 1, 1), out)
    got = out.read().view(np.uint32).reshape(8, 32, 4)
    target = np.tile(np.arange(32) % 4, (8, 1))
    own = np.repeat(np.arange(8)[:, None] % 4, 32, 1)
    np.testing.assert_array_equal(got[..., 0], target)
    np.testing.assert_array_equal(got[..., 1], target)
    np.testing.assert_array_equal(got[..., 2], own)
    np.testing.assert_array_equal(got[..., 3], 1 | np.where(target == own, 2, 0) | 4 | 8)


def test_getctarank_of_a_global_address_faults(mem):
    out = Buf(mem, n=64, dtype=np.uint64)
    with pytest.raises(KernelFault, match="getctarank of a generic address outside shared memory"):
        _run(mem, "  getctarank.u64 %r8, %rd1;", (2, 1, 1), (2, 1, 1), out)


def test_mapa_of_a_variable_name(mem):
    """mapa.shared::cluster and generic mapa of `slot` itself reach the peer's slot."""
    body = """
  mul.wide.u32 %rd2, %r1, 8;
  cvt.u64.u32 %rd3, %r3;
  mov.u32 %r4, slot;
  cvt.u64.u32 %rd4, %r4;
  add.u64 %rd4, %rd4, %rd2;
  cvt.u32.u64 %r4, %rd4;
  st.shared.u64 [%r4], %rd3;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  xor.b32 %r5, %r2, 1;
  mapa.shared::cluster.u32 %r6, slot, %r5;
  ld.shared::cluster.u64 %rd5, [%r6];
  mapa.u64 %rd6, slot, %r5;
  ld.u64 %rd7, [%rd6+8];
  add.u64 %rd5, %rd5, %rd7;
  mul.wide.u32 %rd8, %r3, 8;
  add.u64 %rd9, %rd1, %rd8;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 st.global.u64 [%rd9], %rd5;
  barrier.cluster.arrive;
  barrier.cluster.wait;
"""
    from helpers.ptxas import assemble_sm90
    assemble_sm90(_kernel(body))
    out = Buf(mem, n=4, dtype=np.uint64)
    _run(mem, body, (4, 1, 1), (2, 1, 1), out)
    np.testing.assert_array_equal(out.read(), 2 * (np.arange(4) ^ 1))

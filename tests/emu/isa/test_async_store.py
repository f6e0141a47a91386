"""st.async and red.async (sm_90, PTX 8.1): each thread of a CTA stores into its cluster
peer's shared memory and adds into the peer's counter, completing on the peer's mbarrier;
the peer waits on its own barrier, then reads what arrived. Assembled by ptxas for sm_90,
against numpy, on poisoned outputs; the values land only once the wait sees the phase over
(checked on the emulated GPU, where a read before the wait sees the old contents)."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

BLOCK = 64
PTX = r"""
.version 8.1
.target sm_90
.address_size 64
.visible .entry relay(.param .u64 in_p, .param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<12>;
    .shared .align 8 .b64 bar;
    .shared .align 8 .b32 counter;
    .shared .align 16 .b32 buf[128];
    ld.param.u64 %rd1, [in_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %ctaid.x;
    xor.b32 %r4, %r2, 1;
    mov.u32 %r5, bar;
    mov.u32 %r6, counter;
    mov.u32 %r7, buf;
    shl.b32 %r8, %r1, 3;
    add.u32 %r9, %r7, %r8;                      // &buf[2 tid]
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    @%p1 st.shared.u32 [%r6], 1000;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], TXBYTES;
    mad.lo.u32 %r10, %r3, 64, %r1;
    mul.wide.u32 %rd3, %r10, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.u32 %r11, [%rd4];                 // this thread's value
    xor.b32 %r12, %r11, 1;
    mapa.shared::cluster.u32 %r13, %r9, %r4;    // the peer's buf[2 tid]
    mapa.shared::cluster.u32 %r14, %r6, %r4;    // the peer's counter
    mapa.shared::cluster.u32 %r15, %r5, %r4;    // the peer's barrier
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%r13], {%r11, %r12}, [%r15];
    red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r14], %r11, [%r15];
    ld.shared.u32 %r16, [%r6];                  // before the wait
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
    ld.shared.v2.u32 {%r17, %r18}, [%r9];
    ld.shared.u32 %r19, [%r6];
    mul.wide.u32 %rd5, %r10, 16;
    add.u64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r17, %r18, %r19, %r16};
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    ret;
}
"""


def _function(tx=BLOCK * 12):
    text = PTX.replace("TXBYTES", str(tx))
    assemble_sm90(text)
    return cuda.Module.from_ptx(text).get_function("relay")


def test_peers_store_and_add_into_each_other(driver, rng):
    grid = 4
    x = rng.integers(0, 2**32, grid * BLOCK, dtype=np.uint32)
    out = device_poisoned(grid * BLOCK * 16)
    _function().launch(grid, BLOCK, (upload(x), out), cluster=(2, 1, 1))
    got = download(out, (grid, BLOCK, 4), np.uint32)
    peer = x.reshape(grid, BLOCK)[np.arange(grid) ^ 1]
    np.testing.assert_array_equal(got[..., 0], peer)
    np.testing.assert_array_equal(got[..., 1], peer ^ np.uint32(1))
    sums = (peer.astype(np.uint64).sum(axis=1) + 1000) % 2**32
    np.testing.assert_array_equal(got[..., 2], np.repeat(sums[:, None], BLOCK, 1))
    if driver.kind == "emu":                   # a GPU may or may not have added some already
        np.testing.assert_array_equal(got[..., 3], 1000)


def test_more_bytes_expected_than_stored_is_a_deadlock(driver, rng):
    if driver.kind != "emu":
        pytest.skip("a GPU hangs on it")
    x = rng.integers(0, 2**32, 2 * BLOCK, dtype=np.uint32)
    _function(tx=BLOCK * 12 + 4).launch(2, BLOCK, (upload(x), device_poisoned(2 * BLOCK * 16)),
                                        cluster=(2, 1, 1))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_LAUNCH_FAILED"


def test_a_misaligned_async_store_faults(mem):
    """An 8-byte st.async at a 4-byte aligned address."""
    from helpers.emu_engine import Buf, pack_params
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.engine.faults import KernelFault
    from lowlevel.emu.engine.scheduler import run_kernel
    text = PTX.replace("TXBYTES", str(BLOCK * 12)).replace("[%r13], {%r11", "[%r13+4], {%r11")
    assemble_sm90(text)
    mod = load_ptx(text)
    params = pack_params(mod.kernels["relay"], [Buf(mem, n=2 * BLOCK, dtype=np.uint32),
                                                Buf(mem, n=2 * BLOCK * 4, dtype=np.uint32)])
    with pytest.raises(KernelFault, match="misaligned 8-byte shared") as fault:
        run_kernel(mod, "relay", (2, 1, 1), (BLOCK, 1, 1), params, mem, cluster=(2, 1, 1))
    assert fault.value.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS"

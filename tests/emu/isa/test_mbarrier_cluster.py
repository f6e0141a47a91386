"""mbarrier across the CTAs of a cluster (sm_90): CTA rank 0 writes into rank 1's shared
memory through distributed shared memory (st.shared::cluster) and arrives on rank 1's
barrier (mbarrier.arrive.release.cluster.shared::cluster); rank 1 waits with
.acquire.cluster and reads what rank 0 wrote. The tx-count is held open by a remote
expect_tx and closed by a remote complete_tx, so the phase completes only when both the
arrivals and the transaction bytes are in, as the PTX ISA says.

Every kernel is assembled by ptxas for sm_90 first (the cluster forms are sm_90-only); the
reference is numpy, the outputs are poisoned, the inputs random.
"""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

BLOCK = 64
# Rank 1's code (the waiter) comes first, so under lowest-PC-first scheduling its failed
# waits must yield to rank 0 for the kernel to finish.
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry relay(.param .u64 in_p, .param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 8 .b64 bar;
    .shared .align 16 .b32 buf[64];
    ld.param.u64 %rd1, [in_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %clusterid.x;
    mad.lo.u32 %r4, %r3, 64, %r1;              // element of this cluster's slice
    mul.wide.u32 %rd3, %r4, 4;
    mov.u32 %r5, bar;
    mov.u32 %r6, buf;
    shl.b32 %r7, %r1, 2;
    add.u32 %r8, %r6, %r7;                     // &buf[tid]
    setp.eq.u32 %p1, %r1, 0;
    setp.eq.u32 %p2, %r2, 1;
    and.pred %p3, %p1, %p2;
    @%p3 mbarrier.init.shared::cta.b64 [%r5], ARRIVALS;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @!%p2 bra PRODUCE;
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p1, [%r5], 0;
    @!%p1 bra WAIT;
    ld.shared.u32 %r9, [%r8];
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r9;
    bra DONE;
PRODUCE:
    mapa.shared::cluster.u32 %r10, %r5, 1;     // rank 1's barrier
    mapa.shared::cluster.u32 %r11, %r8, 1;     // rank 1's buf[tid]
    @%p1 mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64 [%r10], 256;
    add.u64 %rd5, %rd1, %rd3;
    ld.global.u32 %r12, [%rd5];
    mul.lo.u32 %r12, %r12, 3;
    st.shared::cluster.u32 [%r11], %r12;
    ARRIVE
    setp.eq.u32 %p1, %r1, 1;
    @%p1 mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%r10], 256;
DONE:
    ret;
}
"""
ARRIVE = "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r10];"
DROP = "mbarrier.arrive_drop.release.cluster.shared::cluster.b64 _, [%r10];"


def _kernel(arrivals=BLOCK, arrive=ARRIVE):
    text = PTX.replace("ARRIVALS", str(arrivals)).replace("ARRIVE\n", arrive + "\n")
    assemble_sm90(text)
    return cuda.Module.from_ptx(text).get_function("relay")


@pytest.mark.parametrize("arrive", [ARRIVE, DROP], ids=["arrive", "arrive_drop"])
def test_rank_0_arrives_on_rank_1s_barrier_and_rank_1_reads_its_data(driver, rng, arrive):
    clusters = 2
    x = rng.integers(0, 2**30, clusters * BLOCK, dtype=np.uint32)
    out = device_poisoned(x.nbytes)
    _kernel(arrive=arrive).launch(2 * clusters, BLOCK, (upload(x), out), cluster=(2, 1, 1))
    np.testing.assert_array_equal(download(out, x.shape, np.uint32), x * np.uint32(3))


def test_a_remote_barrier_that_never_completes_is_a_deadlock(driver, rng):
    """Rank 1's barrier expects one arrival more than rank 0's threads give: its waiters
    can never go on, which a GPU hangs on; here the launch fails at once."""
    if driver.kind != "emu":
        pytest.skip("a GPU hangs on it")
    x = rng.integers(0, 2**30, BLOCK, dtype=np.uint32)
    f = _kernel(arrivals=BLOCK + 1)
    f.launch(2, BLOCK, (upload(x), device_poisoned(x.nbytes)), cluster=(2, 1, 1))
    with pytest.raises(cuda.CudaError) as failed:
        cuda.synchronize()
    assert failed.value.name == "CUDA_ERROR_LAUNCH_FAILED"


def test_the_engine_names_the_deadlocked_wait(mem):
    from helpers.emu_engine import Buf, pack_params
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.engine.faults import KernelFault
    from lowlevel.emu.engine.scheduler import run_kernel
    mod = load_ptx(PTX.replace("ARRIVALS", str(BLOCK + 1)).replace("ARRIVE\n", ARRIVE + "\n"))
    params = pack_params(mod.kernels["relay"], [Buf(mem, n=BLOCK, dtype=np.uint32)] * 2)
    with pytest.raises(KernelFault, match="mbarrier deadlock"):
        run_kernel(mod, "relay", (2, 1, 1), (BLOCK, 1, 1), params, mem, cluster=(2, 1, 1))


@pytest.mark.parametrize("line, message", [
    ("mbarrier.arrive.release.cluster.shared::cluster.b64 %rd9, [%r10];", "sink"),
    ("mbarrier.init.shared::cluster.b64 [%r10], 1;", "shared::cluster"),
    ("mbarrier.try_wait.parity.acquire.cluster.shared::cluster.b64 %p1, [%r10], 0;", "shared::cluster"),
])
def test_forms_ptxas_refuses_are_refused(line, message):
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    text = PTX.replace("ARRIVALS", "64").replace("ARRIVE\n", line + "\n")
    with pytest.raises(PtxError, match=message):
        load_ptx(text)


CLUSTER_CU = r"""
#include <cuda/ptx>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
namespace ptx = cuda::ptx;
// rank 0 writes into rank 1's buf through DSMEM and arrives on rank 1's barrier
// (cuda::ptx's wrappers of the .shared::cluster forms); rank 1 waits with cluster scope
extern "C" __global__ void __cluster_dims__(2, 1, 1) relay(const int* in, int* out) {
    __shared__ uint64_t bar;
    __shared__ int buf[64];
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    if (threadIdx.x == 0 && rank == 1) ptx::mbarrier_init(&bar, blockDim.x);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    cluster.sync();
    unsigned slice = blockIdx.x / 2 * 64 + threadIdx.x;
    if (rank == 0) {
        int* peer_buf = cluster.map_shared_rank(buf, 1);
        uint64_t* peer_bar = cluster.map_shared_rank(&bar, 1);
        peer_buf[threadIdx.x] = in[slice] * 5;
        ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cluster, ptx::space_cluster, peer_bar);
    } else {
        while (!ptx::mbarrier_try_wait_parity(ptx::sem_acquire, ptx::scope_cluster, &bar, 0)) {}
        out[slice] = buf[threadIdx.x];
    }
}
"""


def test_cuda_ptx_remote_arrive_from_cuda_c(driver, rng):
    from cuda.pathfinder import find_nvidia_header_directory
    from helpers.cuda_c import nvrtc_ptx
    if find_nvidia_header_directory("cccl") is None:
        pytest.skip("the CCCL headers (cuda/ptx) are not installed")
    ptx = nvrtc_ptx(CLUSTER_CU, arch="compute_90")          # NVRTC searches CCCL by default
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in ptx
    x = rng.integers(-2**20, 2**20, 2 * 64).astype(np.int32)
    out = device_poisoned(x.nbytes)
    cuda.Module.from_ptx(ptx).get_function("relay").launch(4, 64, (upload(x), out))
    np.testing.assert_array_equal(download(out, x.shape, np.int32), x * 5)

"""cp.async.bulk (sm_90, the TMA-less bulk copy that cuda::memcpy_async and CUTLASS emit on
Hopper) completed through an mbarrier's tx-count, in clusters of 2: from global memory into
the peer CTA's shared memory, multicast into both CTAs, and from a CTA's own shared memory
into its peer's. Each CTA's thread 0 announces the bytes (arrive.expect_tx), every thread
waits on its own barrier and then reads what the copy brought.

Kernels are assembled by ptxas for sm_90; the reference is numpy slicing of the random
input; outputs are poisoned. The bytes land only once a wait sees the phase over, so a
read before the wait sees the old contents (an engine-level check: on a GPU it is a race).
"""
import re

import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

BLOCK = 64                    # threads per CTA; each copies 64 u32 = 256 bytes
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry bulk(.param .u64 in_p, .param .u64 out_p)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<16>;
    .reg .b16 %rs<2>;
    .shared .align 8 .b64 bar;
    .shared .align 128 .b8 buf[256];
    .shared .align 128 .b8 stage[256];
    ld.param.u64 %rd1, [in_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %ctaid.x;
    xor.b32 %r4, %r2, 1;                       // the peer's rank
    mov.u32 %r5, bar;
    mov.u32 %r6, buf;
    mov.u32 %r7, stage;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r6, %r8;                     // &buf[tid]
    mad.lo.u32 %r11, %r3, 64, %r1;
    mul.wide.u32 %rd3, %r11, 4;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], 256;
ISSUE
    ld.shared.u32 %r17, [%r9];                 // before the wait: not there yet
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
    ld.shared.u32 %r10, [%r9];
    add.u64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r10;
    add.u64 %rd9, %rd4, 1024;                  // a second output after the grid's 4 x 64
    st.global.u32 [%rd9], %r17;
    barrier.cluster.arrive.release.aligned;    // no CTA exits while its peer may copy in
    barrier.cluster.wait.acquire.aligned;
    ret;
}
"""
ISSUE = {
    # each CTA copies its peer's slice of the input into the peer's buf, on the peer's barrier
    "global to peer": """
    mapa.shared::cluster.u32 %r12, %r6, %r4;
    mapa.shared::cluster.u32 %r13, %r5, %r4;
    xor.b32 %r14, %r3, 1;
    mul.wide.u32 %rd5, %r14, 256;
    add.u64 %rd6, %rd1, %rd5;
    @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r12], [%rd6], SIZE, [%r13];""",
    # PTX 8.6: each CTA copies its own slice into its own buf (a .shared::cta destination),
    # after an L2 prefetch of it
    "global to own (PTX 8.6)": """
    mul.wide.u32 %rd5, %r3, 256;
    add.u64 %rd6, %rd1, %rd5;
    @%p1 cp.async.bulk.prefetch.L2.global [%rd6], SIZE;
    @%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r6], [%rd6], SIZE, [%r5];""",
    # rank 0 copies its slice into both CTAs of the cluster
    "multicast": """
    setp.eq.u32 %p3, %r2, 0;
    and.pred %p3, %p3, %p1;
    mul.wide.u32 %rd5, %r3, 256;
    add.u64 %rd6, %rd1, %rd5;
    mov.u16 %rs1, 3;
    @%p3 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r6], [%rd6], SIZE, [%r5], %rs1;""",
    # each CTA stages its own slice in shared memory and copies it into the peer's buf
    "shared to peer": """
    add.u64 %rd7, %rd1, %rd3;
    ld.global.u32 %r15, [%rd7];
    add.u32 %r16, %r7, %r8;
    st.shared.u32 [%r16], %r15;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    mapa.shared::cluster.u32 %r12, %r6, %r4;
    mapa.shared::cluster.u32 %r13, %r5, %r4;
    @%p1 cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r12], [%r7], SIZE, [%r13];""",
}
GRID = 4


def _text(variant, size="256", src_offset=""):
    issue = ISSUE[variant].replace("SIZE", size)
    if src_offset:
        issue = issue.replace("[%rd6]", f"[%rd6+{src_offset}]")
    text = PTX.replace("ISSUE", issue)
    return text.replace(".version 8.0", ".version 8.6") if "8.6" in variant else text


def _expected(x, variant):
    tiles = x.reshape(GRID, BLOCK)
    if variant == "multicast":
        return np.repeat(tiles[::2], 2, axis=0).reshape(-1)
    if variant == "shared to peer":
        return tiles[np.arange(GRID) ^ 1].reshape(-1)
    return x


@pytest.mark.parametrize("variant", sorted(ISSUE))
def test_bulk_copies_complete_on_the_barrier(driver, rng, variant):
    text = _text(variant)
    assemble_sm90(text)
    x = rng.integers(0, 2**32, GRID * BLOCK, dtype=np.uint32)
    out = device_poisoned(2 * x.nbytes)
    cuda.Module.from_ptx(text).get_function("bulk").launch(GRID, BLOCK, (upload(x), out),
                                                            cluster=(2, 1, 1))
    got = download(out, (2, x.size), np.uint32)
    np.testing.assert_array_equal(got[0], _expected(x, variant))


def _engine_run(mem, text, x):
    from helpers.emu_engine import Buf, pack_params
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.engine.scheduler import run_kernel
    mod = load_ptx(text)
    out = Buf(mem, n=2 * x.size, dtype=np.uint32)
    params = pack_params(mod.kernels["bulk"], [Buf(mem, x), out])
    run_kernel(mod, "bulk", (GRID, 1, 1), (BLOCK, 1, 1), params, mem, cluster=(2, 1, 1))
    return out.read().reshape(2, x.size)


def test_the_bytes_land_only_when_a_wait_sees_the_phase_over(mem, rng):
    x = rng.integers(0, 2**32, GRID * BLOCK, dtype=np.uint32)
    got = _engine_run(mem, _text("global to peer"), x)
    np.testing.assert_array_equal(got[0], x)
    np.testing.assert_array_equal(got[1], np.uint32(0xFFFFFFFF))   # fresh shared memory


@pytest.mark.parametrize("size, src_offset, code, words", [
    ("%r1", "", "CUDA_ERROR_LAUNCH_FAILED", "size 0, not a positive multiple of 16"),
    ("", "8", "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned cp.async.bulk source"),
    ("1024", "", "CUDA_ERROR_ILLEGAL_ADDRESS", "out-of-bounds 16-byte shared store"),
    ("", "768", "CUDA_ERROR_ILLEGAL_ADDRESS", "out-of-bounds 256-byte cp.async.bulk global read"),
])
def test_bad_copies_fault(mem, rng, size, src_offset, code, words):
    from lowlevel.emu.engine.faults import KernelFault
    x = rng.integers(0, 2**32, GRID * BLOCK * (8 if size == "1024" else 1), dtype=np.uint32)
    with pytest.raises(KernelFault) as fault:
        _engine_run(mem, _text("global to peer", size or "256", src_offset), x)
    assert fault.value.code_name == code and words in str(fault.value) and "PTX line" in str(fault.value)


def test_a_copy_that_never_comes_is_a_deadlock(mem, rng):
    from lowlevel.emu.engine.faults import KernelFault
    text = PTX.replace("ISSUE", "")
    with pytest.raises(KernelFault, match="mbarrier deadlock"):
        _engine_run(mem, text, rng.integers(0, 2**32, GRID * BLOCK, dtype=np.uint32))


@pytest.mark.parametrize("line, words", [
    ("cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r6], 256;", "bulk-group"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [%r6], 256;", "cp.reduce"),
])
def test_what_is_not_run_is_refused_by_name(line, words):
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    assemble_sm90(PTX.replace("ISSUE", line))
    with pytest.raises(PtxError, match=words):
        load_ptx(PTX.replace("ISSUE", line))


MEMCPY_ASYNC_CU = r"""
#include <cuda/barrier>
extern "C" __global__ void tile_copy(const float* in, float* out) {
    __shared__ alignas(128) float s[256];
    #pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0)     // on sm_90 a cp.async.bulk completed on the barrier's tx-count
        cuda::memcpy_async(s, in + blockIdx.x * 256, cuda::aligned_size_t<16>(sizeof(s)), bar);
    bar.arrive_and_wait();
    out[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x] * 2.0f;
}
"""


def test_cuda_memcpy_async_on_hopper_is_a_bulk_copy(driver, rng):
    from cuda.pathfinder import find_nvidia_header_directory
    from helpers.cuda_c import nvrtc_ptx
    if find_nvidia_header_directory("cccl") is None:
        pytest.skip("the CCCL headers (cuda/barrier) are not installed")
    ptx = nvrtc_ptx(MEMCPY_ASYNC_CU, arch="compute_90")     # NVRTC searches CCCL by default
    # .shared::cluster (PTX 8.0) or, from NVRTC 13.5 on, .shared::cta (PTX 8.6) destination
    assert re.search(r"cp\.async\.bulk\.shared::(cluster|cta)\.global\.mbarrier::complete_tx::bytes", ptx)
    x = rng.standard_normal(3 * 256).astype(np.float32)
    out = device_poisoned(x.nbytes)
    cuda.Module.from_ptx(ptx).get_function("tile_copy").launch(3, 256, (upload(x), out))
    want = x.reshape(3, 256)[:, ::-1] * np.float32(2)
    np.testing.assert_array_equal(download(out, (3, 256), np.float32), want)

"""Thread-block clusters: a kernel's cluster special registers, distributed shared memory
(mapa, ld/st/atom.shared::cluster) and barrier.cluster, from CUDA C++ through NVRTC
(cooperative_groups::this_cluster()) and from handwritten PTX; compile-time clusters."""
import numpy as np
import pytest
from helpers.cooperative_kernels import cooperative_module
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda

# Each CTA of a cluster of 2 adds its rank + 1 into the peer's counter (atom.shared::cluster)
# and reads the peer's value (ld.shared::cluster); every thread records the special registers.
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry exchange(.param .u64 out_p, .param .u64 specials_p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<10>;
    .shared .align 4 .u32 value;
    .shared .align 4 .u32 counter;
    ld.param.u64 %rd1, [out_p];
    ld.param.u64 %rd2, [specials_p];
    mov.u32 %r1, %cluster_ctarank;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ctaid.y;
    mov.u32 %r4, %nctaid.x;
    mad.lo.u32 %r5, %r3, %r4, %r2;            // linear block id
    mov.u32 %r6, %tid.x;
    setp.ne.u32 %p1, %r6, 0;
    @%p1 bra SKIP_INIT;
    mul.lo.u32 %r7, %r5, 10;
    st.shared.u32 [value], %r7;
    st.shared.u32 [counter], 0;
SKIP_INIT:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    mov.u32 %r8, value;
    mov.u32 %r9, counter;
    xor.b32 %r10, %r1, 1;
    mapa.shared::cluster.u32 %r11, %r8, %r10;
    mapa.shared::cluster.u32 %r12, %r9, %r10;
    ld.shared::cluster.u32 %r13, [%r11];
    add.u32 %r14, %r1, 1;
    atom.shared::cluster.add.u32 %r15, [%r12], %r14;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ld.shared.u32 %r16, [counter];
    mov.u32 %r17, %ntid.x;
    mad.lo.u32 %r18, %r5, %r17, %r6;
    mul.wide.u32 %rd3, %r18, 8;
    add.u64 %rd4, %rd1, %rd3;
    st.global.v2.u32 [%rd4], {%r13, %r16};
    @%p1 bra DONE;
    mul.wide.u32 %rd5, %r5, 32;
    add.u64 %rd6, %rd2, %rd5;
    mov.u32 %r2, %cluster_nctarank;
    mov.u32 %r3, %clusterid.x;
    mov.u32 %r4, %nclusterid.x;
    mov.u32 %r7, %cluster_ctaid.x;
    mov.u32 %r8, %cluster_nctaid.x;
    mov.u32 %r9, %clusterid.y;
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r10, 1, 0, %p1;
    st.global.v4.u32 [%rd6], {%r1, %r2, %r3, %r4};
    st.global.v4.u32 [%rd6+16], {%r7, %r8, %r9, %r10};
DONE:
    ret;
}
"""
GRID, BLOCK = (4, 2, 1), 64


def test_a_cooperative_groups_cluster_exchanges_shared_memory(driver, rng):
    f = cooperative_module().get_function("swap_halves")
    assert (f.attribute("REQUIRED_CLUSTER_WIDTH"), f.attribute("REQUIRED_CLUSTER_HEIGHT")) == (2, 1)
    data = rng.standard_normal(8 * 128).astype(np.float32)
    out = device_poisoned(data.nbytes)
    f.launch(8, 128, (upload(data), out))
    blocks = data.reshape(4, 2, 128)
    expected = blocks[:, ::-1, ::-1] * np.float32(2) + np.float32(2)
    np.testing.assert_array_equal(download(out, data.shape), expected.reshape(-1))


def test_a_compile_time_cluster_shape_cannot_change(driver):
    f = cooperative_module().get_function("swap_halves")
    with pytest.raises(cuda.CudaError) as refused:
        f.set_attribute("REQUIRED_CLUSTER_WIDTH", 4)
    assert refused.value.name == "CUDA_ERROR_NOT_PERMITTED"


def test_handwritten_ptx_distributed_shared_memory(driver):
    f = cuda.Module.from_ptx(PTX).get_function("exchange")
    out = device_poisoned(8 * 8 * BLOCK)
    specials = device_poisoned(8 * 32)
    f.launch(GRID, BLOCK, (out, specials), cluster=(2, 1, 1))
    block = np.arange(8)                       # linear block id y * 4 + x
    rank = block % 2
    peer = block ^ 1
    got = download(out, (8, BLOCK, 2), np.uint32)
    np.testing.assert_array_equal(got[:, :, 0], np.repeat(10 * peer[:, None], BLOCK, 1))
    # the counter of each CTA got BLOCK atomic adds of (peer rank + 1) from its peer
    np.testing.assert_array_equal(got[:, :, 1], np.repeat(BLOCK * ((rank ^ 1) + 1)[:, None], BLOCK, 1))
    sp = download(specials, (8, 8), np.uint32)
    x, y = block % 4, block // 4
    np.testing.assert_array_equal(sp[:, 0], rank)                 # %cluster_ctarank
    np.testing.assert_array_equal(sp[:, 1], 2)                    # %cluster_nctarank
    np.testing.assert_array_equal(sp[:, 2], x // 2)               # %clusterid.x
    np.testing.assert_array_equal(sp[:, 3], 2)                    # %nclusterid.x
    np.testing.assert_array_equal(sp[:, 4], x % 2)                # %cluster_ctaid.x
    np.testing.assert_array_equal(sp[:, 5], 2)                    # %cluster_nctaid.x
    np.testing.assert_array_equal(sp[:, 6], y)                    # %clusterid.y
    np.testing.assert_array_equal(sp[:, 7], 1)                    # %is_explicit_cluster


SPECIALS = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry specials(.param .u64 specials_p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [specials_p];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 32;
    add.u64 %rd3, %rd1, %rd2;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    mov.u32 %r4, %clusterid.x;
    mov.u32 %r5, %nclusterid.x;
    mov.u32 %r6, %cluster_ctaid.x;
    mov.u32 %r7, %cluster_nctaid.x;
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r8, 1, 0, %p1;
    st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r5};
    st.global.v4.u32 [%rd3+16], {%r6, %r7, %r8, %r1};
    ret;
}
"""


def test_without_a_cluster_each_block_is_a_cluster_of_one(driver):
    f = cuda.Module.from_ptx(SPECIALS).get_function("specials")
    out = device_poisoned(6 * 32)
    f.launch(6, 32, (out,))
    got = download(out, (6, 8), np.uint32)
    block = np.arange(6)
    expected = np.stack([0 * block, 1 + 0 * block, block, 6 + 0 * block, 0 * block, 1 + 0 * block,
                         0 * block, block], axis=1)
    np.testing.assert_array_equal(got, expected)

"""Function.prepare(..., cluster=, cooperative=, priority=): a prepared launch through
cuLaunchKernelEx, with launch's keywords checked once at prepare; without them prepare is
the plain PreparedLaunch (cuLaunchKernel) as before."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload

from lowlevel import cuda, kernels, trace
from lowlevel.cuda.prepared import PreparedLaunch

N = 16 * 128
# Each thread writes its CTA's rank in its cluster and the cluster's size (x).
CLUSTER_PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry ranks(.param .u64 out_p)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out_p];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.u32 %r4, %r1, %r2, %r3;
    mov.u32 %r5, %cluster_ctarank;
    mov.u32 %r6, %cluster_nctarank;
    mul.wide.u32 %rd2, %r4, 8;
    add.u64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r5, %r6};
    ret;
}
"""


@pytest.fixture
def add(driver):
    return kernels.module("vector_add").get_function("vector_add")


def launched(step) -> list[str]:
    with trace.Recorder() as recorder:
        step()
    return [c["symbol"] for c in recorder.calls if c["symbol"].startswith("cuLaunch")]


@pytest.mark.parametrize("keywords", [{"priority": 0}, {"cooperative": True}, {"cluster": (2, 1, 1)},
                                      {"cluster": (4, 1, 1), "priority": -1, "cooperative": False}])
def test_prepared_launch_attributes_run_the_kernel(add, rng, keywords):
    run = add.prepare(16, 128, **keywords)
    stream = cuda.Stream()
    for _ in range(2):                                  # prepared once, launched twice
        a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
        out = device_poisoned(a.nbytes)
        assert launched(lambda: run(upload(a), upload(b), out, N, stream=stream)) == ["cuLaunchKernelEx"]
        stream.synchronize()
        np.testing.assert_array_equal(download(out, N), a + b)


def test_a_prepared_cluster_launch_runs_in_clusters(driver):
    if cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("thread-block clusters need sm_90")
    f = cuda.Module.from_ptx(CLUSTER_PTX).get_function("ranks")
    grid, block = 8, 32
    out = device_poisoned(8 * grid * block)
    f.prepare(grid, block, cluster=(4, 1, 1))(out)
    got = download(out, (grid * block, 2), np.uint32)
    ranks = np.repeat(np.arange(grid) % 4, block)
    np.testing.assert_array_equal(got, np.stack([ranks, np.full(grid * block, 4)], axis=1))


def test_without_keywords_prepare_is_the_plain_prepared_launch(add, rng):
    run = add.prepare(16, 128)
    assert type(run) is PreparedLaunch
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    out = device_poisoned(a.nbytes)
    assert launched(lambda: run(upload(a), upload(b), out, N)) == ["cuLaunchKernel"]
    np.testing.assert_array_equal(download(out, N), a + b)


def test_prepare_checks_the_keywords_once(add):
    with pytest.raises(ValueError, match="cluster"):
        add.prepare(16, 128, cluster=(0, 1, 1))
    with pytest.raises(TypeError, match="cooperative"):
        add.prepare(16, 128, cooperative="yes")
    with pytest.raises(ValueError, match="priority"):
        add.prepare(16, 128, priority=2**40)


def test_the_driver_refuses_a_prepared_launch_as_it_refuses_launch(add, rng):
    run = add.prepare(3, 128, cluster=(2, 1, 1))        # 2 does not divide a grid of 3
    a = upload(rng.standard_normal(N).astype(np.float32))
    with pytest.raises(cuda.CudaError) as refused:
        run(a, a, device_poisoned(4 * N), N)
    assert refused.value.name == "CUDA_ERROR_INVALID_CLUSTER_SIZE"
    too_many = add.prepare(1 << 20, 1024, cooperative=True)
    with pytest.raises(cuda.CudaError) as refused:
        too_many(a, a, device_poisoned(4 * N), N)
    assert refused.value.name == "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"
    with pytest.raises(TypeError, match="vector_add takes 4 arguments"):
        run(a, a)

"""Conformance: cuda::barrier and cuda::pipeline (mbarrier underneath), compiled in every
build (conformance_support.BUILDS, and clang where installed), against numpy on random
inputs with poisoned outputs: producers and consumers of one block meeting at a barrier
(whichever half the compiler lays out first), arrive_and_drop, a two-stage block pipeline
of memcpy_async, and a barrier that completes a memcpy_async.
"""
import numpy as np

from clang_support import ClangBuild
from conformance_support import download, poisoned_device, upload
from helpers.barrier_kernels import BARRIER_KERNELS

# The clang build's documented limits (clang_support.py): {label: why clang cannot build it}
CLANG_CANNOT = {
    "cuda_barrier": "a __shared__ cuda::barrier or cuda::pipeline_shared_state has a non-empty "
                    "constructor; nvcc accepts such a declaration with a warning "
                    "(static_var_with_dynamic_init) and runs no constructor, an NVCC extension; "
                    "clang rejects it (initialization is not supported for __shared__ variables); "
                    "BARRIER_CLANG is the same in a spelling clang accepts",
}

BARRIER = BARRIER_KERNELS + r"""
extern "C" __global__ void barrier_copy(const float* in, float* out) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ float s[64];
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0) init(&bar, block.size());
    block.sync();
    cuda::memcpy_async(block, s, in, sizeof(float) * 64, bar);
    bar.arrive_and_wait();
    out[threadIdx.x] = s[63 - threadIdx.x];
}
"""


# The same kernels in a spelling clang accepts: clang allows a __shared__ variable only with
# an empty constructor and destructor; the union's construct nothing, and init() (or
# make_pipeline) makes its member a barrier, as nvcc's spelling has it.
UNINITIALIZED = r"""
template <class T> union Uninitialized {
    T value;
    __device__ Uninitialized() {}
    __device__ ~Uninitialized() {}
};
"""
BARRIER_CLANG = (
    BARRIER.replace("namespace cg = cooperative_groups;\n",
                    "namespace cg = cooperative_groups;\n" + UNINITIALIZED)
    .replace("__shared__ cuda::barrier<cuda::thread_scope_block> bar;",
             "__shared__ Uninitialized<cuda::barrier<cuda::thread_scope_block>> bar_;\n"
             "    auto& bar = bar_.value;")
    .replace("__shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> st;",
             "__shared__ Uninitialized<cuda::pipeline_shared_state<cuda::thread_scope_block, 2>> st_;\n"
             "    auto& st = st_.value;"))


def test_barriers_and_pipelines(driver, any_build, rng):
    """Every kernel from one module load (decoding a -G build is most of the cost)."""
    _check(any_build.load(BARRIER, "cuda_barrier"), rng)


def test_barriers_and_pipelines_clang_spelling(driver, rng):
    assert "__shared__ cuda::" not in BARRIER_CLANG      # every __shared__ barrier replaced
    _check(ClangBuild().load(BARRIER_CLANG, "cuda_barrier_clang"), rng)


def _check(mod, rng):
    grid = 2
    for consumers_first in (1, 0):
        x = rng.standard_normal(grid * 32).astype(np.float32)
        out = poisoned_device(grid * 32, np.float32)
        mod.get_function("produce_consume").launch(grid, 64, (upload(x), out, consumers_first))
        np.testing.assert_array_equal(download(out, grid * 32, np.float32), x * np.float32(3))
    out = poisoned_device(96, np.float32)
    mod.get_function("dropouts").launch(1, 96, (out,))
    np.testing.assert_array_equal(download(out, 96, np.float32)[32:],
                                  1 + np.arange(32, 96, dtype=np.float32))
    n = 3
    x = rng.standard_normal(64 * n).astype(np.float32)
    out = poisoned_device(64, np.float32)
    mod.get_function("pipelined_sum").launch(1, 64, (upload(x), out, n))
    acc = np.zeros(64, np.float32)
    for row in x.reshape(n, 64)[:, (np.arange(64) + 1) % 64]:   # the kernel's order of sums
        acc = acc + row
    np.testing.assert_array_equal(download(out, 64, np.float32), acc)
    out = poisoned_device(64, np.float32)
    mod.get_function("barrier_copy").launch(1, 64, (upload(x[:64]), out))
    np.testing.assert_array_equal(download(out, 64, np.float32), x[:64][::-1])

"""CUDA C kernels of cuda::barrier and cuda::pipeline (mbarrier underneath), shared by the
engine's mbarrier tests (tests/emu/isa/test_mbarrier.py) and the conformance suite
(tests/conformance/test_conformance_barrier.py): producers and consumers of one block
meeting at a barrier (whichever half the compiler lays out first), arrive_and_drop, and a
two-stage block pipeline of memcpy_async."""

BARRIER_KERNELS = r"""
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void produce_consume(const float* in, float* out, int consumers_first) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ float s[32];
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    unsigned t = threadIdx.x, half = blockDim.x / 2;
    bool consumer = consumers_first ? t < half : t >= half;
    unsigned i = consumer == (bool)consumers_first ? t : t - half;
    if (consumer) {
        bar.arrive_and_wait();
        out[blockIdx.x * half + i] = s[i];
    } else {
        s[i] = in[blockIdx.x * half + i] * 3.0f;
        (void)bar.arrive();
    }
}
extern "C" __global__ void dropouts(float* out) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    if (threadIdx.x < 32) { bar.arrive_and_drop(); return; }
    bar.arrive_and_wait();
    bar.arrive_and_wait();
    out[threadIdx.x] = 1.0f + threadIdx.x;
}
extern "C" __global__ void pipelined_sum(const float* in, float* out, int n) {
    __shared__ float s[2][64];
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> st;
    auto block = cg::this_thread_block();
    auto pipe = cuda::make_pipeline(block, &st);
    float acc = 0;
    for (int i = 0; i < n; ++i) {
        pipe.producer_acquire();
        cuda::memcpy_async(block, s[i % 2], in + 64 * i, sizeof(float) * 64, pipe);
        pipe.producer_commit();
        pipe.consumer_wait();
        acc += s[i % 2][(threadIdx.x + 1) % 64];
        pipe.consumer_release();
    }
    out[threadIdx.x] = acc;
}
"""

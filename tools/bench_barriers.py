"""Barrier kernels for tools/bench_emu.py, each beside a fast twin: per-thread
`cuda::memcpy_async` into shared memory completed on a `cuda::barrier`, built for sm_80
(cp.async + cp.async.mbarrier.arrive) and for sm_90 (cp.async.bulk ... complete_tx), and a
loop of `cuda::barrier::arrive_and_wait` beside the same loop with `__syncthreads()`.
The target of each pair: the slow one within RATIO_TARGET of its twin. The sources are
also the regression test's (tests/emu/isa/test_barrier_speed_kernels.py)."""
import numpy as np

from lowlevel import compiler, cuda

RATIO_TARGET = 3.0
THREADS = 256
ITERS = 64                      # two barriers an iteration: 128 barriers

SOURCE = r"""
#include <cuda/barrier>
extern "C" __global__ void copy_barrier(const float4* in, float4* out) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ float4 s[256];
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    cuda::memcpy_async(&s[threadIdx.x], &in[i], cuda::aligned_size_t<16>(sizeof(float4)), bar);
    bar.arrive_and_wait();
    out[i] = s[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void loop_barrier(const unsigned* in, unsigned* out, int iters) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ unsigned s[256];
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t, acc = in[i];
    for (int k = 0; k < iters; k++) {
        s[t] = acc;
        bar.arrive_and_wait();
        acc = acc * 3u + s[(t + 1) % blockDim.x];
        bar.arrive_and_wait();
    }
    out[i] = acc;
}
extern "C" __global__ void loop_sync(const unsigned* in, unsigned* out, int iters) {
    __shared__ unsigned s[256];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t, acc = in[i];
    for (int k = 0; k < iters; k++) {
        s[t] = acc;
        __syncthreads();
        acc = acc * 3u + s[(t + 1) % blockDim.x];
        __syncthreads();
    }
    out[i] = acc;
}
"""


def module(arch: str) -> cuda.Module:
    """SOURCE as PTX for `arch` ("compute_80", "compute_90"), loaded."""
    from cuda.pathfinder import find_nvidia_header_directory  # noqa: PLC0415  (CCCL's headers)
    cccl = find_nvidia_header_directory("cccl")
    if cccl is None:
        raise RuntimeError("<cuda/barrier> (the CCCL headers) not found")
    return cuda.Module.from_ptx(compiler.compile(SOURCE, "ptx", arch, (f"-I{cccl}",)))


def copy_reference(x: np.ndarray) -> np.ndarray:
    """copy_barrier's output: each block's float4s reversed (x: (blocks * THREADS, 4))."""
    return x.reshape(-1, THREADS, 4)[:, ::-1].reshape(-1, 4)


def loop_reference(x: np.ndarray, iters: int) -> np.ndarray:
    """loop_barrier's and loop_sync's output (x: uint32, blocks * THREADS)."""
    acc = x.reshape(-1, THREADS).astype(np.uint32)
    for _ in range(iters):
        acc = acc * np.uint32(3) + np.roll(acc, -1, axis=1)
    return acc.reshape(-1)


COPY_BLOCKS, LOOP_BLOCKS = 512, 32
PAIRS = (("copy_barrier_sm90", "copy_barrier_sm80"), ("loop_arrive_wait", "loop_syncthreads"))


def _upload(host):
    dev = cuda.mem_alloc(max(4, host.nbytes))
    cuda.memcpy_htod(dev, np.ascontiguousarray(host))
    return dev


def _download(dev, like):
    out = np.full_like(like, 0xFF)
    cuda.memcpy_dtoh(out, dev)
    return out


def setup_copy(rng, arch: str):
    """copy_barrier over COPY_BLOCKS blocks of THREADS, built for `arch`."""
    x = rng.standard_normal((COPY_BLOCKS * THREADS, 4)).astype(np.float32)
    din, dout = _upload(x), cuda.mem_alloc(x.nbytes)
    f = module(arch).get_function("copy_barrier")
    want = copy_reference(x)

    def launch():
        cuda.memset_d8(dout, 0xFF, x.nbytes)
        return lambda: f.launch(COPY_BLOCKS, THREADS, (din, dout))

    def check():
        ok = np.array_equal(_download(dout, x), want)
        return ok, "exact" if ok else "MISMATCH"
    sm = arch.split("_")[1]
    return (f"memcpy_async+barrier sm_{sm}", f"copy_barrier_sm{sm}", launch, check, x.shape[0])


def setup_loop(rng, kernel: str):
    """loop_barrier or loop_sync: LOOP_BLOCKS blocks of THREADS, 2 * ITERS barriers."""
    x = rng.integers(0, 2 ** 32, LOOP_BLOCKS * THREADS, dtype=np.uint32)
    din, dout = _upload(x), cuda.mem_alloc(x.nbytes)
    f = module("compute_80").get_function(kernel)
    want = loop_reference(x, ITERS)

    def launch():
        cuda.memset_d8(dout, 0xFF, x.nbytes)
        return lambda: f.launch(LOOP_BLOCKS, THREADS, (din, dout, np.int32(ITERS)))

    def check():
        ok = np.array_equal(_download(dout, x), want)
        return ok, "exact" if ok else "MISMATCH"
    label, key = {"loop_barrier": ("arrive_and_wait x128 loop", "loop_arrive_wait"),
                  "loop_sync": ("__syncthreads x128 loop", "loop_syncthreads")}[kernel]
    return label, key, launch, check, x.size


def setups(rng):
    """[(setup, (label, key))] for bench_emu.py, each slow kernel before its fast twin."""
    out = [(lambda: setup_copy(rng, "compute_90"), ("memcpy_async+barrier sm_90", PAIRS[0][0])),
           (lambda: setup_copy(rng, "compute_80"), ("memcpy_async+barrier sm_80", PAIRS[0][1])),
           (lambda: setup_loop(rng, "loop_barrier"), ("arrive_and_wait x128 loop", PAIRS[1][0])),
           (lambda: setup_loop(rng, "loop_sync"), ("__syncthreads x128 loop", PAIRS[1][1]))]
    return out


def print_targets(by_key, only) -> None:
    """PASS/MISS of each pair: the slow kernel's wall time within RATIO_TARGET of its twin's."""
    for slow, fast in PAIRS:
        if only and not {slow, fast} & set(only):
            continue
        label = f"{slow} within {RATIO_TARGET:g}x of its fast twin {fast}"
        rs, rf = by_key.get(slow), by_key.get(fast)
        if rs is None or rf is None or "wall_s" not in rs or "wall_s" not in rf:
            why = next((r.get("error") for r in (rs, rf) if r and "error" in r), "not run")
            print(f"  MISS  {label}: {why}")
            continue
        ratio = rs["wall_s"] / rf["wall_s"]
        print(f"  {'PASS' if ratio <= RATIO_TARGET else 'MISS'}  {label}: {ratio:.1f}x "
              f"({rs['wall_s'] * 1e3:.1f} ms vs {rf['wall_s'] * 1e3:.1f} ms, wall)")

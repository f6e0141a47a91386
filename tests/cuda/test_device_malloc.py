"""Device-side malloc and free in kernels compiled by NVRTC, within the context's heap
(CU_LIMIT_MALLOC_HEAP_SIZE), on every driver present."""
import numpy as np
import pytest
from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, upload

from lowlevel import cuda

SOURCE = r"""
extern "C" __global__ void fill(int **slots, int n) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int *p = (int *)malloc(n * sizeof(int));
    slots[t] = p;
    if (p) for (int i = 0; i < n; i++) p[i] = t * 1000 + i;
}
extern "C" __global__ void drain(int **slots, long long *sums, int n) {
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    int *p = slots[t];
    long long s = -1;
    if (p) { s = 0; for (int i = 0; i < n; i++) s += p[i]; free(p); }
    sums[t] = s;
}
extern "C" __global__ void scratch(int *out) {      // new/delete, as C++ writes them
    int *q = new int[4];
    for (int i = 0; i < 4; i++) q[i] = threadIdx.x + i;
    out[threadIdx.x] = q[0] + q[3];
    delete[] q;
}
extern "C" __global__ void release(unsigned long long p) { free((void *)p); }
extern "C" __global__ void grab(void **slots, unsigned long long bytes) {
    slots[threadIdx.x + blockIdx.x * blockDim.x] = malloc(bytes);
}
extern "C" __global__ void drop(void **slots) { free(slots[threadIdx.x + blockIdx.x * blockDim.x]); }
"""


@pytest.fixture
def kernels(driver):
    cuda.reset_device()          # the heap's size is fixed by a context's first malloc launch
    yield load_compiled(nvrtc_ptx(SOURCE))
    cuda.reset_device()          # the next tests get the default heap


def test_malloc_in_one_kernel_free_in_another(kernels, rng):
    threads, n = 64, int(rng.integers(1, 12))
    slots = cuda.mem_alloc(8 * threads)
    sums = upload(np.full(threads, -7, np.int64))
    kernels.get_function("fill").launch(2, threads // 2, (slots, n))
    kernels.get_function("drain").launch(2, threads // 2, (slots, sums, n))
    pointers = download(slots, threads, np.uint64)
    assert (pointers != 0).all() and (pointers % 16 == 0).all()
    assert len(set(pointers.tolist())) == threads
    t = np.arange(threads, dtype=np.int64)
    np.testing.assert_array_equal(download(sums, threads, np.int64), t * 1000 * n + n * (n - 1) // 2)


def test_new_and_delete(kernels):
    out = upload(np.full(32, -1, np.int32))
    kernels.get_function("scratch").launch(1, 32, (out,))
    np.testing.assert_array_equal(download(out, 32, np.int32), 2 * np.arange(32) + 3)


def test_an_exhausted_heap_returns_null(kernels):
    cuda.set_limit("MALLOC_HEAP_SIZE", 1 << 20)
    heap = cuda.get_limit("MALLOC_HEAP_SIZE")           # as the driver may have rounded it
    threads, block = 256, 256 << 10                     # 64 MiB asked of a heap of about 1 MiB
    slots = cuda.mem_alloc(8 * threads)
    kernels.get_function("grab").launch(1, threads, (slots, block))
    pointers = download(slots, threads, np.uint64)
    got = np.sort(pointers[pointers != 0])
    assert 0 < got.size <= heap // block
    assert (np.diff(got) >= block).all()                # the blocks do not overlap
    with pytest.raises(cuda.CudaError) as e:            # fixed once a kernel used malloc
        cuda.set_limit("MALLOC_HEAP_SIZE", 1 << 24)
    assert e.value.name == "CUDA_ERROR_INVALID_VALUE"
    if cuda.get_driver().kind == "emu":
        assert got.size == heap // block                # exactly the blocks that fit, in thread order
        assert (pointers[:got.size] != 0).all()
    kernels.get_function("drop").launch(1, threads, (slots,))      # free(NULL) does nothing
    kernels.get_function("grab").launch(1, threads, (slots, block))
    assert (download(slots, threads, np.uint64) != 0).sum() == got.size     # all of it back
    cuda.synchronize()


def test_free_of_what_malloc_did_not_return_faults(kernels):
    if cuda.get_driver().kind != "emu":
        pytest.skip("undefined behaviour on a GPU; the emulated GPU faults")
    plain = cuda.mem_alloc(64)
    kernels.get_function("release").launch(1, 1, (plain.ptr,))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_ILLEGAL_ADDRESS" and "free(" in str(e.value)

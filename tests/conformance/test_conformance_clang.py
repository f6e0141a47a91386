"""Conformance: what the clang build (clang_support.py) changes in clang's own headers, and
why. clang 19's __reduce_*_sync pass the member mask where redux.sync takes the value
(llvm/llvm-project#131415): the kernel faults on a GPU, and must on the emulated GPU too,
which is why the harness swaps the operands back (clang_support.header_fixes)."""
import numpy as np
import pytest
from clang_support import clang_ptx, header_fixes
from conformance_support import download, poisoned_device, upload
from helpers.cuda_c import load_compiled

from lowlevel import cuda

REDUX = r"""
extern "C" __global__ void warp_sum(const int* in, int* out) {
    out[threadIdx.x] = __reduce_add_sync(0xffffffffu, in[threadIdx.x]);
}
"""


def test_clang_redux_operand_swap_faults_as_on_a_gpu(driver, rng):
    if not header_fixes():
        pytest.skip("this clang's __reduce_*_sync pass redux.sync's operands in order")
    x = rng.integers(-2**31, 2**31, 32, dtype=np.int64).astype(np.int32)
    x[0] &= ~1                 # lane 0's own bit is clear in the mask clang makes of x[0]
    fixed = load_compiled(clang_ptx(REDUX)).get_function("warp_sum")
    out = poisoned_device(32, np.int32)
    fixed.launch(1, 32, (upload(x), out))
    total = np.int32(x.astype(np.int64).sum().astype(np.uint64).astype(np.uint32).view(np.int32))
    np.testing.assert_array_equal(download(out, 32, np.int32), np.full(32, total))

    as_installed = load_compiled(clang_ptx(REDUX, fix_headers=False)).get_function("warp_sum")
    with pytest.raises(cuda.CudaError) as raised:
        as_installed.launch(1, 32, (upload(x), out))
        download(out, 32, np.int32)
    assert raised.value.name == "CUDA_ERROR_LAUNCH_FAILED"
    assert "redux.sync" in str(raised.value) and "member mask" in str(raised.value)

"""ldmatrix (x1, x2, x4, with and without .trans) from NVRTC-compiled inline assembly,
against the PTX ISA's fragment layout computed in numpy: register j of lane l holds row
l/4, columns 2(l%4) and 2(l%4)+1 of matrix j (lower column in the lower half); .trans
holds the same positions of the transposed matrix. Rows are given by lanes 8j..8j+7, here
in a shuffled order and at a padded row pitch, so that a layout that ignored the lanes'
addresses would fail. Inputs random, outputs poisoned.
"""
import numpy as np
import pytest

from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, poisoned, upload

SOURCE = r"""
#define PITCH 24                                    // halves per shared row (padded)
template <int X, bool T>
__device__ void ld(const unsigned short* src, const int* rowmap, unsigned* out) {
    __shared__ __align__(16) unsigned short tile[4 * 8 * PITCH];
    int lane = threadIdx.x;
    for (int i = lane; i < 4 * 8 * PITCH; i += 32) tile[i] = src[i];
    __syncwarp();
    unsigned addr = (unsigned)__cvta_generic_to_shared(&tile[rowmap[lane] * PITCH]);
    unsigned r[4] = {0, 0, 0, 0};
    if (X == 1 && !T) asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(addr));
    if (X == 2 && !T) asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    if (X == 4 && !T) asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    if (X == 1 && T) asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(addr));
    if (X == 4 && T) asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                                  : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
    for (int j = 0; j < X; ++j) out[lane * 4 + j] = r[j];
}
extern "C" __global__ void x1(const unsigned short* s, const int* m, unsigned* o) { ld<1, false>(s, m, o); }
extern "C" __global__ void x2(const unsigned short* s, const int* m, unsigned* o) { ld<2, false>(s, m, o); }
extern "C" __global__ void x4(const unsigned short* s, const int* m, unsigned* o) { ld<4, false>(s, m, o); }
extern "C" __global__ void x1t(const unsigned short* s, const int* m, unsigned* o) { ld<1, true>(s, m, o); }
extern "C" __global__ void x4t(const unsigned short* s, const int* m, unsigned* o) { ld<4, true>(s, m, o); }
"""
PITCH = 24


def reference(src, rowmap, count, trans):
    """The fragments, straight from the ISA's description (lane by lane)."""
    out = np.zeros((32, 4), np.uint32)
    for lane in range(32):
        for j in range(count):
            mat = np.array([src[rowmap[8 * j + r] * PITCH:rowmap[8 * j + r] * PITCH + 8] for r in range(8)])
            if trans:
                mat = mat.T
            row, col = lane // 4, 2 * (lane % 4)
            out[lane, j] = int(mat[row, col]) | (int(mat[row, col + 1]) << 16)
    return out


@pytest.mark.parametrize("name, count, trans", [("x1", 1, False), ("x2", 2, False), ("x4", 4, False),
                                                ("x1t", 1, True), ("x4t", 4, True)])
def test_ldmatrix(driver, rng, name, count, trans):
    f = load_compiled(nvrtc_ptx(SOURCE)).get_function(name)
    src = rng.integers(0, 2**16, 4 * 8 * PITCH).astype(np.uint16)
    rowmap = rng.permutation(32).astype(np.int32)          # which shared row each lane names
    out = upload(poisoned((32, 4), np.uint32))
    f.launch(1, 32, (upload(src), upload(rowmap), out))
    got = download(out, (32, 4), np.uint32)
    want = reference(src, rowmap, count, trans)
    np.testing.assert_array_equal(got[:, :count], want[:, :count])

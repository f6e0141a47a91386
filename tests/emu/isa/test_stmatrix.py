"""stmatrix (sm_90: x1, x2, x4, with and without .trans) and movmatrix (m8n8.trans.b16)
from NVRTC-compiled inline assembly, against the PTX ISA's fragment layout computed here
lane by lane: register j of lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix j
(lower column in the lower half); stmatrix writes matrix j's row r where lane 8j + r
points (.trans: the transposed matrix), movmatrix gives the fragment of the transpose.
Rows go to shuffled, padded places of a shared tile that starts poisoned, so a row written
to the wrong place, or a place written that should not be, shows. Inputs random.
"""
import numpy as np
import pytest

from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, poisoned, upload
from lowlevel import cuda

PITCH = 24                                              # halves per shared row (padded)
SOURCE = r"""
#define PITCH 24
template <int X, bool T>
__device__ void st(const unsigned* regs, const int* rowmap, unsigned short* out) {
    __shared__ __align__(16) unsigned short tile[4 * 8 * PITCH];
    int lane = threadIdx.x;
    for (int i = lane; i < 4 * 8 * PITCH; i += 32) tile[i] = 0xBEEF;
    __syncwarp();
    unsigned addr = (unsigned)__cvta_generic_to_shared(&tile[rowmap[lane] * PITCH]);
    const unsigned* r = regs + lane * 4;
    if (X == 1 && !T) asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(addr), "r"(r[0]));
    if (X == 2 && !T) asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" :: "r"(addr), "r"(r[0]), "r"(r[1]));
    if (X == 4 && !T) asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                                   :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    if (X == 1 && T) asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" :: "r"(addr), "r"(r[0]));
    if (X == 4 && T) asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                                  :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
    __syncwarp();
    for (int i = lane; i < 4 * 8 * PITCH; i += 32) out[i] = tile[i];
}
extern "C" __global__ void x1(const unsigned* r, const int* m, unsigned short* o) { st<1, false>(r, m, o); }
extern "C" __global__ void x2(const unsigned* r, const int* m, unsigned short* o) { st<2, false>(r, m, o); }
extern "C" __global__ void x4(const unsigned* r, const int* m, unsigned short* o) { st<4, false>(r, m, o); }
extern "C" __global__ void x1t(const unsigned* r, const int* m, unsigned short* o) { st<1, true>(r, m, o); }
extern "C" __global__ void x4t(const unsigned* r, const int* m, unsigned short* o) { st<4, true>(r, m, o); }
extern "C" __global__ void mov(const unsigned* in, unsigned* out) {
    unsigned d;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(in[threadIdx.x]));
    out[threadIdx.x] = d;
}
"""


def fragment(words):
    """The 8x8 matrix of 16-bit elements one register of each of 32 lanes holds."""
    mat = np.zeros((8, 8), np.uint16)
    for lane in range(32):
        mat[lane // 4, 2 * (lane % 4)] = words[lane] & 0xFFFF
        mat[lane // 4, 2 * (lane % 4) + 1] = words[lane] >> 16
    return mat


def stored(regs, rowmap, count, trans):
    out = np.full(4 * 8 * PITCH, 0xBEEF, np.uint16)
    for j in range(count):
        mat = fragment(regs[:, j])
        if trans:
            mat = mat.T
        for r in range(8):
            start = rowmap[8 * j + r] * PITCH
            out[start:start + 8] = mat[r]
    return out


@pytest.fixture
def sm90_ptx(driver):
    if driver.runs_sass and cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("stmatrix needs an sm_90 GPU")
    return load_compiled(nvrtc_ptx(SOURCE, arch="compute_90"))


@pytest.mark.parametrize("name, count, trans", [("x1", 1, False), ("x2", 2, False), ("x4", 4, False),
                                                ("x1t", 1, True), ("x4t", 4, True)])
def test_stmatrix(sm90_ptx, rng, name, count, trans):
    regs = rng.integers(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    rowmap = rng.permutation(32).astype(np.int32)
    out = upload(poisoned(4 * 8 * PITCH, np.uint16))
    sm90_ptx.get_function(name).launch(1, 32, (upload(regs), upload(rowmap), out))
    got = download(out, 4 * 8 * PITCH, np.uint16)
    np.testing.assert_array_equal(got, stored(regs, rowmap, count, trans))


def test_movmatrix(sm90_ptx, rng):
    words = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    out = upload(poisoned(32, np.uint32))
    sm90_ptx.get_function("mov").launch(1, 32, (upload(words), out))
    t = fragment(words).T
    want = np.array([int(t[l // 4, 2 * (l % 4)]) | (int(t[l // 4, 2 * (l % 4) + 1]) << 16) for l in range(32)],
                    np.uint32)
    np.testing.assert_array_equal(download(out, 32, np.uint32), want)


def test_stmatrix_needs_sm_90():
    """stmatrix is sm_90's: the emulator refuses it, by name, in PTX for an older target."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    ptx = nvrtc_ptx(SOURCE, arch="compute_90").replace(".target sm_90", ".target sm_80")
    with pytest.raises(PtxError, match="stmatrix requires sm_90"):
        load_ptx(ptx)

"""Asynchronous copies (cp.async, __pipeline_memcpy_async) on the emulated GPU, driven
through the engine directly: sizes, zero-fill, ignore-src, faults naming the instruction,
refusals.

Kernels come from NVRTC (plain and -G builds) where natural and are handwritten PTX for
the edge cases. References are numpy on fresh random inputs; outputs are poisoned first.
"""
import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BUILDS = [(), ("-G",)]


def cu(source, options=()):
    return load_ptx(nvrtc_ptx(source, options=list(options)))


# --- cp.async --------------------------------------------------------------------------------

PIPELINE = r"""
#include <cuda_pipeline.h>
extern "C" __global__ void stage(const int* in, int* out) {
    __shared__ __align__(16) int tile[3 * 256];
    const int* src = in + blockIdx.x * 3 * 256;
    int t = threadIdx.x;
    // 16-byte copies whose last 4 bytes are zero-filled, 8-byte copies, 4-byte copies of
    // which every fifth is all zero-fill (src-size 0); they cover the whole tile
    for (int c = t; c < 64; c += blockDim.x)
        __pipeline_memcpy_async(&tile[4 * c], &src[4 * c], 16, 4);
    __pipeline_commit();
    for (int c = t; c < 128; c += blockDim.x)
        __pipeline_memcpy_async(&tile[256 + 2 * c], &src[256 + 2 * c], 8);
    for (int c = t; c < 256; c += blockDim.x)
        __pipeline_memcpy_async(&tile[512 + c], &src[512 + c], 4, c % 5 == 0 ? 4 : 0);
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int k = t; k < 3 * 256; k += blockDim.x) out[blockIdx.x * 3 * 256 + k] = tile[3 * 256 - 1 - k];
}
"""


def _cudart_include():
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        inc = find_nvidia_header_directory("cudart")
    except Exception:
        inc = None
    if inc is None:
        pytest.skip("cuda_pipeline.h not found (pip install nvidia-cuda-runtime)")
    return inc


@pytest.mark.parametrize("options", BUILDS, ids=["nvrtc", "nvrtc-G"])
def test_pipeline_memcpy_async_sizes_and_zfill(mem, rng, options):
    inc = _cudart_include()
    mod = cu(PIPELINE, (*options, f"--include-path={inc}"))
    grid, block = int(rng.integers(2, 6)), int(rng.choice([32, 48, 64]))
    x = rng.integers(-2**31, 2**31, size=grid * 768, dtype=np.int64).astype(np.int32)
    out = Buf(mem, n=grid * 768, dtype=np.int32)
    launch(mod, "stage", grid, block, Buf(mem, x), out, mem=mem)
    tile = x.reshape(grid, 768).copy()
    tile[:, 3:256:4] = 0                               # the zero-filled last word of each 16
    tile[:, 512::5] = 0                                # the 4-byte copies of src-size 0
    np.testing.assert_array_equal(out.read().reshape(grid, 768), tile[:, ::-1])


CP = HEADER + r"""
.visible .entry cp(.param .u64 pin, .param .u64 pout, .param .u32 pbad, .param .u32 pdst)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    .shared .align 16 .b8 tile[1024];
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pout];
    ld.param.u32 %r9, [pbad];
    ld.param.u32 %r10, [pdst];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 4;                       // 16 bytes per thread
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd1, %rd3;
    cvt.u64.u32 %rd7, %r9;
    add.s64 %rd4, %rd4, %rd7;                  // + pbad: misaligned / out of bounds on demand
    mov.u32 %r3, tile;
    add.s32 %r4, %r3, %r2;
    add.s32 %r4, %r4, %r10;                    // + pdst: outside the window on demand
    and.b32 %r5, %r1, 15;                      // src-size: tid % 16 (a register)
    setp.eq.u32 %p1, %r5, 3;                   // ignore-src for tid % 16 == 3
    setp.lt.u32 %p2, %r1, 32;
    @%p2 cp.async.ca.shared.global.L2::128B [%r4], [%rd4], 16, %r5;
    @!%p2 cp.async.cg.shared::cta.global [%r4], [%rd4], 16, %p1;
    cp.async.commit_group;
    cp.async.wait_group 0;
    cp.async.wait_all;
    bar.sync 0;
    mov.u32 %r6, tile;
    add.s32 %r7, %r6, %r2;
    ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r7];
    mul.wide.u32 %rd5, %r1, 16;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r8, %r9, %r10, %r11};
    ret;
}
"""


def test_cp_async_src_size_register_and_ignore_src(mem, rng):
    mod = load_ptx(CP)
    x = rng.integers(1, 255, size=64 * 16).astype(np.uint8)
    inp, out = Buf(mem, x), Buf(mem, n=64 * 16, dtype=np.uint8, poison=np.uint8(0xFF))
    launch(mod, "cp", 1, 64, inp, out, 0, 0, mem=mem)
    expect = x.reshape(64, 16).copy()
    t = np.arange(64)
    k = t % 16
    for i in range(32):                                # src-size = tid % 16, then zeros
        expect[i, k[i]:] = 0
    expect[32:][k[32:] == 3] = 0                       # ignore-src: all zeros
    np.testing.assert_array_equal(out.read().reshape(64, 16), expect)


def test_cp_async_faults_name_the_instruction(mem, rng):
    mod = load_ptx(CP)
    x = rng.integers(0, 255, size=64 * 16).astype(np.uint8)
    inp, out = Buf(mem, x), Buf(mem, n=64 * 16, dtype=np.uint8)
    with pytest.raises(KernelFault) as e:              # src 4 bytes off a 16-byte boundary
        launch(mod, "cp", 1, 64, inp, out, 4, 0, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert "cp.async" in e.value.message and "thread (1,0,0)" in e.value.message
    with pytest.raises(KernelFault) as e:              # past the end of the input
        launch(mod, "cp", 1, 64, inp, out, 1 << 30, 0, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "global load" in e.value.message and "cp.async" in e.value.message
    # thread 0 reads 0 bytes (src-size 0): only thread 1 touches global memory there
    assert "thread (1,0,0)" in e.value.message
    with pytest.raises(KernelFault) as e:              # dst past the 1024-byte shared window
        launch(mod, "cp", 1, 64, inp, out, 0, 512, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "shared store" in e.value.message and "thread (32,0,0)" in e.value.message


def test_cp_async_refusals():
    body = (".visible .entry k(.param .u64 a) {{ .reg .b64 %rd<3>; .reg .b32 %r<3>; "
            ".shared .align 16 .b8 s[64]; mov.u32 %r1, s; ld.param.u64 %rd1, [a]; {} ret; }}")
    for bad, why in [("cp.async.cg.shared.global [%r1], [%rd1], 8;", "16 bytes"),
                     ("cp.async.ca.shared.global [%r1], [%rd1], 12;", "4, 8 or 16"),
                     ("cp.async.ca.shared.global [%r1], [%rd1], 8, 9;", "src-size"),
                     ("cp.async.wait_group %r2;", "integer constant"),
                     ("cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 16;",
                      "not supported"),
                     ("cp.async.mbarrier.arrive.shared::cluster.b64 [%r1];", "not supported")]:
        with pytest.raises(PtxError, match=why):
            load_ptx(HEADER + body.format(bad))


# --- when a copy lands ---------------------------------------------------------------------

# Each thread fills its word of a shared tile with -1, copies two words from global memory
# into it in two groups, and reads the tile at three points: before any wait, after
# wait_group 1 (the first group landed), after wait_group 0 (both).
STAGES = HEADER + """
.visible .entry stages(.param .u64 src, .param .u64 out)
{
    .shared .align 16 .b32 tile[64];
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    mov.u64 %rd4, tile;
    add.u64 %rd5, %rd4, %rd3;             // my first word of the tile
    add.u64 %rd6, %rd5, 128;              // my second word
    mov.b32 %r2, -1;
    st.shared.b32 [%rd5], %r2;
    st.shared.b32 [%rd6], %r2;
    add.u64 %rd7, %rd1, %rd3;
    add.u64 %rd8, %rd7, 128;
    cp.async.ca.shared.global [%rd5], [%rd7], 4;
    cp.async.commit_group;
    cp.async.ca.shared.global [%rd6], [%rd8], 4;
    cp.async.commit_group;
    ld.shared.b32 %r3, [%rd5];            // before any wait: the copy may not have landed
    cp.async.wait_group 1;
    ld.shared.b32 %r4, [%rd5];            // the first group has landed
    ld.shared.b32 %r5, [%rd6];            // the second may not have
    cp.async.wait_group 0;
    ld.shared.b32 %r6, [%rd6];
    mul.wide.u32 %rd9, %r1, 16;
    add.u64 %rd10, %rd2, %rd9;
    st.global.v4.b32 [%rd10], {%r3, %r4, %r5, %r6};
    ret;
}
"""


def test_a_copy_lands_when_its_group_is_waited_for(mem, rng):
    """A copy read before its wait shows the old bytes (on a GPU it may or may not have
    landed: landing at issue would hide a missing wait); wait_group N lands every group
    but the newest N."""
    mod = load_ptx(STAGES)
    src = rng.integers(0, 1 << 30, 64).astype(np.int32)
    out = Buf(mem, n=32 * 4, dtype=np.int32)
    launch(mod, "stages", 1, 32, Buf(mem, src), out, mem=mem)
    got = out.read().reshape(32, 4)
    np.testing.assert_array_equal(got[:, 0], -1)           # not waited for: not there
    np.testing.assert_array_equal(got[:, 1], src[:32])     # wait_group 1: the first group
    np.testing.assert_array_equal(got[:, 2], -1)           # the newest group still pending
    np.testing.assert_array_equal(got[:, 3], src[32:])     # wait_group 0: every group

"""Cache hints and policies on the emulated GPU: prefetch, prefetchu, applypriority and
createpolicy change no result; discard makes its 128-byte line indeterminate (0xFF here, as
fresh memory), and is checked like a 128-byte store. The kernel is assembled by ptxas for
sm_90; the reference is numpy; the output is poisoned."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry hints(.param .u64 x_p, .param .u64 out_p)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [x_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    prefetch.global.L2 [%rd4];
    prefetch.global.L1 [%rd4];
    prefetch.global.L2::evict_last [%rd4];
    prefetchu.L1 [%rd4];
    createpolicy.fractional.L2::evict_last.b64 %rd5, 1.0;
    createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %rd6, 0.5;
    createpolicy.range.L2::evict_last.L2::evict_first.b64 %rd7, [%rd1], 256, 1024;
    ld.global.L2::cache_hint.u32 %r2, [%rd4], %rd5;
    mul.lo.u32 %r2, %r2, 5;
    add.u64 %rd8, %rd2, %rd3;
    st.global.L2::cache_hint.u32 [%rd8], %r2, %rd6;
    and.b32 %r3, %r1, 31;
    setp.eq.u32 %p1, %r3, 0;
    bar.sync 0;
    @%p1 applypriority.global.L2::evict_normal [%rd8], 128;
    DISCARD
    ret;
}
"""


def _function(discard=""):
    text = PTX.replace("DISCARD", discard)
    assemble_sm90(text)
    return cuda.Module.from_ptx(text).get_function("hints")


def test_hints_change_no_result_and_discard_makes_a_line_indeterminate(driver, rng):
    x = rng.integers(0, 2**32, 128, dtype=np.uint32)
    out = device_poisoned(x.nbytes)
    # the warp of lanes 32..63 discards the line of their outputs after writing it
    discard = "setp.eq.u32 %p1, %r1, 32;\n    @%p1 discard.global.L2 [%rd8], 128;"
    _function(discard).launch(1, 128, (upload(x), out))
    got = download(out, x.shape, np.uint32)
    want = x * np.uint32(5)
    kept = np.r_[0:32, 64:128]
    np.testing.assert_array_equal(got[kept], want[kept])
    if driver.kind == "emu":                 # a GPU leaves the line undefined, not 0xFF
        np.testing.assert_array_equal(got[32:64], np.uint32(0xFFFFFFFF))


def test_a_misaligned_discard_faults(driver):
    if driver.kind != "emu":
        pytest.skip("undefined behaviour on a GPU, a fault on the emulated one")
    f = _function("@%p1 discard.global.L2 [%rd8+4], 128;")
    f.launch(1, 64, (upload(np.zeros(64, np.uint32)), device_poisoned(64 * 4 + 128)))
    with pytest.raises(cuda.CudaError) as e:
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS"


@pytest.mark.parametrize("line", ["discard.global.L2 [%rd8], 64;",
                                  "createpolicy.fractional.L2::evict_last.b64 %rd9, 1.5;"])
def test_malformed_hints_are_refused_at_load(line):
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    with pytest.raises(PtxError):
        load_ptx(PTX.replace("DISCARD", line))


LDU = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry uniform(.param .u64 x_p, .param .u64 out_p)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x_p];
    ld.param.u64 %rd2, [out_p];
    mov.u32 %r1, %tid.x;
    ldu.global.u32 %r2, [%rd1+4];              // the same address in every thread
    cvta.global.u64 %rd3, %rd1;
    ldu.v2.u32 {%r3, %r4}, [%rd3+8];           // generic
    and.b32 %r5, %r1, 3;
    mul.wide.u32 %rd4, %r5, 4;
    add.u64 %rd5, %rd1, %rd4;
    ldu.global.u32 %r6, [%rd5];                // per-thread addresses read per thread
    add.u32 %r2, %r2, %r3;
    add.u32 %r2, %r2, %r4;
    add.u32 %r2, %r2, %r6;
    mul.wide.u32 %rd6, %r1, 4;
    add.u64 %rd7, %rd2, %rd6;
    st.global.u32 [%rd7], %r2;
    ret;
}
"""


def test_ldu_loads_like_ld(driver, rng):
    """ldu (load read-only data), .global and generic, scalar and .v2."""
    assemble_sm90(LDU)
    x = rng.integers(0, 2**20, 4, dtype=np.uint32)
    out = device_poisoned(64 * 4)
    cuda.Module.from_ptx(LDU).get_function("uniform").launch(1, 64, (upload(x), out))
    want = x[1] + x[2] + x[3] + x[np.arange(64) % 4]
    np.testing.assert_array_equal(download(out, (64,), np.uint32), want)

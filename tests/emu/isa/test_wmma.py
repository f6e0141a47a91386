"""WMMA's rules and cvt.rna.tf32.f32, in the emulator: wmma.load/store fault, naming the
rule, on an address that is not 256-bit aligned, a stride that is not a multiple of 16
bytes, or an address or stride that differs between the lanes of a warp (the PTX ISA makes
these undefined; CUDA's load_matrix_sync requires them); wmma shapes and types the emulator
does not run are refused by name at load (the sub-byte forms: test_wmma_subbyte.py). cvt.rna.tf32.f32 against a rounding computed in
float64 (to 10 fraction bits, ties away from zero). nvcuda::wmma itself is covered by
tests/conformance/test_conformance_tensor_cores.py.
"""
import numpy as np
import pytest

from helpers.emu_engine import HEADER, Buf, launch
from helpers.memory import download, poisoned, upload
from lowlevel import cuda
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError

WMMA_LINE = "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11}, [%rd1], %r2;"
LOAD = HEADER + r"""
.visible .entry k(.param .u64 pa, .param .u64 pd, .param .u32 skew, .param .u32 stride) {
    .reg .b32 %r<12>;
    .reg .f32 %f<8>;
    .reg .u64 %rd<6>;
    .reg .pred %p<1>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pd];
    ld.param.u32 %r1, [skew];
    ld.param.u32 %r2, [stride];
    mov.u32 %r3, %tid.x;
    setp.eq.u32 %p0, %r3, 5;
    selp.u32 %r9, %r1, 0, %p0;                 // lane 5 alone moves its address by `skew`
    cvt.u64.u32 %rd3, %r9;
    add.u64 %rd1, %rd1, %rd3;
    WMMA_LINE
    mul.wide.u32 %rd4, %r3, 4;
    add.u64 %rd2, %rd2, %rd4;
    st.global.b32 [%rd2], %r4;
    ret;
}
""".replace("WMMA_LINE", WMMA_LINE)


@pytest.mark.parametrize("base, skew, stride, code, what", [
    (16, 0, 16, "CUDA_ERROR_MISALIGNED_ADDRESS", "256-bit aligned"),
    (0, 0, 12, "CUDA_ERROR_MISALIGNED_ADDRESS", "multiple of 16 bytes"),
    (0, 32, 16, "CUDA_ERROR_LAUNCH_FAILED", "the address must be the same"),
])
def test_wmma_load_faults_name_the_rule(mem, base, skew, stride, code, what):
    mod = load_ptx(LOAD)
    a = Buf(mem, np.zeros(2048, np.uint16))
    out = Buf(mem, n=32, dtype=np.uint32)
    launch(mod, "k", 1, 32, a.addr + 0, out, 0, 16, mem=mem)           # the rules kept: it runs
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", 1, 32, a.addr + base, out, skew, stride, mem=mem)
    assert e.value.code_name == code
    assert what in e.value.message and "wmma" in e.value.message


@pytest.mark.parametrize("instr, match", [
    ("wmma.load.a.sync.aligned.row.m8n8k4.global.f16 {%r4}, [%rd1], %r2;", "shape or type"),
    ("wmma.load.a.sync.aligned.row.m16n16k16.global.s8 {%r4, %r5, %r6}, [%rd1], %r2;", "takes 2 registers"),
    ("wmma.load.a.sync.aligned.row.m16n16k16.global.f32 {%r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11}, [%rd1], %r2;",
     "cannot be .f32"),
    ("wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r4, %r5, %r6, %r7}, [%rd1], %r2;", "takes 8 registers"),
])
def test_wmma_refused_by_name(instr, match):
    ptx = LOAD.replace(WMMA_LINE, instr)
    assert instr in ptx
    with pytest.raises(PtxError, match=match):
        load_ptx(ptx)


CVT = r"""
.version 8.0
.target sm_80
.address_size 64
.visible .entry cvt(.param .u64 px, .param .u64 py) {
    .reg .f32 %f1;
    .reg .b32 %r<3>;
    .reg .u64 %rd<5>;
    ld.param.u64 %rd1, [px];
    ld.param.u64 %rd2, [py];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd1, %rd1, %rd3;
    add.u64 %rd2, %rd2, %rd3;
    ld.global.f32 %f1, [%rd1];
    cvt.rna.tf32.f32 %r2, %f1;
    st.global.b32 [%rd2], %r2;
    ret;
}
"""


def tf32_reference(x):
    """To 10 fraction bits, to nearest, ties away from zero, computed in float64."""
    x = x.astype(np.float64)
    out = np.zeros_like(x)
    finite = np.isfinite(x) & (x != 0)
    mag = np.abs(x[finite])
    unit = 2.0 ** (np.floor(np.log2(mag)) - 10)
    out[finite] = np.sign(x[finite]) * np.floor(mag / unit + 0.5) * unit
    out[~finite] = x[~finite]
    return out


def test_cvt_rna_tf32(driver, rng):
    x = (rng.standard_normal(256) * 2.0 ** rng.integers(-30, 30, 256)).astype(np.float32)
    u = x.view(np.uint32)
    u[:64] = (u[:64] & np.uint32(0xFFFFE000)) | np.uint32(0x1000)     # exact ties
    x[64:68] = [np.inf, -np.inf, 0.0, np.finfo(np.float32).max]
    out = upload(poisoned(256, np.uint32))
    cuda.Module.from_ptx(CVT).get_function("cvt").launch(1, 256, (upload(x), out))
    got = download(out, 256, np.uint32)
    assert not (got & np.uint32(0x1FFF)).any()                    # tf32: the low 13 bits clear
    want = tf32_reference(x)
    want[67] = np.inf                                             # FLT_MAX rounds up, past the range
    np.testing.assert_array_equal(got.view(np.float32).astype(np.float64), want)

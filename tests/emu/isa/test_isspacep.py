"""isspacep.const and .global: a generic address inside a .const variable is in the .const
window (and so not .global), one of a .global variable is .global; the emulator keeps both
kinds of variables in its arena, so this tells them apart by the module's variables. Also
what the -G builds of libcu++'s memcpy_async ask (__isConstant). Assembled by ptxas for
sm_90; output poisoned."""
import numpy as np
from helpers.memory import device_poisoned, download
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.const .align 4 .b32 tab[16];
.global .align 4 .b32 g[4];
.visible .entry spaces(.param .u64 out)
{
    .reg .pred %p<6>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.const.u64 %rd2, tab;
    add.u64 %rd3, %rd2, 60;                    // its last word
    add.u64 %rd5, %rd2, 64;                    // one past it
    cvta.global.u64 %rd4, g;
    isspacep.const %p1, %rd2;
    isspacep.const %p2, %rd3;
    isspacep.const %p3, %rd4;
    isspacep.global %p4, %rd2;
    isspacep.global %p5, %rd4;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 2, 0, %p2;
    selp.u32 %r3, 4, 0, %p3;
    selp.u32 %r4, 8, 0, %p4;
    selp.u32 %r5, 16, 0, %p5;
    or.b32 %r1, %r1, %r2;
    or.b32 %r1, %r1, %r3;
    or.b32 %r1, %r1, %r4;
    or.b32 %r1, %r1, %r5;
    isspacep.const %p1, %rd5;
    selp.u32 %r6, 32, 0, %p1;
    or.b32 %r1, %r1, %r6;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def test_isspacep_const_and_global(driver):
    assemble_sm90(PTX)
    out = device_poisoned(4)
    cuda.Module.from_ptx(PTX).get_function("spaces").launch(1, 1, (out,))
    got = int(download(out, (1,), np.uint32)[0])
    assert got & 0b11111 == 1 | 2 | 16          # const: tab, tab+60; global: g only
    if driver.kind == "emu":                    # past the variable: whatever follows it
        assert not got & 32

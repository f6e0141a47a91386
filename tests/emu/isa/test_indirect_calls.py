"""Calls through device function pointers on the emulated GPU, through the engine: tables
of function pointers, pointers chosen per thread and C++ virtual calls as NVRTC compiles
them (plain and -G), and handwritten PTX for pointers that name no function, endless
recursion through a pointer (a stack overflow) and malformed modules.
"""
import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from helpers.function_pointers import FUNCTION_POINTERS as POINTERS
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.ptx.errors import PtxError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("options", [(), ("-G",)], ids=["nvrtc", "nvrtc-G"])
def test_function_pointers_and_virtual_calls(mem, rng, options):
    mod = load_ptx(nvrtc_ptx(POINTERS, options=list(options)))
    grid, block = 2, 64
    n = grid * block
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    which = rng.integers(0, 3, n).astype(np.int32)
    want = np.where(which == 0, a + b, np.where(which == 1, a * b, a - b))
    for kernel in ("from_table", "chosen"):
        out = Buf(mem, n=n, dtype=np.float32)
        launch(mod, kernel, grid, block, Buf(mem, a), Buf(mem, b), Buf(mem, which), out, mem=mem)
        np.testing.assert_array_equal(out.read(), want)
    out = Buf(mem, n=n, dtype=np.float32)
    launch(mod, "virtual_call", grid, block, Buf(mem, a), Buf(mem, which), out, mem=mem)
    np.testing.assert_array_equal(out.read(), np.where(which & 1, a * a, np.float32(0.5) * a * a))


def kernel(body, functions=""):
    return load_ptx(HEADER + functions + f"""
.visible .entry k(.param .u64 pout, .param .u64 pf)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pout];
    ld.param.u64 %rd2, [pf];
{body}
    ret;
}}""")


TWICE = """
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %t<2>;
    ld.param.b32 %t0, [x];
    add.u32 %t1, %t0, %t0;
    st.param.b32 [r], %t1;
    ret;
}
.func (.param .b32 r) again(.param .b32 x)
{
    .reg .b32 %t<2>;
    .reg .b64 %f;
    mov.u64 %f, again;
    ld.param.b32 %t0, [x];
    {
    .param .b32 a;
    .param .b32 q;
    st.param.b32 [a], %t0;
    proto : .callprototype (.param .b32 _) _ (.param .b32 _);
    call (q), %f, (a), proto;
    ld.param.b32 %t1, [q];
    }
    st.param.b32 [r], %t1;
    ret;
}
"""

CALL = """
    {
    .param .b32 a;
    .param .b32 q;
    st.param.b32 [a], 21;
    proto : .callprototype (.param .b32 _) _ (.param .b32 _);
    call (q), %rd3, (a), proto;
    ld.param.b32 %r1, [q];
    }
    st.global.u32 [%rd1], %r1;
"""


def test_a_pointer_from_mov_and_from_a_parameter(mem):
    mod = kernel("    mov.u64 %rd3, twice;\n" + CALL, TWICE)
    out = Buf(mem, n=1, dtype=np.int32)
    launch(mod, "k", 1, 1, out, 0, mem=mem)
    assert out.read()[0] == 42


@pytest.mark.parametrize("pointer, code, message", [
    (12345, "CUDA_ERROR_INVALID_PC", "indirect call to 0x3039, which is no function"),
    ("again", "CUDA_ERROR_ILLEGAL_ADDRESS", "stack overflow in the recursion of 'again'"),
])
def test_pointers_the_emulator_cannot_call_fault(mem, pointer, code, message):
    body = ("    mov.u64 %rd4, twice;\n    mov.u64 %rd4, again;\n"
            + ("    mov.u64 %rd3, again;\n" if pointer == "again" else "    mov.u64 %rd3, %rd2;\n") + CALL)
    mod = kernel(body, TWICE)
    out = Buf(mem, n=1, dtype=np.int32)
    with pytest.raises(KernelFault) as info:
        launch(mod, "k", 1, 32, out, 12345 if pointer == 12345 else 0, mem=mem)
    assert info.value.code_name == code and message in info.value.message
    assert "thread (0,0,0)" in info.value.message


def test_a_function_pointer_is_no_data_pointer(mem):
    mod = kernel("    mov.u64 %rd3, twice;\n    ld.u32 %r1, [%rd3];\n    st.global.u32 [%rd1], %r1;",
                 TWICE)
    with pytest.raises(KernelFault) as info:
        launch(mod, "k", 1, 1, Buf(mem, n=1, dtype=np.int32), 0, mem=mem)
    assert info.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_malformed_indirect_calls_are_refused():
    with pytest.raises(PtxError, match="without a .callprototype"):
        kernel("    mov.u64 %rd3, twice;\n    { .param .b32 a; .param .b32 q; st.param.b32 [a], 1;\n"
               "    call (q), %rd3, (a);\n    }", TWICE)
    with pytest.raises(PtxError, match="'nothing' is no function"):
        load_ptx(HEADER + ".global .align 8 .u64 table[1] = {nothing};\n"
                 ".visible .entry k() { ret; }")

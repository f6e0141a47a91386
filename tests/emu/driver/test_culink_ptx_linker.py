"""cuLink* links several PTX modules into one (lowlevel/emu/driver/culink.py over
emu/ptx/linker.py): a kernel calls an `.extern .func` and reads an `.extern .global` that
another module defines; `.file` numbers are renumbered; a symbol without linkage stays its
module's own; an unresolved extern and a definition twice are refused, the log naming the
symbol. Through lowlevel's driver binding, on every driver present.
"""
import ctypes
import re

import numpy as np
import pytest
from helpers.ptxas import ptxas_refusal

from lowlevel import cuda
from lowlevel.capi.constants import CURESULT, JIT_OPTION
from lowlevel.emu.ptx.linker import LinkError, link

INPUT_PTX = 1                          # CU_JIT_INPUT_PTX
LOG = 8192

# The caller: calls scaled_sum and reads scale, both defined by CALLEE.
CALLER = r"""
.version 8.0
.target sm_80
.address_size 64
.file 1 "caller.cu"
.extern .func (.param .b32 result) scaled_sum (.param .b32 x, .param .b32 y);   // CALLEE's
.extern .global .align 4 .f32 scale;                                               // CALLEE's
.visible .entry apply(.param .u64 out, .param .u64 a, .param .u64 b, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<10>;
    .loc 1 3 1
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;          // i = blockIdx.x * blockDim.x + threadIdx.x
    ld.param.u32 %r5, [n];
    setp.ge.u32 %p1, %r4, %r5;
    @%p1 bra DONE;                           // i >= n: nothing to do
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.u32 %rd7, %r4, 4;               // byte offset of element i
    add.s64 %rd8, %rd4, %rd7;
    ld.global.f32 %f1, [%rd8];               // a[i]
    add.s64 %rd8, %rd5, %rd7;
    ld.global.f32 %f2, [%rd8];               // b[i]
    .loc 1 4 1
    {
    .param .b32 x0;
    .param .b32 y0;
    .param .b32 r0;
    st.param.f32 [x0], %f1;
    st.param.f32 [y0], %f2;
    call.uni (r0), scaled_sum, (x0, y0);     // the other module's function
    ld.param.f32 %f3, [r0];                  // a[i] * scale + b[i]
    }
    ld.global.f32 %f4, [scale];              // the other module's variable
    add.f32 %f3, %f3, %f4;                   // + scale
    add.s64 %rd9, %rd6, %rd7;
    st.global.f32 [%rd9], %f3;               // out[i]
DONE:
    ret;
}
"""

# The callee: defines scaled_sum and scale; its files are 1 and 2, as the caller's is 1.
CALLEE = r"""
.version 7.8
.target sm_80
.address_size 64
.file 1 "callee.cu"
.file 2 "callee.h"
.visible .global .align 4 .f32 scale = 0f40000000;                  // 2.0, set by the test
.visible .func (.param .b32 result) scaled_sum (.param .b32 x, .param .b32 y)
{
    .reg .f32 %f<5>;
    .loc 2 7 1
    ld.param.f32 %f1, [x];
    ld.param.f32 %f2, [y];
    ld.global.f32 %f3, [scale];
    fma.rn.f32 %f4, %f1, %f3, %f2;           // x * scale + y
    st.param.f32 [result], %f4;
    ret;
}
"""


def _private(kernel: str, value: int) -> str:
    """A module whose `tag` and `$str` have no linkage (its own), stored by its kernel."""
    return f"""
.version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 tag = {value};                // private to this module
.global .align 1 .b8 $str[2] = {{{value % 256}, 0}};  // NVVM's name for a string: in every module
.visible .entry {kernel}(.param .u64 out)
{{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [tag];                // this module's tag
    ld.global.u8 %r2, [$str];                // this module's string
    add.u32 %r1, %r1, %r2;
    st.global.u32 [%rd2], %r1;
    ret;
}}
"""


class Link:
    """A cuLink* session through the driver binding, with its log buffers."""

    def __init__(self, drv):
        cuda.context.ensure_context()          # a link belongs to the current context
        self.drv = drv
        self.info, self.error = ctypes.create_string_buffer(LOG), ctypes.create_string_buffer(LOG)
        pairs = [(JIT_OPTION["CU_JIT_INFO_LOG_BUFFER"], ctypes.addressof(self.info)),
                 (JIT_OPTION["CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES"], LOG),
                 (JIT_OPTION["CU_JIT_ERROR_LOG_BUFFER"], ctypes.addressof(self.error)),
                 (JIT_OPTION["CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES"], LOG)]
        # the driver writes into the option arrays until cuLinkDestroy: they live with the link
        self.keys = (ctypes.c_int * len(pairs))(*[k for k, _ in pairs])
        self.values = (ctypes.c_void_p * len(pairs))(*[v for _, v in pairs])
        self.state = ctypes.c_void_p()
        drv.cuLinkCreate(len(pairs), self.keys, self.values, ctypes.byref(self.state))

    def add(self, text: str, name: str) -> int:
        data = text.encode() + b"\0"
        return self.drv.cuLinkAddData.unchecked(self.state, INPUT_PTX, data, len(data), name.encode(), 0, None, None)

    def complete(self) -> tuple[int, bytes]:
        image, size = ctypes.c_void_p(), ctypes.c_size_t()
        code = self.drv.cuLinkComplete.unchecked(self.state, ctypes.byref(image), ctypes.byref(size))
        return code, ctypes.string_at(image.value, size.value) if code == 0 else b""

    def destroy(self) -> None:
        self.drv.cuLinkDestroy(self.state)


def _load(image: bytes) -> cuda.Module:
    """The linked image: a cubin from a GPU's driver, the linked PTX from the emulated one."""
    return cuda.Module.from_cubin(image) if image[:4] == b"\x7fELF" else cuda.Module.from_ptx(image)


def _linked(drv, *inputs: tuple[str, str]) -> bytes:
    session = Link(drv)
    try:
        for text, name in inputs:
            assert session.add(text, name) == 0, session.error.value.decode()
        code, image = session.complete()
        assert code == 0, session.error.value.decode()
        return image
    finally:
        session.destroy()


def test_a_kernel_calls_a_function_and_reads_a_variable_of_another_module(driver, rng):
    module = _load(_linked(driver, (CALLER, "caller.ptx"), (CALLEE, "callee.ptx")))
    n = 1000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    scale = np.float32(rng.uniform(0.5, 4.0))
    address, size = module.get_global("scale")           # one variable, the callee's, for both modules
    assert size == 4
    cuda.memcpy_htod(address, np.array([scale]))
    da, db, out = cuda.mem_alloc(a.nbytes), cuda.mem_alloc(b.nbytes), cuda.mem_alloc(a.nbytes)
    cuda.memcpy_htod(da, a)
    cuda.memcpy_htod(db, b)
    cuda.memcpy_htod(out, np.full(n, np.nan, np.float32))  # poisoned
    module.get_function("apply").launch(grid=(n + 127) // 128, block=128, args=(out, da, db, n))
    got = np.empty(n, np.float32)
    cuda.memcpy_dtoh(got, out)
    reference = a.astype(np.float64) * scale + b + scale
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-5)


def test_symbols_without_linkage_stay_each_modules_own(driver):
    module = _load(_linked(driver, (_private("read_first", 11), "first.ptx"), (_private("read_second", 22), "second.ptx")))
    out = cuda.mem_alloc(4)
    for kernel, expected in (("read_first", 11 + 11), ("read_second", 22 + 22)):
        cuda.memcpy_htod(out, np.array([0xDEADBEEF], np.uint32))
        module.get_function(kernel).launch(grid=1, block=1, args=(out,))
        got = np.empty(1, np.uint32)
        cuda.memcpy_dtoh(got, out)
        assert got[0] == expected, kernel


def test_an_extern_nothing_defines_is_refused_when_the_link_completes(driver):
    session = Link(driver)
    try:
        assert session.add(CALLER, "caller.ptx") == 0
        code, _ = session.complete()
        log = session.error.value.decode()
    finally:
        session.destroy()
    assert code != 0 and "scaled_sum" in log and "caller.ptx" in log, (code, log)
    if driver.kind == "emu":
        assert code == CURESULT["CUDA_ERROR_UNKNOWN"] and "Undefined reference to 'scaled_sum'" in log


def test_a_definition_twice_is_refused_when_it_is_added(driver):
    session = Link(driver)
    try:
        assert session.add(CALLEE, "callee.ptx") == 0
        code = session.add(CALLEE, "again.ptx")
        log = session.error.value.decode()
    finally:
        session.destroy()
    assert code == CURESULT["CUDA_ERROR_INVALID_SOURCE"], (code, log)
    assert re.search(r"Multiple definition of '(scale|scaled_sum)' in 'again\.ptx', first defined in 'callee\.ptx'",
                     log), log


def test_file_numbers_are_renumbered_and_locs_follow():
    text = link([(CALLER, "caller.ptx"), (CALLEE, "callee.ptx")])
    files = re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', text, re.M)
    assert files == [("1", "caller.cu"), ("2", "callee.cu"), ("3", "callee.h")], text
    assert re.search(r"\.loc 3 7 1", text) and re.search(r"\.loc 1 4 1", text), text
    # declared before use: the callee's function and variable come before the caller's kernel
    assert text.index("scaled_sum (") < text.index(".entry apply") and text.index(".f32 scale =") < text.index(".entry apply")
    assert ".extern" not in text


def test_an_unknown_input_type_and_a_missing_file_are_refused(driver, tmp_path):
    session = Link(driver)
    try:
        data = CALLEE.encode() + b"\0"
        assert driver.cuLinkAddData.unchecked(session.state, 99, data, len(data), b"x", 0, None, None) == \
            CURESULT["CUDA_ERROR_INVALID_VALUE"]
        missing = str(tmp_path / "missing.ptx").encode()
        assert driver.cuLinkAddFile.unchecked(session.state, INPUT_PTX, missing, 0, None, None) == \
            CURESULT["CUDA_ERROR_FILE_NOT_FOUND"]
        path = tmp_path / "callee.ptx"
        path.write_text(CALLEE)
        assert driver.cuLinkAddFile.unchecked(session.state, INPUT_PTX, str(path).encode(), 0, None, None) == 0
        assert session.add(CALLER, "caller.ptx") == 0
        code, image = session.complete()
        assert code == 0 and image, session.error.value.decode()
        if driver.kind == "emu":            # the info log given to cuLinkCreate names what was linked
            assert f"linked the PTX of {path}, caller.ptx" in session.info.value.decode()
    finally:
        session.destroy()


def test_the_linker_refuses_mismatched_kinds_and_keeps_system_calls():
    with pytest.raises(LinkError, match="Memory space doesn't match for 'scale'"):
        link([(CALLER.replace(".extern .global .align 4 .f32 scale", ".extern .const .align 4 .f32 scale"), "c.ptx"),
              (CALLEE, "d.ptx")])
    printing = CALLEE.replace(".file 2", ".extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);\n.file 2")
    text = link([(CALLER, "caller.ptx"), (printing, "callee.ptx")])
    assert text.count("vprintf") == 1 and ".extern .func (.param .b32 r) vprintf" in text


def _with_debug(name: str, value: int) -> str:
    """A function compiled with -G, in the shape NVVM gives it: .target debug, labels at its
    ends, .loc naming a string of its .debug_str section."""
    return f"""
.version 8.0
.target sm_80, debug
.address_size 64
.visible .func (.param .b32 r) {name}(.param .b32 x)
{{
    .reg .b32 %r<3>;
$L__func_begin0:
    .loc 1 2 0
    ld.param.u32 %r1, [x];
    .loc 1 3 0, function_name $L__info_string0, inlined_at 1 2 0
    add.u32 %r2, %r1, {value};               // x + value
    st.param.b32 [r], %r2;
    ret;
$L__func_end0:
}}
.file 1 "{name}.cu"
.section .debug_str
{{
$L__info_string0:
.b8 102,0
}}
"""


def test_debug_sections_of_several_inputs_go_and_the_line_table_stays():
    text = link([(_with_debug("first", 1), "first.ptx"), (_with_debug("second", 2), "second.ptx")])
    assert ".section" not in text and "debug" not in text.split("\n")[1], text     # DWARF of two units: not merged
    assert "function_name" not in text and "inlined_at" not in text, text
    assert re.search(r"\.loc 1 3 0\s", text) and re.search(r"\.loc 2 3 0\s", text), text
    assert "$L__func_begin0$in1" in text                                         # the second input's labels
    refusal = ptxas_refusal(text)
    assert refusal in ("", None), refusal
    one = link([(_with_debug("first", 1), "first.ptx"), (CALLEE, "callee.ptx")])
    assert ".section .debug_str" in one and "function_name $L__info_string0" in one   # one unit: kept

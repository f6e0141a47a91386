"""Device assert() (__assertfail) on the emulated GPU, driven through the engine directly:
the first failing thread is reported, and a guarded call in handwritten PTX.

Kernels come from NVRTC (plain and -G builds) where natural and are handwritten PTX for
the edge cases. References are numpy on fresh random inputs; outputs are poisoned first.
"""
import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.driver.errors import describe
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BUILDS = [(), ("-G",)]


def cu(source, options=()):
    return load_ptx(nvrtc_ptx(source, options=list(options)))


# --- device assert() -----------------------------------------------------------------------

ASSERT = r"""
#define DEVICE_ASSERT(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
extern "C" __global__ void check(const int* x, int n, int* out) {
    int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
    if (i < n) {
        DEVICE_ASSERT(x[i] != 7);
        out[i] = 2 * x[i];
    }
}
"""


@pytest.mark.parametrize("options", BUILDS, ids=["nvrtc", "nvrtc-G"])
def test_device_assert_reports_the_first_failing_thread(mem, rng, capsys, options):
    mod = cu(ASSERT, options)
    grid, block = (3, 2), (8, 4)
    n = 3 * 2 * 32 - int(rng.integers(1, 20))
    x = rng.integers(8, 1000, size=n).astype(np.int32)
    out = Buf(mem, n=n, dtype=np.int32)
    launch(mod, "check", grid, block, Buf(mem, x), n, out, mem=mem)   # passes: no fault
    np.testing.assert_array_equal(out.read(), 2 * x)
    assert capsys.readouterr().err == ""

    bad = np.sort(rng.choice(np.arange(40, n), size=3, replace=False))
    x[bad] = 7
    with pytest.raises(KernelFault) as e:
        launch(mod, "check", grid, block, Buf(mem, x), n, out, mem=mem)
    first = int(bad[0])
    cta, t = divmod(first, 32)
    expect = (f".cu:6: check: block: [{cta % 3},{cta // 3},0], "
              f"thread: [{t % 8},{t // 8},0] Assertion `x[i] != 7` failed.")
    assert e.value.code_name == "CUDA_ERROR_ASSERT"
    file, _, rest = e.value.message.partition(".cu:")     # the name NVRTC was given
    assert file and "\n" not in file and ".cu:" + rest == expect, e.value.message
    assert capsys.readouterr().err.strip() == e.value.message
    assert describe(710) and "assert" in describe(710)


ASSERT_PTX = HEADER + r"""
.global .align 1 .b8 msg[5] = {111, 111, 112, 115, 0};
.global .align 1 .b8 file[4] = {97, 46, 99, 0};
.global .align 1 .b8 fn[2] = {102, 0};
.extern .func __assertfail(.param .b64 a0, .param .b64 a1, .param .b32 a2, .param .b64 a3,
                           .param .b64 a4);
.visible .entry k(.param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r2, %r1;
    mov.u64 %rd1, msg;
    cvta.global.u64 %rd1, %rd1;
    mov.u64 %rd2, file;
    cvta.global.u64 %rd2, %rd2;
    mov.u64 %rd3, fn;
    cvta.global.u64 %rd3, %rd3;
    {
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 param2;
    st.param.b32 [param2+0], 42;
    .param .b64 param3;
    st.param.b64 [param3+0], %rd3;
    .param .b64 param4;
    st.param.b64 [param4+0], 1;
    @%p1 call.uni __assertfail, (param0, param1, param2, param3, param4);
    }
    ret;
}
"""


def test_guarded_assertfail_call_in_handwritten_ptx(mem, rng, capsys):
    mod = load_ptx(ASSERT_PTX)
    launch(mod, "k", 2, 64, 1000, mem=mem)            # nobody's guard holds
    t = int(rng.integers(0, 64))
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", 2, 64, t, mem=mem)
    msg = f"a.c:42: f: block: [0,0,0], thread: [{t},0,0] Assertion `oops` failed."
    assert e.value.code_name == "CUDA_ERROR_ASSERT" and e.value.message == msg
    assert msg in capsys.readouterr().err

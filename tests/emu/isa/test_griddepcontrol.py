"""Programmatic dependent launch: a producer kernel writes, triggers its dependents
(griddepcontrol.launch_dependents), and a consumer launched after it on the stream waits
(griddepcontrol.wait) before reading: it sees every write. Assembled by ptxas for sm_90; reference numpy; output poisoned."""
import numpy as np
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import assemble_sm90

from lowlevel import cuda

PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry produce(.param .u64 x_p, .param .u64 y_p)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [x_p];
    ld.param.u64 %rd2, [y_p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 1.0;
    griddepcontrol.launch_dependents;
    add.u64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f2;
    ret;
}
.visible .entry consume(.param .u64 y_p, .param .u64 z_p)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [y_p];
    ld.param.u64 %rd2, [z_p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    griddepcontrol.wait;
    add.u64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    mul.f32 %f2, %f1, 3.0;
    add.u64 %rd5, %rd2, %rd3;
    st.global.f32 [%rd5], %f2;
    ret;
}
"""


def test_a_dependent_launch_sees_the_producers_writes(driver, rng):
    assemble_sm90(PTX)
    mod = cuda.Module.from_ptx(PTX)
    x = rng.standard_normal(128).astype(np.float32)
    y, z = device_poisoned(x.nbytes), device_poisoned(x.nbytes)
    mod.get_function("produce").launch(1, 128, (upload(x), y))
    mod.get_function("consume").launch(1, 128, (y, z))
    cuda.synchronize()
    np.testing.assert_array_equal(download(z, x.shape, np.float32),
                                  (x + np.float32(1)) * np.float32(3))

"""A block's shared memory is what the GPU allocates it: its bytes rounded up to the 128-byte
allocation unit (cuda_occupancy.h's cudaOccSMemAllocationGranularity for 8.x and 9.x).

NVVM reads the tail of an unsized dynamic shared array with one wide load that may pass its
last element (numba-cuda's test_dynshared_slice_gaps: ld.shared.v4 at offset 16 of 28
bytes); on a GPU that reads allocated memory. What lies past the declared end is fresh
shared memory (poison here), and an access past the rounded window still faults.
"""
import numpy as np
import pytest
from helpers.emu_engine import HEADER, Buf, launch

from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault

WIDE_TAIL = HEADER + """
.extern .shared .align 16 .b8 dyn[];
.visible .entry k(.param .u64 out, .param .u32 off)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [off];
    mov.u32 %r2, 99;
    st.shared.u32 [dyn+16], %r2;        // the 5th of 7 ints: the array is 28 bytes
    mov.u32 %r3, dyn;
    add.u32 %r3, %r3, %r1;
    ld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [%r3];
    st.global.v4.u32 [%rd1], {%r4, %r5, %r6, %r7};
    ret;
}
"""


def test_a_wide_load_past_the_arrays_end_reads_the_allocation(mem):
    mod = load_ptx(WIDE_TAIL)
    out = Buf(mem, n=4, dtype=np.uint32, poison=0)
    launch(mod, "k", 1, 32, out, np.uint32(16), mem=mem, shared=28)
    got = out.read()
    assert got[0] == 99 and (got[1:] == 0xFFFFFFFF).all()        # the rest: fresh shared memory's poison


@pytest.mark.parametrize("off", [112, 128, 4096])
def test_past_the_allocation_unit_still_faults(mem, off):
    mod = load_ptx(WIDE_TAIL)
    out = Buf(mem, n=4, dtype=np.uint32, poison=0)
    if off + 16 <= 128:
        launch(mod, "k", 1, 32, out, np.uint32(off), mem=mem, shared=28)     # the last 16 bytes of the unit
        return
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", 1, 32, out, np.uint32(off), mem=mem, shared=28)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "the block's shared window is 128 bytes" in e.value.message


def test_the_window_is_a_whole_number_of_units():
    lay = load_ptx(WIDE_TAIL).kernels["k"].compiled.layout
    assert [lay.shared_window(n) for n in (1, 28, 128, 129, 1000)] == [128, 128, 128, 256, 1024]

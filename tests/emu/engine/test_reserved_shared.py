"""Reserved shared memory, register barrier ids and polling loops on the emulated GPU,
driven through the engine: what cooperative groups' tiles of more than one warp compile
to (NVRTC, plain and -G), the %reserved_smem_offset_* registers on handwritten PTX, and a
warp that spins on a flag another warp sets later in program order.
"""
import numpy as np
import pytest
from helpers.cuda_c import nvrtc_ptx
from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.isa.addressing import RESERVED_SHARED

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TILES = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
extern "C" __global__ void tiles(const int* in, int* out) {
    auto block = cg::this_thread_block();
    int v = in[blockIdx.x * blockDim.x + block.thread_rank()];
    auto t64 = cg::tiled_partition<64>(block);
    int r64 = cg::reduce(t64, v, cg::plus<int>());
    t64.sync();
    auto t16 = cg::tiled_partition<16>(block);
    int r16 = cg::reduce(t16, v, cg::plus<int>());
    out[blockIdx.x * blockDim.x + block.thread_rank()] =
        r64 * 1000 + r16 + t64.meta_group_rank() * 1000000 + t64.thread_rank() * 100000000;
}
"""


def _need_cccl() -> None:
    """NVRTC searches the CCCL headers by default; without them, skip."""
    from cuda.pathfinder import find_nvidia_header_directory
    if find_nvidia_header_directory("cccl") is None:
        pytest.skip("the CCCL headers (<nv/target>, which cooperative groups include) are missing")


@pytest.mark.parametrize("options", [(), ("-G",)], ids=["nvrtc", "nvrtc-G"])
def test_cooperative_groups_tile_of_64(mem, rng, options):
    """tiled_partition<64> keeps its barrier and exchange slots in reserved shared memory
    (%reserved_smem_offset_1); -G passes barrier ids in registers and polls a flag."""
    _need_cccl()
    mod = load_ptx(nvrtc_ptx(TILES, options=list(options)))
    grid, block = 2, 128
    x = rng.integers(-1000, 1000, grid * block).astype(np.int32)
    out = Buf(mem, n=grid * block, dtype=np.int32)
    launch(mod, "tiles", grid, block, Buf(mem, x), out, mem=mem)
    t = np.arange(grid * block) % block
    r64 = x.reshape(-1, 64).sum(1).repeat(64)
    r16 = x.reshape(-1, 16).sum(1).repeat(16)
    want = r64 * 1000 + r16 + (t // 64) * 1000000 + (t % 64) * 100000000
    np.testing.assert_array_equal(out.read(), want.astype(np.int32))


RESERVED = HEADER + r"""
.visible .entry k(.param .u64 pout)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 mine[4];
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %reserved_smem_offset_begin;
    mov.u32 %r2, %reserved_smem_offset_end;
    mov.u32 %r3, %reserved_smem_offset_cap;
    mov.u32 %r4, %reserved_smem_offset_0;
    mov.u32 %r5, %reserved_smem_offset_1;
    mov.u32 %r6, mine;
    st.shared.u32 [%r5], 77;            // the region is the block's own memory
    ld.shared.u32 %r7, [%r5];
    st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};
    st.global.v4.u32 [%rd1+16], {%r5, %r6, %r7, %r7};
    ret;
}"""


def test_reserved_offsets_lie_below_the_kernels_own_variables(mem):
    out = Buf(mem, n=8, dtype=np.uint32)
    launch(load_ptx(RESERVED), "k", 1, 32, out, mem=mem)
    begin, end, cap, off0, off1, mine, stored, _ = out.read()
    assert (begin, end, cap) == (0, RESERVED_SHARED, RESERVED_SHARED)
    assert begin <= off0 < end and begin <= off1 <= end - 288      # what cooperative groups need
    assert mine >= end and stored == 77


POLL = HEADER + r"""
.visible .entry k(.param .u64 pout)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 flag;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra PRODUCER;                  // warp 0 sets the flag, later in program order
SPIN:
    ld.volatile.shared.u32 %r2, [flag];
    setp.ne.u32 %p2, %r2, 7;
    @%p2 bra SPIN;
    st.global.u32 [%rd3], %r2;
    ret;
PRODUCER:
    st.volatile.shared.u32 [flag], 7;
    st.global.u32 [%rd3], %r1;
    ret;
}"""


def test_a_warp_polling_a_flag_lets_the_setter_run(mem):
    out = Buf(mem, n=64, dtype=np.int32)
    launch(load_ptx(POLL), "k", 1, 64, out, mem=mem)
    np.testing.assert_array_equal(out.read(), np.r_[np.arange(32), np.full(32, 7)])


REG_BARRIER = HEADER + r"""
.visible .entry k(.param .u64 pout, .param .u32 pid)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    ld.param.u32 %r2, [pid];
    mov.u32 %r1, %tid.x;
    shr.u32 %r3, %r1, 5;
    add.u32 %r3, %r3, 1;
    mul.lo.u32 %r3, %r3, %r2;           // warp w waits at barrier (w + 1) * pid
    barrier.sync %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}"""


def test_barrier_id_in_a_register(mem):
    mod = load_ptx(REG_BARRIER)
    out = Buf(mem, n=64, dtype=np.int32)
    launch(mod, "k", 1, 64, out, 0, mem=mem)
    np.testing.assert_array_equal(out.read(), np.arange(64))
    for pid, message in [(1, "different barrier ids"), (16, "outside 0..15")]:
        with pytest.raises(KernelFault, match=message):
            launch(mod, "k", 1, 32 if pid == 16 else 64, out, pid, mem=mem)

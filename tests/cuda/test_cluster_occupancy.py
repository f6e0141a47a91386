"""cuOccupancyMaxPotentialClusterSize (cuda.max_potential_cluster_size) on every driver
present, against the tests' own calculator (helpers/occupancy_reference.py): the portable
limit, non-portable sizes, a kernel's .maxclusterrank and required cluster shape, and the
kernel's resources (registers, shared memory, block size) through its occupancy."""
import ctypes
import itertools

import pytest
from helpers import occupancy_reference as ref

from lowlevel import cuda
from lowlevel.capi.constants import CURESULT
from lowlevel.cuda.launch_config import LaunchConfig, launch_attributes


def _ptx(shared: int, directives: str = "") -> str:
    # 32 values live at once (registers), a static shared array of `shared` bytes
    loads = "\n".join(f"    ld.global.f32 %f{i}, [%rd3+{4 * i}];" for i in range(32))
    sums = "\n".join(f"    fma.rn.f32 %f{i}, %f{i}, %f{(i + 1) % 32}, %f{(i + 5) % 32};" for i in range(32))
    stores = "\n".join(f"    st.global.f32 [%rd3+{4 * i}], %f{i};" for i in range(32))
    return f""".version 8.0
.target sm_90
.address_size 64
.visible .entry clustered(.param .u64 p) {directives}
{{
    .reg .f32 %f<32>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 stage[{shared}];
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 128;
    add.u64 %rd3, %rd1, %rd2;
{loads}
{sums}
    mov.u32 %r2, stage;
    st.shared.f32 [%r2], %f0;
    ld.shared.f32 %f1, [%r2+4];
{stores}
    ret;
}}
"""


def _cc() -> int:
    major, minor = cuda.GPU(0).compute_capability
    cc = 10 * major + minor
    if cc not in ref.GPC_SMS:
        pytest.skip(f"the reference calculator knows the clusters of sm_90, not sm_{cc}")
    return cc


def _kernel(registers: int, shared: int, directives: str = ""):
    f = cuda.Module.from_ptx(_ptx(shared, directives), options={"MAX_REGISTERS": registers}).get_function("clustered")
    return f, {"numRegs": f.num_regs, "sharedSizeBytes": f.shared_size_bytes,
               "maxDynamicSharedSizeBytes": f.max_dynamic_shared_memory,
               "carveout": f.attribute("PREFERRED_SHARED_MEMORY_CARVEOUT")}


@pytest.mark.parametrize("registers, shared", [(32, 1024), (64, 40 * 1024), (255, 12 * 1024)])
def test_potential_cluster_size_against_the_calculator(driver, registers, shared):
    cc = _cc()
    f, attrs = _kernel(registers, shared)
    checked = 0
    for non_portable in (0, 1):
        f.set_attribute("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", non_portable)
        for block, dynamic in itertools.product([32, 128, 256, 512, 1024], [0, 6 * 1024]):
            if ref.max_active_blocks(cc, attrs, block, dynamic)[0] == 0:
                continue        # a block that never fits an SM: the driver's answer is not documented
            expected = ref.max_potential_cluster_size(cc, attrs, block, dynamic, non_portable=bool(non_portable))
            assert cuda.max_potential_cluster_size(f, block, dynamic) == expected, \
                (attrs, non_portable, block, dynamic)
            checked += 1
    assert checked >= 10


def test_the_kernel_bounds_and_required_shape_decide(driver):
    cc = _cc()
    f, attrs = _kernel(32, 1024, ".maxclusterrank 4")
    f.set_attribute("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1)
    assert cuda.max_potential_cluster_size(f, 128) == ref.max_potential_cluster_size(
        cc, attrs, 128, non_portable=True, max_cluster_rank=4) == 4
    g, attrs = _kernel(32, 1024)
    g.set_attribute("REQUIRED_CLUSTER_WIDTH", 2)
    g.set_attribute("REQUIRED_CLUSTER_HEIGHT", 3)
    g.set_attribute("REQUIRED_CLUSTER_DEPTH", 1)
    assert cuda.max_potential_cluster_size(g, 128) == ref.max_potential_cluster_size(
        cc, attrs, 128, required=(2, 3, 1)) == 6


def test_the_configs_cluster_shape_is_ignored(driver):
    cc = _cc()
    f, attrs = _kernel(32, 1024)
    config = LaunchConfig((8, 1, 1), (128, 1, 1), 0, 0, launch_attributes("clustered", cluster=(2, 1, 1)))
    size = ctypes.c_int(-1)
    f.driver.cuOccupancyMaxPotentialClusterSize(ctypes.byref(size), f.handle, config.pointer())
    assert size.value == ref.max_potential_cluster_size(cc, attrs, 128) == cuda.max_potential_cluster_size(f, 128)


def test_bad_arguments_are_refused(driver):
    f, _ = _kernel(32, 1024)
    with pytest.raises(ValueError, match="block"):
        cuda.max_potential_cluster_size(f, 0)
    with pytest.raises(ValueError, match="dynamic_shared"):
        cuda.max_potential_cluster_size(f, 128, -1)
    code = f.driver.cuOccupancyMaxPotentialClusterSize.unchecked(ctypes.byref(ctypes.c_int()), f.handle, None)
    assert code == CURESULT["CUDA_ERROR_INVALID_VALUE"]                # config NULL

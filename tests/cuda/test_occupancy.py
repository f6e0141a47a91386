"""cuOccupancy* on every driver present, against the tests' own occupancy calculator
(helpers/occupancy_reference.py, from cuda_occupancy.h) fed with the kernel's attributes
as the driver reports them (registers from ptxas, static shared memory)."""
import itertools

import pytest
from helpers import occupancy_reference as ref

from lowlevel import cuda

# A kernel that keeps `WIDTH` values live at once (so it wants registers), with a static
# shared array of SHARED bytes it writes through.
WIDTH = 64


def _ptx(shared: int) -> str:
    loads = "\n".join(f"    ld.global.f32 %f{i}, [%rd3+{4 * i}];" for i in range(WIDTH))
    sums = "\n".join(f"    fma.rn.f32 %f{i}, %f{i}, %f{(i + 1) % WIDTH}, %f{(i + 7) % WIDTH};" for i in range(WIDTH))
    stores = "\n".join(f"    st.global.f32 [%rd3+{4 * i}], %f{i};" for i in range(WIDTH))
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry hungry(.param .u64 p)
{{
    .reg .f32 %f<{WIDTH}>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 stage[{shared}];
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, {4 * WIDTH};
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


def _cc():
    major, minor = cuda.GPU(0).compute_capability
    cc = 10 * major + minor
    if cc not in ref.DEVICES:
        pytest.skip(f"the reference calculator knows sm_80 and sm_90, not sm_{cc}")
    return cc


def _kernel(registers: int, shared: int):
    f = cuda.Module.from_ptx(_ptx(shared), options={"MAX_REGISTERS": registers}).get_function("hungry")
    return f, {"numRegs": f.num_regs, "sharedSizeBytes": f.shared_size_bytes,
               "maxDynamicSharedSizeBytes": f.max_dynamic_shared_memory,
               "carveout": f.attribute("PREFERRED_SHARED_MEMORY_CARVEOUT")}


@pytest.mark.parametrize("registers, shared", [(24, 1024), (40, 12 * 1024), (255, 40 * 1024)])
def test_active_blocks_per_sm(driver, registers, shared):
    cc = _cc()
    f, attrs = _kernel(registers, shared)
    for block, dynamic in itertools.product([32, 64, 96, 128, 256, 384, 512, 1024], [0, 4096]):
        expected = ref.max_active_blocks(cc, attrs, block, dynamic)[0]
        assert f.occupancy(block, dynamic) == expected, (attrs, block, dynamic)


def test_the_opt_in_and_the_carveout_change_occupancy(driver):
    cc = _cc()
    f, _ = _kernel(32, 1024)
    f.max_dynamic_shared_memory = 100 * 1024
    f.set_attribute("PREFERRED_SHARED_MEMORY_CARVEOUT", 50)
    attrs = {"numRegs": f.num_regs, "sharedSizeBytes": f.shared_size_bytes,
             "maxDynamicSharedSizeBytes": 100 * 1024, "carveout": 50}
    for dynamic in (0, 30 * 1024, 60 * 1024, 100 * 1024, 100 * 1024 + 1):
        assert f.occupancy(128, dynamic) == ref.max_active_blocks(cc, attrs, 128, dynamic)[0], dynamic


def test_the_best_block_size(driver):
    cc = _cc()
    f, attrs = _kernel(32, 12 * 1024)
    asked = []

    def per_block(threads):
        asked.append(threads)
        return 16 * threads
    assert cuda.max_potential_block_size(f) == ref.max_potential_block_size(cc, attrs, lambda b: 0)
    assert cuda.max_potential_block_size(f, per_block) == ref.max_potential_block_size(cc, attrs, per_block)
    assert asked and all(t % 32 == 0 for t in asked)        # the driver called the Python callable
    assert cuda.max_potential_block_size(f, 2048, block_size_limit=200) == \
        ref.max_potential_block_size(cc, attrs, lambda b: 2048, 200)


def test_an_exception_in_the_callback_is_raised(driver):
    f, _ = _kernel(32, 1024)
    with pytest.raises(ZeroDivisionError):
        cuda.max_potential_block_size(f, lambda threads: 1 // 0)
    with pytest.raises(ValueError, match="dynamic_shared"):
        cuda.max_potential_block_size(f, lambda threads: -1)


def test_available_dynamic_shared_memory(driver):
    cc = _cc()
    f, attrs = _kernel(32, 1024)
    for blocks, block in itertools.product([1, 2, 4, 8], [64, 256]):
        assert cuda.available_dynamic_shared(f, blocks, block) == \
            ref.available_dynamic_smem(cc, attrs, blocks, block), (blocks, block)


def test_active_clusters(driver):
    f, _ = _kernel(32, 1024)
    sms = cuda.GPU(0).attribute("MULTIPROCESSOR_COUNT")
    for size in (1, 2, 4, 8):
        clusters = cuda.max_active_clusters(f, 64, 128, (size, 1, 1))
        assert 0 < clusters * size <= f.occupancy(128) * sms
    with pytest.raises(cuda.CudaError) as refused:
        cuda.max_active_clusters(f, 64, 128)
    assert refused.value.name == "CUDA_ERROR_INVALID_CLUSTER_SIZE"


def test_registers_limit_the_block_size(driver):
    cc = _cc()
    f, attrs = _kernel(255, 1024)
    assert attrs["numRegs"] > 64                       # 1024 threads of it do not fit
    fits = max(b for b in range(32, 1025, 32) if ref.blocks_regs(ref.DEVICES[cc], attrs, b) > 0)
    assert f.max_threads_per_block == fits < 1024
    with pytest.raises(cuda.CudaError) as refused:
        f.launch(1, 1024, (cuda.mem_alloc(4 * 64 * 1024),))
    assert refused.value.name == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"

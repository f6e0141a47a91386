"""The driver's JIT compiles a module whole-program, and ptxas decides what it accepts:
`.target compute_XY` (which ptxas reads as sm_XY) and PTX ISA below 3.1 (which ptxas
compiles whole-program, never as the relocatable code nvJitLink asks for) load and run.
ptxas is the oracle: each text is first checked against it where it is installed."""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download
from helpers.ptxas import ptxas_refusal

from lowlevel import cuda


def _store_42(version: str, target: str) -> str:
    return f"""
.version {version}
.target {target}
.address_size 64
.visible .entry store_42(.param .u64 out)
{{
    .reg .u32 %r<2>;
    .reg .u64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 42;
    st.global.u32 [%rd2], %r1;
    ret;
}}
"""


@pytest.mark.parametrize("version, target", [
    ("8.0", "compute_90"), ("8.0", "compute_80"), ("3.0", "sm_30"), ("3.0", "compute_30"),
    ("2.3", "sm_20"), ("7.0", "compute_70"),
])
def test_ptx_that_ptxas_accepts_loads_and_runs(driver, version, target):
    ptx = _store_42(version, target)
    refusal = ptxas_refusal(ptx)
    assert refusal in ("", None), f"ptxas refuses the test's own PTX:\n{refusal}"
    major, minor = cuda.GPU(0).compute_capability
    if int(target.split("_")[1]) > 10 * major + minor:
        pytest.skip(f"{target} is newer than this device")
    out = device_poisoned(4)
    cuda.Module.from_ptx(ptx).get_function("store_42").launch(1, 1, (out,))
    cuda.synchronize()
    assert download(out, 1, np.uint32)[0] == 42


def test_old_ptx_goes_to_the_whole_program_ptxas(driver):
    if driver.kind != "emu":
        pytest.skip("looks at the emulated JIT's log")
    if ptxas_refusal(_store_42("3.0", "sm_30")) is None:
        pytest.skip("no standalone ptxas: pip install nvidia-cuda-nvcc")
    module = cuda.Module.from_ptx(_store_42("3.0", "sm_30"))
    assert "assembled by ptxas" in module.info_log and "nvJitLink" not in module.info_log, module.info_log


def test_compute_target_newer_than_the_device_is_refused(driver):
    if driver.kind != "emu":
        pytest.skip("the emulated device is sm_90")
    ptx = _store_42("8.0", "compute_100")
    assert ptxas_refusal(ptx) != ""                      # ptxas -arch=sm_90 refuses it too
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(ptx)
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"


@pytest.mark.parametrize("version, target", [
    ("5.0", "sm_80"), ("7.0", "sm_80"), ("3.0", "sm_35"), ("3.1", "sm_35"), ("7.7", "compute_90"),
    ("7.8", "compute_90"), ("2.0", "sm_20"), ("2.3", "sm_20"), ("6.2", "sm_75"),
])
def test_the_emulator_s_own_checks_agree_with_ptxas_on_version_and_target(version, target):
    """Without an assembler the parser decides: it refuses a target the PTX ISA is too old
    for, and `.address_size` before ISA 2.3, as ptxas does."""
    from lowlevel.emu.ptx.errors import PtxError          # noqa: PLC0415  (the emulator's parser, only here)
    from lowlevel.emu.ptx.parser import parse_ptx         # noqa: PLC0415
    ptx = _store_42(version, target)
    refusal = ptxas_refusal(ptx)
    if refusal is None:
        pytest.skip("no standalone ptxas: pip install nvidia-cuda-nvcc")
    try:
        parse_ptx(ptx)
        parsed = True
    except PtxError:
        parsed = False
    assert parsed == (refusal == ""), refusal

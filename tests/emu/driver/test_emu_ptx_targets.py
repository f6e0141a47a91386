"""PTX for a newer GPU, or for another architecture-specific one, is refused at load; from a
fatbin the driver takes the newest PTX the device can run.
"""
import struct

import pytest
from lowlevel import cuda
from lowlevel.capi import images


def emu_only(driver):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")


# --- PTX for a newer GPU ---------------------------------------------------------------------

def _ptx(target):
    return f".version 8.0\n.target {target}\n.address_size 64\n.visible .entry k() {{ ret; }}\n"


@pytest.mark.parametrize("cc, target, runs", [
    ("8.0", "sm_80", True), ("8.0", "sm_75", True), ("8.0", "sm_86", False),
    ("8.0", "sm_90", False), ("8.0", "sm_90a", False), ("9.0", "sm_90a", True),
    ("10.0", "sm_90", True), ("10.0", "sm_90a", False), ("9.0", "sm_100f", False),
])
def test_ptx_for_a_newer_or_another_specific_gpu_is_refused_at_load(driver, monkeypatch, cc, target, runs):
    emu_only(driver)
    monkeypatch.setenv("LOWLEVEL_EMU_CC", cc)
    if runs:
        cuda.Module.from_ptx(_ptx(target)).get_function("k").launch(1, 1, ())
        cuda.synchronize()
        return
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(_ptx(target))
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    assert target in info.value.log and f"sm_{cc.replace('.', '')}" in info.value.log


def _fatbin(*entries) -> bytes:
    """A fatbin of uncompressed PTX entries (arch, text), laid out as images.py reads it."""
    body = b""
    for arch, text in entries:
        payload = text.encode() + b"\0"
        head = bytearray(72)
        struct.pack_into("<HHIQ", head, 0, images.KIND_PTX, 0x101, 72, len(payload))
        struct.pack_into("<I", head, 28, arch)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", images.FATBIN_MAGIC, 1, 16, len(body)) + body


def test_a_fatbin_gives_the_newest_ptx_the_device_can_run():
    data = _fatbin((75, _ptx("sm_75")), (90, _ptx("sm_90")), (80, _ptx("sm_80")))
    assert ".target sm_80" in images.ptx_from_fatbin(data, 86)
    assert ".target sm_90" in images.ptx_from_fatbin(data, 90)
    assert ".target sm_75" in images.ptx_from_fatbin(data, 75)
    with pytest.raises(images.ImageError) as info:
        images.ptx_from_fatbin(data, 70)
    assert info.value.code_name == "CUDA_ERROR_NO_BINARY_FOR_GPU" and "sm_75" in str(info.value)
    specific = _fatbin((80, _ptx("sm_80")), (90, _ptx("sm_90a")))
    assert ".target sm_90a" in images.ptx_from_fatbin(specific, 90)
    assert ".target sm_80" in images.ptx_from_fatbin(specific, 100)   # sm_90a is for sm_90 only


def test_a_fatbin_whose_ptx_is_all_too_new_is_refused_at_load(driver, monkeypatch, tmp_path):
    emu_only(driver)
    monkeypatch.setenv("LOWLEVEL_EMU_CC", "8.0")
    path = tmp_path / "k.fatbin"
    path.write_bytes(_fatbin((90, _ptx("sm_90")), (100, _ptx("sm_100"))))
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.load(path)
    assert info.value.name == "CUDA_ERROR_NO_BINARY_FOR_GPU"
    path.write_bytes(_fatbin((80, _ptx("sm_80")), (90, _ptx("sm_90"))))
    cuda.Module.load(path).get_function("k").launch(1, 1, ())
    cuda.synchronize()

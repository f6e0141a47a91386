"""cuDeviceGetAttribute reads a table made once per device and LOWLEVEL_EMU_CC (it rebuilt
it at every call): every attribute answers as a freshly built table says, under each
compute capability, and a change of LOWLEVEL_EMU_CC is seen at the next call."""
import ctypes

import pytest

from lowlevel import cuda
from lowlevel.capi.constants import DEVICE_ATTRIBUTE
from lowlevel.emu.driver import device


def _get(drv, number: int) -> int:
    value = ctypes.c_int(-12345)
    drv.cuDeviceGetAttribute(ctypes.byref(value), number, 0)
    return value.value


@pytest.mark.parametrize("cc", ("8.0", "9.0", "10.0"))
def test_every_attribute_answers_as_a_fresh_table(driver, monkeypatch, cc):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")
    monkeypatch.setenv("LOWLEVEL_EMU_CC", cc)
    drv = cuda.get_driver()
    fresh = device.build_attributes(0)
    assert sorted(fresh) == sorted(set(DEVICE_ATTRIBUTE.values()))      # some names alias
    for _ in range(2):                                  # the first call builds, the second reads
        got = {number: _get(drv, number) for number in fresh}
        assert got == fresh
    major, minor = (int(p) for p in cc.split("."))
    assert got[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"]] == major
    assert got[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"]] == minor
    assert got[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH"]] == int(major >= 9)


def test_the_table_is_made_once_and_cannot_be_changed(driver, monkeypatch):
    if driver.kind != "emu":
        pytest.skip("looks inside the emulated GPU")
    monkeypatch.setenv("LOWLEVEL_EMU_CC", "9.0")
    table = device.attributes(0)
    assert device.attributes(0) is table                # cached
    with pytest.raises(TypeError):
        table[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_WARP_SIZE"]] = 64
    monkeypatch.setenv("LOWLEVEL_EMU_CC", "8.0")         # another key: another table
    other = device.attributes(0)
    assert other is not table
    assert other[DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"]] == 8
    assert _get(cuda.get_driver(), DEVICE_ATTRIBUTE["CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"]) == 8

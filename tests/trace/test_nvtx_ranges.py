"""NVTX ranges while a profile runs: one per op (category "dispatch") and per driver or
cuBLAS call ("ctypes"), balanced; none when LOWLEVEL_NVTX=0 or outside a profile."""
import sys
import types

import numpy as np
import pytest

import lowlevel as ll
from lowlevel.trace import nvtx_ranges


@pytest.fixture
def fake_nvtx(monkeypatch):
    """An nvtx module that records its calls (the real one does nothing without Nsight)."""
    calls = []
    module = types.SimpleNamespace(
        push_range=lambda message, domain, category: calls.append(("push", message, domain, category)),
        pop_range=lambda domain: calls.append(("pop", domain)),
        mark=lambda message, domain, category: calls.append(("mark", message, domain, category)))
    monkeypatch.setitem(sys.modules, "nvtx", module)
    nvtx_ranges.reset()
    yield calls
    nvtx_ranges.reset()


def test_ranges_for_each_op_and_call(driver, fake_nvtx, monkeypatch, rng):
    monkeypatch.delenv("LOWLEVEL_NVTX", raising=False)
    x = rng.standard_normal(64).astype(np.float32)
    a = ll.tensor(x, device="cuda")
    a.relu()
    fake_nvtx.clear()
    with ll.profile():
        b = a.relu()
    np.testing.assert_array_equal(b.numpy(), np.maximum(x, 0))
    pushes = [c for c in fake_nvtx if c[0] == "push"]
    assert ("push", "relu", "lowlevel", "dispatch") in pushes
    assert ("push", "cuLaunchKernel", "lowlevel", "ctypes") in pushes
    assert ("mark", "validated relu", "lowlevel", "frontend") in fake_nvtx
    assert len(pushes) == sum(c[0] == "pop" for c in fake_nvtx)
    depth = 0
    for c in fake_nvtx:
        depth += {"push": 1, "pop": -1}.get(c[0], 0)
        assert depth >= 0
    fake_nvtx.clear()
    a.relu()                                         # no profile: no range
    assert fake_nvtx == []


def test_lowlevel_nvtx_0_turns_them_off(fake_nvtx, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_NVTX", "0")
    with ll.profile() as p:
        ll.ones(4) + 1
    assert fake_nvtx == [] and not p.timeline.nvtx

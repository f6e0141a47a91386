"""Interchange with other libraries, on every driver present: DLPack both ways (numpy, and
CUDA tensors sharing device memory), refusals that leave the producer's capsule intact, and
__cuda_array_interface__ v3 with the stream the data is valid on."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import cuda


def test_cuda_array_interface(driver):
    t = ll.zeros(3, 5, device="cuda")
    iface = t.T.__cuda_array_interface__
    assert iface["version"] == 3 and iface["shape"] == (5, 3) and iface["typestr"] == "<f4"
    assert iface["strides"] == (4, 20) and iface["data"][0] == t.data_ptr and iface["stream"] == 1
    s = cuda.Stream()
    with cuda.stream(s):
        assert t.__cuda_array_interface__["stream"] == s.handle
    with pytest.raises(AttributeError):
        ll.zeros(2).__cuda_array_interface__


def test_dlpack_with_numpy(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = ll.from_dlpack(x)                          # numpy -> lowlevel, no copy
    x[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0
    back = np.from_dlpack(ll.tensor(x).T)          # lowlevel -> numpy, a transposed view
    np.testing.assert_array_equal(back, x.T)
    assert ll.tensor(x).__dlpack_device__() == (1, 0)


def test_dlpack_on_cuda(driver, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = ll.tensor(x, device="cuda")
    shared = ll.from_dlpack(t[1:3])                # shares t's device memory
    assert shared.device.type == "cuda" and shared.data_ptr == t[1:3].data_ptr
    np.testing.assert_array_equal(shared.numpy(), x[1:3])
    assert t.__dlpack_device__() == (2, 0)


def test_dlpack_refusals_leave_the_producer_intact(rng):
    x = rng.standard_normal(6)[::-1]                # negative strides
    with pytest.raises(ValueError, match="negative strides"):
        ll.from_dlpack(x)
    capsule = x.copy().__dlpack__()
    assert ll.from_dlpack(capsule).numel() == 6     # an untouched capsule is still usable

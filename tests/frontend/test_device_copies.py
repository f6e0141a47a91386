"""A Device copied, deep-copied or pickled is an equal Device, and the interned ones stay
what they are (object's own way called Device() without a spec, which is the interned CPU
Device, then overwrote its type and index: Device("cpu") became cuda:0)."""
import copy
import pickle

import lowlevel as ll


def test_copies_of_a_device_are_equal_and_leave_the_interned_ones_alone():
    for spec in ("cuda", "cpu"):      # (no other device: Device("cuda:1") would end only_cuda_0)
        device = ll.Device(spec)
        for made in (copy.copy(device), copy.deepcopy(device), pickle.loads(pickle.dumps(device))):
            assert made == device and repr(made) == repr(device) and made.key_bit == device.key_bit
    assert repr(ll.Device("cpu")) == "cpu" and ll.Device("cpu").index is None
    assert repr(ll.Device("cuda")) == "cuda:0"


def test_a_tensor_deep_copied_keeps_its_device():
    t = ll.zeros(2)
    assert copy.deepcopy(t.device) == t.device == "cpu"
    assert ll.Device("cpu").type == "cpu"

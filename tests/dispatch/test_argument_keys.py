"""The key set of a call from its arguments: a lowlevel tensor's device carries its backend
key's bit (Device.key_bit); anything else with a `device.type` is read duck-typed, as
before; requires_grad, set at any time, adds Autograd."""
import types

import pytest

import lowlevel as ll
from lowlevel import dispatch


@pytest.fixture(scope="module")
def probe():
    """An op with a CPU kernel that returns what it was given."""
    dispatch.register_kernel("probe_keys", dispatch.CPU, lambda *args: args)
    return lambda *args: dispatch.call("probe_keys", *args)


def _duck(kind="cpu", **attributes):
    return types.SimpleNamespace(device=types.SimpleNamespace(type=kind), dtype=ll.float32, **attributes)


def test_a_duck_typed_argument_is_dispatched_by_its_device_type(probe):
    duck = _duck()                                      # no key_bit, no requires_grad
    assert probe(duck) == (duck,)
    t = ll.zeros(2)
    assert probe(duck, t, 3) == (duck, t, 3)
    assert dispatch.keyset_bits((duck, t)) & dispatch.CPU.bit


def test_a_duck_typed_argument_of_an_unknown_device_type_is_refused(probe):
    with pytest.raises(RuntimeError, match="^no backend is registered for device type 'nodev'$"):
        probe(_duck("nodev"))


def test_a_tensor_passed_by_keyword_chooses_the_backend():
    dispatch.register_kernel("probe_keywords", dispatch.CPU, lambda *args, **kwargs: (args, kwargs))
    t = ll.zeros(2)
    assert dispatch.call("probe_keywords", dim=1, other=t) == ((), {"dim": 1, "other": t})
    with pytest.raises(RuntimeError, match="^no backend is registered for device type 'nodev'$"):
        dispatch.call("probe_keywords", t, other=_duck("nodev"))


def test_requires_grad_of_any_argument_adds_autograd():
    t = ll.zeros(2)
    assert not dispatch.keyset_for((t,)).bits & dispatch.Autograd.bit
    t.requires_grad_(True)
    assert dispatch.Autograd in dispatch.keyset_for((t,))
    assert dispatch.Autograd in dispatch.keyset_for((_duck(requires_grad=True),))
    assert dispatch.Autograd not in dispatch.keyset_for((_duck(requires_grad=1),))     # only True, as before


def test_a_device_knows_its_backends_bit():
    assert ll.Device("cpu").key_bit == dispatch.CPU.bit
    assert ll.Device("cuda").key_bit == dispatch.CUDA.bit
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        ll.Device("cpu").nothing


def test_include_and_exclude_of_one_thread_leave_the_others_alone():
    """A call reads the thread's sets only while some include/exclude block is open (on any
    thread): a block on one thread changes nothing on another, and its own calls see it
    until it ends, nested blocks of one key included."""
    import threading
    a = ll.ones(2, requires_grad=True)
    inside, other, ready, done = threading.Event(), {}, threading.Event(), threading.Event()

    def elsewhere():
        inside.wait()
        other["grad_fn"] = (a + a).grad_fn
        ready.set()
        done.wait()
    worker = threading.Thread(target=elsewhere)
    worker.start()
    with dispatch.exclude(dispatch.Autograd):
        inside.set()
        with dispatch.exclude(dispatch.Autograd):
            assert (a + a).grad_fn is None
        assert (a + a).grad_fn is None                  # the outer block still excludes
        ready.wait()
    done.set()
    worker.join()
    assert other["grad_fn"] is not None                 # the other thread recorded its call
    assert (a + a).grad_fn is not None                  # and this one does again

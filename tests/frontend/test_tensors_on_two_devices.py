"""Tensors on cuda:1: their memory and kernels on device 1, copies between devices, and ops
on two devices refused. Run in a fresh interpreter with two devices (helpers/two_devices.py)."""
import numpy as np
import pytest
from helpers.two_devices import main, run_checks

import lowlevel as ll
from lowlevel import cuda


def test_tensors_on_two_devices(driver):
    run_checks(__file__, driver.kind, [name for name in globals() if name.startswith("check_")])


def _owner(t) -> int:
    return cuda.pointer_attributes(t.data_ptr).device_ordinal


def check_ops_on_cuda_0_while_device_1_is_current():
    """Run first, before any tensor of cuda:1 exists (the ops' guard has a fast case for a
    program that uses only device 0): the op still runs on its tensors' device."""
    cuda.GPU(1).set_current()
    try:
        x = np.arange(4, dtype=np.float32)
        a = ll.tensor(x, device="cuda:0")
        out = a + a
        assert out.device == "cuda:0" and _owner(out) == 0 and _owner(a * 3.0) == 0
        np.testing.assert_array_equal(out.numpy(), 2 * x)
    finally:
        cuda.GPU(0).set_current()


def check_ops_on_cuda_1():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.standard_normal((5, 4)).astype(np.float32)
    a, b = ll.from_numpy(x).to("cuda:1"), ll.from_numpy(y).to("cuda:1")
    assert a.device == "cuda:1" and _owner(a) == 1
    c = (a @ b).softmax(1) + 1.0
    assert c.device == "cuda:1" and _owner(c) == 1
    e = np.exp(x @ y - (x @ y).max(1, keepdims=True))
    np.testing.assert_allclose(c.numpy(), e / e.sum(1, keepdims=True) + 1, rtol=1e-5)
    np.testing.assert_allclose(a.sum(0).numpy(), x.sum(0), rtol=1e-5)
    z = ll.zeros(3, device="cuda:1")
    z.add_(ll.ones(3, device="cuda:1"))
    assert _owner(z) == 1 and z.numpy().tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_array_equal(ll.cat([a, a], 0).numpy(), np.concatenate([x, x]))


def check_copies_between_devices():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = ll.from_numpy(x).to("cuda")
    b = a.to("cuda:1")
    assert (b.device, _owner(b), _owner(a)) == ("cuda:1", 1, 0)
    np.testing.assert_array_equal(b.numpy(), x)
    back = (b * 2).to("cuda:0")
    assert back.device == "cuda:0" and _owner(back) == 0
    np.testing.assert_array_equal(back.numpy(), 2 * x)


def check_ops_on_two_devices_are_refused():
    a, b = ll.ones(4, device="cuda:0"), ll.ones(4, device="cuda:1")
    for op in (lambda: a + b, lambda: a * b, lambda: ll.where(a > 0, a, b), lambda: ll.maximum(b, a)):
        with pytest.raises(ValueError, match="different devices"):
            op()
    with pytest.raises(ValueError, match="invalid device ordinal"):
        ll.ones(2, device="cuda:2")


def check_a_stream_of_device_0_does_not_carry_over():
    s = cuda.Stream()                      # on device 0
    with cuda.stream(s):
        t = ll.ones(5, device="cuda:1") * 3.0      # runs on device 1's legacy stream
        u = ll.ones(5, device="cuda:0") * 2.0      # on s
    assert t.numpy().tolist() == [3.0] * 5 and u.numpy().tolist() == [2.0] * 5



def check_a_creation_on_cuda_1_is_ordered_on_cuda_1():
    """ll.ones(device="cuda:1") inside a stream of device 0 fills on device 1, in the order
    of device 1's work: with device 0's stream held up, its values are there at once (the
    fill once went on the held stream, and a read on device 1 raced it)."""
    import threading
    s, release = cuda.Stream(), threading.Event()
    s.add_callback(lambda: release.wait(10))           # device 0's stream is held up
    try:
        with cuda.stream(s):
            t = ll.ones(5, device="cuda:1") * 3.0
        assert t.numpy().tolist() == [3.0] * 5
    finally:
        release.set()
    s.synchronize()


def check_the_fast_ops_run_on_their_tensors_device():
    """The element-wise ops' common cases, reductions, softmax and matmul call the dispatcher
    without the device guard only where their tensors' device is current: on cuda:1 with
    device 0 current and on cuda:0 with device 1 current, each result is made and computed
    on its operands' device."""
    x = np.arange(-3, 3, dtype=np.float32)
    m = x.reshape(2, 3)
    for ordinal, current in ((1, 0), (0, 1)):
        a = ll.from_numpy(x).to(f"cuda:{ordinal}")
        t = a.reshape(2, 3)
        cuda.GPU(current).set_current()
        try:
            e = np.exp(m - m.max(1, keepdims=True))
            outs = {"add": (a + a, x + x), "mul": (a * 2.0, x * 2), "maximum": (ll.maximum(a, 0.5), np.maximum(x, 0.5)),
                    "relu": (a.relu(), np.maximum(x, 0)), "exp": (ll.exp(a), np.exp(x)), "sum": (t.sum(1), m.sum(1)),
                    "softmax": (t.softmax(1), e / e.sum(1, keepdims=True)), "matmul": (t @ t.T, m @ m.T)}
            assert {name: _owner(out) for name, (out, _) in outs.items()} == {name: ordinal for name in outs}
        finally:
            cuda.GPU(0).set_current()
        for out, expected in outs.values():
            np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


if __name__ == "__main__":
    main(globals())

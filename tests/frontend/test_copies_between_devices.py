"""t.to("cuda:1") from cuda:0 is a device-to-device copy (cuMemcpyPeerAsync), not a round
trip through host memory, and stream-ordered as PyTorch's: the destination's current stream
waits for an event recorded on the source's current stream, then copies (and the source's
stream waits for the copy in turn, before its memory may be reused). The driver calls
are read from the trace's recorder. Two devices: run in a fresh interpreter
(helpers/two_devices.py)."""
import re

import numpy as np
from helpers.two_devices import main, run_checks

import lowlevel as ll
from lowlevel import cuda, trace

HOST_COPY = re.compile(r"cuMemcpy(DtoH|HtoD|AtoH|HtoA|2D|3D|Async|_v2|$)")


def test_copies_between_devices(driver):
    run_checks(__file__, driver.kind, [name for name in globals() if name.startswith("check_")])


# ---- the checks, run in the fresh interpreter -------------------------------------------------
def calls_of(step):
    """(the result of step(), the driver functions it called, in order)."""
    with trace.Recorder() as recorder:
        result = step()
    return result, [c["symbol"] for c in recorder.calls]


def check_a_copy_to_another_device_stays_on_the_devices():
    x = np.random.default_rng(11).standard_normal((5, 7)).astype(np.float32)
    a = ll.from_numpy(x).to("cuda:0")
    cuda.synchronize()
    for source, expected in ((a, x), (a.T, x.T), (a[1:4, ::2], x[1:4, ::2])):
        b, symbols = calls_of(lambda s=source: s.to("cuda:1"))
        assert "cuMemcpyPeerAsync" in symbols, symbols
        assert not [s for s in symbols if HOST_COPY.match(s)], symbols
        assert b.device == "cuda:1" and cuda.pointer_attributes(b.data_ptr).device_ordinal == 1
        np.testing.assert_array_equal(b.numpy(), expected)
    back = a.to("cuda:1").to("cuda:0")
    assert back.device == "cuda:0"
    np.testing.assert_array_equal(back.numpy(), x)


def check_the_destination_stream_waits_for_the_source_stream():
    x = np.random.default_rng(12).standard_normal(1 << 14).astype(np.float32)
    cuda.GPU(0).set_current()
    s0 = cuda.Stream()
    cuda.GPU(1).set_current()
    s1 = cuda.Stream()
    cuda.GPU(0).set_current()
    a = ll.from_numpy(x).to("cuda:0")
    cuda.synchronize()
    with cuda.stream(s0):
        made = a * 3.0 + 1.0                      # queued on s0: the copy must follow it
    with cuda.stream(s1):                         # device 1's current stream (device 0 is current)
        b, symbols = calls_of(lambda: made.to("cuda:1"))
    order = [s for s in symbols if s in ("cuEventRecord", "cuStreamWaitEvent", "cuMemcpyPeerAsync")]
    # device 1's stream waits for s0, copies; then s0 waits for the copy (src is read till then)
    assert order == ["cuEventRecord", "cuStreamWaitEvent", "cuMemcpyPeerAsync", "cuEventRecord",
                     "cuStreamWaitEvent"], symbols
    with cuda.stream(s1):
        got = b.numpy()                           # read in s1's order, after the copy
    np.testing.assert_array_equal(got, x * np.float32(3) + np.float32(1))


def check_gradients_flow_back_across_the_copy():
    x = np.random.default_rng(13).standard_normal(40).astype(np.float32)
    a = ll.from_numpy(x).to("cuda:0")
    a.requires_grad = True
    (a.to("cuda:1") * 2.0).sum().backward()
    assert a.grad.device == "cuda:0"
    np.testing.assert_array_equal(a.grad.numpy(), np.full(40, 2, np.float32))


def check_a_stream_waits_for_an_event_of_another_device():
    # cuStreamWaitEvent: "the event may be from a different context or device than stream"
    cuda.GPU(0).set_current()
    event = cuda.Event(timing=False).record()
    cuda.GPU(1).set_current()
    stream = cuda.Stream()
    stream.wait(event)                            # was CUDA_ERROR_INVALID_HANDLE on the emulated GPU
    stream.synchronize()
    cuda.GPU(0).set_current()


if __name__ == "__main__":
    main(globals())

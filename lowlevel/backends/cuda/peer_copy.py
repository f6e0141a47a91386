"""A copy of a CUDA tensor to another CUDA device: cuMemcpyPeerAsync, device to device, with
no round trip through host memory.

Stream-ordered as PyTorch's cross-device copies are: an event recorded on the source
device's current stream (after the work that made the tensor) is waited for by the
destination device's current stream, and the copy is queued there, so the new tensor is in
that stream's order like any tensor made on the destination device. The source's stream in
turn waits for the copy: the source's memory, freed later in its own stream's order, is not
handed out again while the copy still reads it (the allocator's record_stream knows only
streams of the block's own device).
"""
from ...cuda import Event, Stream, current_stream, memcpy_peer
from ...cuda.context import ensure_context
from ...cuda.graph import refuse_while_capturing
from ...frontend.creation import empty
from ...frontend.device import Device, device_guard
from ...frontend.tensor import Tensor


def _current_stream() -> Stream:
    ensure_context()                    # the device guard names a device; make its context current
    return current_stream() or Stream.legacy()


def peer_copy(src: Tensor, device: Device) -> Tensor:
    """`src` (contiguous, on the current device: the op runs under its device's guard) as a
    new tensor on CUDA `device`."""
    out = empty(src.shape, dtype=src.dtype, device=device)
    nbytes = out.numel() * src.dtype.itemsize
    if not nbytes:
        return out
    refuse_while_capturing("a copy between devices (to('cuda:N'))")
    source = _current_stream()
    made = Event(timing=False).record(source)                  # src's work so far
    with device_guard(device.index or 0):
        destination = _current_stream()
        destination.wait(made)
        memcpy_peer(out.data_ptr, src.data_ptr, nbytes, dst_device=device.index or 0,
                    src_device=src.device.index or 0, stream=destination)
        copied = Event(timing=False).record(destination)
    _current_stream().wait(copied)
    return out

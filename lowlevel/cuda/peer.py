"""Several devices: peer access and copies between devices' memories.

Device memory belongs to the device it was allocated on (the current device then: see
`GPU.set_current()`); addresses are unified, so `pointer_attributes(ptr).device_ordinal`
names the owner. `memcpy_peer` copies between two devices whether or not peer access is
enabled; `enable_peer_access(peer)` lets kernels of the current device reach `peer`'s memory
(on a GPU: the emulated GPU's kernels cannot, see lowlevel/emu/driver/peer.py).
"""
import ctypes
from ctypes import c_size_t

from .checked import c_integer, integer
from .context import ensure_context, primary_context_handle
from .driver import get_driver
from .memory import DeviceAllocation, device_pointer
from .stream import stream_handle


def can_access_peer(device: int, peer: int) -> bool:
    """Whether kernels on `device` can access memory of `peer` (cuDeviceCanAccessPeer)."""
    result = ctypes.c_int()
    get_driver().cuDeviceCanAccessPeer(ctypes.byref(result), integer(device, "device"), integer(peer, "peer"))
    return bool(result.value)


def enable_peer_access(peer: int) -> None:
    """Let the current device's kernels access `peer`'s memory (cuCtxEnablePeerAccess)."""
    drv, _ = ensure_context()
    drv.cuCtxEnablePeerAccess(primary_context_handle(integer(peer, "peer")), 0)


def disable_peer_access(peer: int) -> None:
    drv, _ = ensure_context()
    drv.cuCtxDisablePeerAccess(primary_context_handle(integer(peer, "peer")))


def _context_of(x, device, what: str) -> int:
    if device is not None:
        return primary_context_handle(integer(device, f"memcpy_peer: {what}_device"))
    if isinstance(x, DeviceAllocation):
        x.check_context()
        return x.context.handle
    raise ValueError(f"memcpy_peer: {what}_device must be given for a plain {what} pointer")


def memcpy_peer(dst, src, nbytes: int, *, dst_device: int | None = None, src_device: int | None = None,
                stream=None) -> None:
    """Copy `nbytes` from `src` to `dst` on other devices (cuMemcpyPeer; with a stream of the
    current device, cuMemcpyPeerAsync). A DeviceAllocation knows its device; a plain pointer
    needs `dst_device` / `src_device`."""
    nbytes = c_integer(nbytes, c_size_t, "memcpy_peer: nbytes")
    for x, what in ((dst, "destination"), (src, "source")):
        if isinstance(x, DeviceAllocation) and nbytes > x.size:
            raise ValueError(f"memcpy_peer: {nbytes} bytes do not fit the {x.size}-byte {what} allocation")
    dst_ctx, src_ctx = _context_of(dst, dst_device, "dst"), _context_of(src, src_device, "src")
    handle = stream_handle(stream, "memcpy_peer: stream")
    drv, _ = ensure_context()
    if stream is None:
        drv.cuMemcpyPeer(device_pointer(dst), dst_ctx, device_pointer(src), src_ctx, nbytes)
    else:
        drv.cuMemcpyPeerAsync(device_pointer(dst), dst_ctx, device_pointer(src), src_ctx, nbytes, handle)


__all__ = ["can_access_peer", "disable_peer_access", "enable_peer_access", "memcpy_peer"]

"""Several devices: peer access between their contexts, and copies between their memories.

Every emulated device can access every other's memory (cuDeviceCanAccessPeer is 1 for two
different devices, as on an NVLink-connected pair); cuCtxEnablePeerAccess and
cuCtxDisablePeerAccess record it, with the driver's codes for enabling twice and for
disabling what was not enabled. cuMemcpyPeer(Async) copies between two contexts' memories
whether or not peer access is enabled, as the driver does (staging through the host).

With peer access enabled, a kernel of the context reaches the peer's allocations through
their (unified) addresses: loads, stores and atomics, as over NVLink; without it, or once
disabled, such an access faults (CUDA_ERROR_ILLEGAL_ADDRESS). The devices' arenas are one
mapping (engine/memory.py, unified_arena), so the engine's lookup only has to admit the
peer's allocations (DeviceMemory.peer_memories, asked when an access misses its own).
"""
import ctypes
import functools

from ..engine.memory import AccessFault
from .context import Context, api, context_by_handle, current, device_ordinal, live
from .entry import write_out
from .errors import EmuError
from .memory import modelled
from ..tools.timemodel import peer_segment


@api
def cuDeviceCanAccessPeer(result_out, dev, peer):
    device_ordinal(dev)
    device_ordinal(peer)
    write_out(ctypes.c_int, result_out, int(dev != peer))


def _peer(ctx: Context, handle: int) -> Context:
    peer = context_by_handle(handle)
    if peer is ctx:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT", "the peer context is the current context")
    return peer


def _enabled(ctx: Context, peer: Context) -> bool:
    # A peer that was reset since is a fresh context: access to it is gone
    return any(p is peer for p in ctx.peers)


@api
def cuCtxEnablePeerAccess(handle, flags):
    ctx = current()
    peer = _peer(ctx, handle)
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuCtxEnablePeerAccess: flags must be 0, got {flags:#x}")
    if peer.ordinal == ctx.ordinal:
        raise EmuError("CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "both contexts belong to one device")
    if _enabled(ctx, peer):
        raise EmuError("CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
                       f"access from device {ctx.ordinal} to device {peer.ordinal} is enabled already")
    ctx.peers = [p for p in ctx.peers if live(p) is p] + [peer]
    ctx.memory.peer_memories = functools.partial(_reachable, ctx)


def _reachable(ctx: Context) -> tuple:
    """The memories ctx's kernels may reach besides its own: its enabled peers still alive."""
    return tuple(p.memory for p in ctx.peers if live(p) is p)


@api
def cuCtxDisablePeerAccess(handle):
    ctx = current()
    peer = _peer(ctx, handle)
    if not _enabled(ctx, peer):
        raise EmuError("CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
                       f"access from device {ctx.ordinal} to device {peer.ordinal} was not enabled")
    ctx.peers = [p for p in ctx.peers if p is not peer]


def _range(ctx: Context, address: int, nbytes: int, what: str) -> int:
    try:
        ctx.memory.check_range(address, nbytes)
    except AccessFault:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{what}: [{address:#x}, +{nbytes}) is not inside one live allocation of device {ctx.ordinal}")
    return ctx.memory.host_address(address)


def _copy_peer(dst, dst_handle, src, src_handle, nbytes, stream_handle, asynchronous: bool) -> None:
    ctx = current()
    dst_ctx, src_ctx = context_by_handle(dst_handle), context_by_handle(src_handle)
    stream = ctx.stream(stream_handle)
    if nbytes == 0:
        return
    to, frm = _range(dst_ctx, dst, nbytes, "destination"), _range(src_ctx, src, nbytes, "source")
    # The synchronous copy follows the work already queued on both devices' legacy streams.
    others = [] if asynchronous else [c for c in (dst_ctx, src_ctx) if c is not ctx]
    deps = [d for c in others for d in (c.legacy.last, *c.implicit_deps(c.legacy))]
    run = modelled(ctx, lambda: ctypes.memmove(to, frm, nbytes), peer_segment(nbytes))
    item = ctx.submit(stream, run, "memcpyPeer", extra_deps=deps)
    if not asynchronous and item is not None:
        item.done.wait()
        current()


@api
def cuMemcpyPeer(dst, dst_ctx, src, src_ctx, nbytes):
    _copy_peer(dst, dst_ctx, src, src_ctx, nbytes, 0, asynchronous=False)


@api
def cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, nbytes, stream):
    _copy_peer(dst, dst_ctx, src, src_ctx, nbytes, stream, asynchronous=True)

"""The emulated driver's memory functions: cuMemAlloc/Free, pinned host memory, copies, memsets.

Page-locked host memory (cuMemAllocHost, cuMemHostAlloc) lives in the arena too, on whole
pages the host window opens (engine/hostwindow.py): with unified addressing its host
pointer is its device pointer, and kernels of every device reach it (HOST_RANGES), whatever
the flags, as the driver documents. It is not device memory: cuMemGetInfo leaves it out.
"""
import ctypes

from ..engine.memory import HOST_RANGES, AccessFault, OutOfMemory
from .capture import refuse_unsafe
from .context import Context, api, current, live_contexts
from .entry import write_out
from .errors import EmuError
from .pointer import forget_allocation, note_allocation
from ..tools.timemodel import Segment, copy_segment, memset_segment, note


def modelled(ctx: Context, run, segment: Segment):
    """`run`, noting `segment` for the time model when the context has one."""
    if ctx.timeline is None:
        return run

    def noted():
        note(segment)
        run()
    return noted


@api
def cuMemGetInfo(free_out, total_out):
    ctx = current()
    total = ctx.memory.size
    write_out(ctypes.c_size_t, free_out, total - ctx.memory.used())
    write_out(ctypes.c_size_t, total_out, total)


def allocate(ctx: Context, nbytes: int, visible: bool = False, counted: bool = True) -> int:
    """`nbytes` of the context's device memory, with a fresh buffer id (every cuMemAlloc* call);
    `visible`: the host reaches it at the same address (managed, page-locked memory)."""
    if nbytes == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cannot allocate 0 bytes")
    try:
        address = ctx.memory.alloc(nbytes, visible=visible, counted=counted)
    except OutOfMemory:
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY",
                       f"{nbytes} bytes requested, {ctx.memory.size - ctx.memory.used()} free "
                       f"(set LOWLEVEL_EMU_MEMORY for a larger emulated device)")
    note_allocation(ctx, address)
    return address


@api
def cuMemAlloc(dptr_out, nbytes):
    ctx = current()
    refuse_unsafe(ctx, "cuMemAlloc")
    write_out(ctypes.c_uint64, dptr_out, allocate(ctx, nbytes))


def _check_freeable(ctx: Context, dptr: int) -> None:
    """cuMemFree takes only what cuMemAlloc gave: not a module's variables, not an offset."""
    if not ctx.memory.is_allocation(dptr):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{dptr:#x} is not the start of a live allocation")
    if dptr in ctx.pinned:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{dptr:#x} is page-locked host memory: cuMemFreeHost frees it")
    for module in ctx.modules.values():
        for name, (address, _) in (getattr(module.ptx, "symbols", None) or {}).items():
            if address == dptr:
                raise EmuError("CUDA_ERROR_INVALID_VALUE",
                               f"{dptr:#x} is the module variable {name!r}; it is freed with its module")


@api
def cuMemFree(dptr):
    ctx = current()
    refuse_unsafe(ctx, "cuMemFree")
    # cuMemFree synchronises: work still using the memory finishes first.
    ctx.synchronize()
    _check_freeable(ctx, dptr)
    forget_allocation(ctx, dptr)
    ctx.memory.free(dptr)


@api
def cuMemGetAddressRange(base_out, size_out, dptr):
    ctx = current()
    hit = ctx.memory.find(dptr)
    if hit is None:
        raise EmuError("CUDA_ERROR_NOT_FOUND", f"{dptr:#x} is not inside any allocation")
    if base_out:
        write_out(ctypes.c_uint64, base_out, hit[0])
    if size_out:
        write_out(ctypes.c_size_t, size_out, hit[1])


HOSTALLOC_PORTABLE, HOSTALLOC_DEVICEMAP, HOSTALLOC_WRITECOMBINED = 0x1, 0x2, 0x4


def _host_alloc(host_out, nbytes, flags, call: str) -> None:
    ctx = current()
    refuse_unsafe(ctx, call)
    if flags & ~(HOSTALLOC_PORTABLE | HOSTALLOC_DEVICEMAP | HOSTALLOC_WRITECOMBINED):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: unknown flags {flags:#x}")
    if nbytes == 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: cannot allocate 0 bytes")
    try:
        address = ctx.memory.alloc(nbytes, visible=True, counted=False)
    except OutOfMemory:
        # The host cannot lock (here: hold) that much, as the driver reports it.
        raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", f"{call}: cannot allocate {nbytes} bytes of page-locked host memory")
    ctx.pinned[address] = (nbytes, flags)
    HOST_RANGES.add(address, nbytes, ctx.memory.shift)
    note_allocation(ctx, address)
    write_out(ctypes.c_void_p, host_out, address)


@api
def cuMemAllocHost(host_out, nbytes):
    _host_alloc(host_out, nbytes, 0, "cuMemAllocHost")


@api
def cuMemHostAlloc(host_out, nbytes, flags):
    _host_alloc(host_out, nbytes, flags, "cuMemHostAlloc")


@api
def cuMemHostGetFlags(flags_out, host):
    current()
    owner = next((c for c in live_contexts() for start, (size, _) in list(c.pinned.items())
                  if start <= host < start + size), None)
    if owner is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"cuMemHostGetFlags: {host:#x} is not inside memory from cuMemAllocHost or cuMemHostAlloc")
    _, flags = next(v for s, v in owner.pinned.items() if s <= host < s + v[0])
    # Unified addressing maps every page-locked allocation into every context
    write_out(ctypes.c_uint, flags_out, flags | HOSTALLOC_DEVICEMAP | HOSTALLOC_PORTABLE)


@api
def cuMemFreeHost(host):
    refuse_unsafe(current(), "cuMemFreeHost")
    # page-locked memory belongs to every context (unified addressing): its owner frees it
    owner = next((c for c in live_contexts() if host in c.pinned), None)
    if owner is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{host:#x} was not allocated by cuMemAllocHost or cuMemHostAlloc")
    owner.synchronize()
    del owner.pinned[host]
    HOST_RANGES.remove(host)
    forget_allocation(owner, host)
    owner.memory.free(host)


@api
def cuMemAllocAsync(dptr_out, nbytes, stream):
    ctx = current()
    s = ctx.stream(stream)          # validates the handle
    if s.capture is not None:       # a graph's memory-allocation node: not emulated
        s.capture.invalidate("cuMemAllocAsync on a capturing stream")
        raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
                       "cuMemAllocAsync is not captured by the emulated driver")
    # The address is handed out now; the stream orders its first use after this point.
    write_out(ctypes.c_uint64, dptr_out, allocate(ctx, nbytes))


@api
def cuMemFreeAsync(dptr, stream):
    ctx = current()
    s = ctx.stream(stream)
    _check_freeable(ctx, dptr)

    def free():
        forget_allocation(ctx, dptr)
        ctx.memory.free(dptr)
    ctx.submit(s, free, "cuMemFreeAsync")


def _device_range(ctx: Context, dptr: int, nbytes: int, what: str):
    """The DeviceMemory that holds [dptr, +nbytes): the current context's, or, as addresses
    are unified, another device's (the driver finds the owner of a pointer)."""
    owners = [ctx.memory, *(c.memory for c in live_contexts() if c is not ctx)]
    for memory in owners:
        if memory.find(dptr) is not None:
            break
    try:
        memory.check_range(dptr, nbytes)
    except AccessFault:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{what}: [{dptr:#x}, +{nbytes}) is not inside one live allocation")
    return memory


def _copy(stream_handle, dst, src, nbytes, kind: str, asynchronous: bool) -> None:
    """All six copy calls: validate now, move the bytes in stream order.

    Pageable host memory behaves as the driver documents: an async host-to-device copy
    stages the bytes before returning, and a device-to-host copy into pageable memory
    returns only when done. Pinned memory (cuMemAllocHost) is truly asynchronous.
    """
    ctx = current()
    if not asynchronous:
        refuse_unsafe(ctx, f"cuMemcpy{kind}")
    stream = ctx.stream(stream_handle)
    if nbytes == 0:
        return
    dmem = _device_range(ctx, dst, nbytes, "destination") if kind in ("HtoD", "DtoD") else None
    smem = _device_range(ctx, src, nbytes, "source") if kind in ("DtoH", "DtoD") else None
    if not (dst and src):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "NULL pointer in copy")
    if kind == "HtoD":
        # A captured copy reads the host memory when the graph runs, not now.
        if asynchronous and not ctx.is_pinned(src, nbytes) and stream.capture is None:
            # One copy by memmove (size_t sizes), not ctypes.string_at, whose size is a C int.
            try:
                staged = (ctypes.c_char * nbytes)()
            except (MemoryError, OverflowError):
                raise EmuError("CUDA_ERROR_OUT_OF_MEMORY", f"cannot stage {nbytes} bytes of pageable host memory")
            ctypes.memmove(staged, src, nbytes)
            run = lambda: ctypes.memmove(dmem.host_address(dst), staged, nbytes)   # noqa: E731
        else:
            run = lambda: ctypes.memmove(dmem.host_address(dst), src, nbytes)   # noqa: E731
    elif kind == "DtoH":
        run = lambda: ctypes.memmove(dst, smem.host_address(src), nbytes)   # noqa: E731
        asynchronous = asynchronous and ctx.is_pinned(dst, nbytes)
    else:
        run = lambda: ctypes.memmove(dmem.host_address(dst), smem.host_address(src), nbytes)  # noqa: E731
    if ctx.timeline is not None:
        pinned = kind == "DtoD" or ctx.is_pinned(src if kind == "HtoD" else dst, nbytes)
        run = modelled(ctx, run, copy_segment(kind, nbytes, pinned))
    item = ctx.submit(stream, run, f"memcpy{kind}")
    if not asynchronous and item is not None:       # None: captured, it runs with its graph
        item.done.wait()
        current()


@api
def cuMemcpyHtoD(dst, src, nbytes):
    _copy(0, dst, src, nbytes, "HtoD", asynchronous=False)


@api
def cuMemcpyDtoH(dst, src, nbytes):
    _copy(0, dst, src, nbytes, "DtoH", asynchronous=False)


@api
def cuMemcpyDtoD(dst, src, nbytes):
    # Device-to-device copies are asynchronous with respect to the host even without a stream.
    _copy(0, dst, src, nbytes, "DtoD", asynchronous=True)


@api
def cuMemcpyHtoDAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "HtoD", asynchronous=True)


@api
def cuMemcpyDtoHAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "DtoH", asynchronous=True)


@api
def cuMemcpyDtoDAsync(dst, src, nbytes, stream):
    _copy(stream, dst, src, nbytes, "DtoD", asynchronous=True)


def _memset(stream_handle, dptr, value, count, width: int, synchronous: bool = False) -> None:
    ctx = current()
    stream = ctx.stream(stream_handle)
    if dptr % width:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"memset of {width}-byte words at unaligned {dptr:#x}")
    if count == 0:
        return
    memory = _device_range(ctx, dptr, count * width, "memset")
    view = memory.view({1: "u1", 4: "u4"}[width])
    start = memory.check_range(dptr, count * width) // width

    def run():
        view[start:start + count] = value
    # Even the "synchronous" memsets are asynchronous with respect to the host for device
    # memory, as the driver documents; they are ordered on the legacy stream. Into pinned
    # host memory (reachable at its host address) they return only when done.
    item = ctx.submit(stream, modelled(ctx, run, memset_segment(count * width)), f"memsetD{width * 8}")
    if synchronous and item is not None and ctx.is_pinned(dptr, count * width):
        item.done.wait()


@api
def cuMemsetD8(dptr, value, count):
    _memset(0, dptr, value, count, 1, synchronous=True)


@api
def cuMemsetD32(dptr, value, count):
    _memset(0, dptr, value, count, 4, synchronous=True)


@api
def cuMemsetD8Async(dptr, value, count, stream):
    _memset(stream, dptr, value, count, 1)


@api
def cuMemsetD32Async(dptr, value, count, stream):
    _memset(stream, dptr, value, count, 4)



"""Each thread's stack of current contexts, and the context calls other clients make.

The top of the stack is the thread's current context (context.py keeps it); the rest are
kept here. cuCtxSetCurrent replaces the top (NULL pops it), cuCtxPushCurrent_v2 and
cuCtxPopCurrent_v2 push and pop, as the driver documents. The emulated device has one
context per device, its primary context: cuCtxCreate (_v4) and cuCtxCreate_v2 retain it and push it (so code
written for created contexts runs, sharing the primary context's memory and streams), and
cuCtxDestroy_v2 releases it. The primary context's flags are recorded (cuDevicePrimaryCtx-
SetFlags_v2, GetState); the emulated device schedules every way alike.
"""
import ctypes
import threading

from .context import (api, context_by_handle, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRetain, current,
                      device_ordinal, live, live_contexts, require_init, set_thread_context, thread_context)
from .entry import write_out
from .errors import EmuError

API_VERSION = 3020               # what cuCtxGetApiVersion reports: the v2 context API
# CU_CTX_SCHED_* (0..4), MAP_HOST 0x8, LMEM_RESIZE_TO_MAX 0x10, COREDUMP_ENABLE 0x20,
# USER_COREDUMP_ENABLE 0x40, SYNC_MEMOPS 0x80
FLAG_BITS = 0x7 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80
_below = threading.local()        # .stack: the contexts under the current one, bottom first
_primary_flags: dict[int, int] = {}


def _stack() -> list:
    stack = getattr(_below, "stack", None)
    if stack is None:
        stack = _below.stack = []
    return stack


def _check_flags(flags: int, call: str) -> None:
    if flags & ~FLAG_BITS or (flags & 0x7) not in (0, 1, 2, 4):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: flags {flags:#x} are not CUctx_flags")


@api
def cuCtxSetCurrent(handle):
    require_init()
    if handle:
        set_thread_context(context_by_handle(handle))
    else:                          # NULL pops the top (a no-op on an empty stack)
        stack = _stack()
        set_thread_context(stack.pop() if stack else None)


@api
def cuCtxPushCurrent(handle):
    require_init()
    ctx = context_by_handle(handle)
    top = thread_context()
    if top is not None:
        _stack().append(top)
    set_thread_context(ctx)


@api
def cuCtxPopCurrent(ctx_out):
    require_init()
    top = live(thread_context())
    if top is None:
        raise EmuError("CUDA_ERROR_INVALID_CONTEXT", "cuCtxPopCurrent: no context is current on this thread")
    stack = _stack()
    set_thread_context(stack.pop() if stack else None)
    if ctx_out:
        write_out(ctypes.c_void_p, ctx_out, top.handle)


def _create(ctx_out, flags: int, dev: int, call: str) -> None:
    _check_flags(flags, call)
    if not ctx_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{call}: NULL context pointer")
    cuDevicePrimaryCtxRetain.__wrapped__(ctx_out, dev)
    cuCtxPushCurrent.__wrapped__(ctypes.c_void_p.from_address(ctx_out).value)


@api
def cuCtxCreate(ctx_out, params, flags, dev):
    if params:
        # CUctxCreateParams: execution affinity and CIG parameters, which the emulated device lacks
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", "cuCtxCreate: context creation parameters are not supported")
    _create(ctx_out, flags, dev, "cuCtxCreate")


@api
def cuCtxCreate_v2(ctx_out, flags, dev):
    _create(ctx_out, flags, dev, "cuCtxCreate_v2")


@api
def cuCtxDestroy(handle):
    require_init()
    ctx = context_by_handle(handle)
    if live(thread_context()) is ctx:
        stack = _stack()
        set_thread_context(stack.pop() if stack else None)
    cuDevicePrimaryCtxRelease.__wrapped__(ctx.ordinal)


@api
def cuCtxGetApiVersion(handle, version_out):
    if handle:
        require_init()
        context_by_handle(handle)
    else:
        current(check_sticky=False)
    write_out(ctypes.c_uint, version_out, API_VERSION)


@api
def cuCtxGetFlags(flags_out):
    ctx = current(check_sticky=False)
    write_out(ctypes.c_uint, flags_out, _primary_flags.get(ctx.ordinal, 0))


@api
def cuDevicePrimaryCtxGetState(dev, flags_out, active_out):
    dev = device_ordinal(dev)
    active = any(c.ordinal == dev and c.refcount > 0 for c in live_contexts())
    write_out(ctypes.c_uint, flags_out, _primary_flags.get(dev, 0))
    write_out(ctypes.c_int, active_out, int(active))


@api
def cuDevicePrimaryCtxSetFlags(dev, flags):
    dev = device_ordinal(dev)
    _check_flags(flags, "cuDevicePrimaryCtxSetFlags")
    _primary_flags[dev] = flags


@api
def cuProfilerStart():
    """Start the profiler attached to the process (Nsight): the emulated GPU has none, so
    there is nothing to start; as on the driver, a current context is required."""
    current(check_sticky=False)


@api
def cuProfilerStop():
    current(check_sticky=False)

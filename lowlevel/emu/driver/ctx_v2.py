"""CUDA 13's context calls that name their context (NULL: the current one):
cuCtxGetDevice_v2 and cuCtxSynchronize_v2, otherwise as cuCtxGetDevice and
cuCtxSynchronize (context.py)."""
import ctypes

from . import capture
from .context import Context, api, context_by_handle, current, raise_sticky, require_init
from .entry import write_out
from .errors import EmuError


def given_or_current(handle: int, check_sticky: bool = True) -> Context:
    """The context a `_v2` call names: `handle`'s, or the current one for NULL; its sticky
    error raised when `check_sticky`."""
    if not handle:
        return current(check_sticky)
    require_init()
    ctx = context_by_handle(handle)
    if check_sticky:
        raise_sticky(ctx)
    return ctx


@api
def cuCtxGetDevice_v2(device_out, handle):
    ctx = given_or_current(handle, check_sticky=False)
    if not device_out:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "cuCtxGetDevice_v2: NULL device pointer")
    write_out(ctypes.c_int, device_out, ctx.ordinal)


@api
def cuCtxSynchronize_v2(handle):
    ctx = given_or_current(handle)
    capture.refuse_unsafe(ctx, "cuCtxSynchronize_v2")
    ctx.synchronize()
    given_or_current(handle)       # a fault in the work just waited for

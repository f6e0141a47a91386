"""Limits of the current context (cuCtxGetLimit/cuCtxSetLimit) and the range of stream
priorities (cuCtxGetStreamPriorityRange).

    get_limit("PRINTF_FIFO_SIZE")           bytes of the device printf FIFO (default 1 MiB)
    set_limit("MALLOC_HEAP_SIZE", 1 << 26)  the heap of device-side malloc (default 8 MiB)
    set_limit("STACK_SIZE", 4096)           bytes of stack per thread

As the driver documents, PRINTF_FIFO_SIZE and MALLOC_HEAP_SIZE must be set before the first
launch of a kernel that uses printf (malloc) in the context; later it is CUDA_ERROR_INVALID_VALUE.
"""
import ctypes
from ctypes import c_size_t

from ..capi.enums import enum_value
from .checked import c_integer
from .context import ensure_context


def get_limit(name: str) -> int:
    """A CUlimit by name ("STACK_SIZE" or "CU_LIMIT_STACK_SIZE") of the current context."""
    number = enum_value("limit", name)
    drv, _ = ensure_context()
    value = ctypes.c_size_t()
    drv.cuCtxGetLimit(ctypes.byref(value), number)
    return value.value


def set_limit(name: str, value: int) -> None:
    """Set a CUlimit of the current context (the driver may round it: read it back)."""
    number = enum_value("limit", name)
    value = c_integer(value, c_size_t, f"set_limit({name!r}): value")
    drv, _ = ensure_context()
    drv.cuCtxSetLimit(number, value)


def stream_priority_range() -> tuple[int, int]:
    """(least, greatest) stream priority: Stream(priority=p) takes p in [greatest, least]
    (lower numbers are more urgent; [0, -5] on Hopper)."""
    drv, _ = ensure_context()
    least, greatest = ctypes.c_int(), ctypes.c_int()
    drv.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest))
    return least.value, greatest.value

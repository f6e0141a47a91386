"""Layer 2 and the driver objects: the CUDA driver API through ctypes.

Everything here works the same on the real libcuda and on the emulated GPU (lowlevel.emu);
`driver_info()` says which one runs.
"""
from ..capi.versions import format_driver_version
from .context import Device, device_count, reset_device, synchronize
from .driver import get_driver, real_driver_status, use_driver
from .errors import ContextResetError, CudaError
from .memory import (DeviceAllocation, mem_alloc, mem_alloc_async, mem_get_info, memcpy_dtod,
                     memcpy_dtod_async, memcpy_dtoh, memcpy_dtoh_async, memcpy_htod, memcpy_htod_async,
                     memset_d8, memset_d32, pinned_empty)
from .module import Function, Module
from .stream import Event, Stream, current_stream, stream
from .allocator import empty_cache, memory_stats


def driver_info() -> dict:
    """Which driver runs ("cuda" or "emu"), what it is, and its CUDA version."""
    drv = get_driver()
    return {"kind": drv.kind, "description": drv.description, "version": format_driver_version(drv.version())}


__all__ = [
    "ContextResetError", "CudaError", "Device", "DeviceAllocation", "Event", "Function", "Module", "Stream",
    "device_count", "driver_info", "get_driver", "mem_alloc", "mem_alloc_async", "mem_get_info",
    "memcpy_dtod", "memcpy_dtod_async", "memcpy_dtoh", "memcpy_dtoh_async", "memcpy_htod",
    "memcpy_htod_async", "memset_d8", "memset_d32", "pinned_empty", "real_driver_status",
    "reset_device", "synchronize", "use_driver", "stream", "current_stream", "memory_stats", "empty_cache",
]

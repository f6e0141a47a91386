"""Layer 2 and the driver objects: the CUDA driver API through ctypes.

    driver.py        which driver runs (the real libcuda or lowlevel.emu, chosen in one place),
                     the checked C function table, and what a driver brings (its hooks)
    bindings.py      the C prototypes of capi/ bound to a library or to Python callbacks
    checked.py       integer arguments range-checked before they become C values
    context.py       devices, the primary context, resets (on_reset), finalizer safety
    memory.py        device and pinned memory, copies, memsets
    limits.py        context limits (printf FIFO, malloc heap, stack), stream priority range
    managed.py       managed memory, prefetch and advice; register_host (pinning numpy arrays)
    peer.py          several devices: peer access, copies between devices
    pitched.py       pitched 2-D/3-D memory: cuMemAllocPitch, cuMemcpy2D/3D, 2-D memsets
    pointer.py       what the driver knows about an address (cuPointerGetAttribute)
    stream.py        streams, events, host callbacks
    prepared.py      prepared launches: a kernel's configuration and argument buffer resolved once
    profiling.py     what a profile records at the boundary: host spans, device spans by events
    graph.py         CUDA graphs: capture(stream) -> Graph, GraphExec (replay, update)
    graph_capture.py graph() and CUDAGraph: tensor ops captured with a private memory pool
    module.py        modules (PTX, cubin, fatbin, CUDA C via lowlevel.compiler), kernels, launch
    launch_config.py cuLaunchKernelEx's config: clusters, cooperative launch, priority
    occupancy.py     cuOccupancy*: blocks per SM, the best block size, clusters resident
    kernel_args.py   Python values packed into a kernel's parameter buffer
    tensormap.py     TensorMap: a TMA descriptor (cuTensorMapEncodeTiled/Im2col) passed to kernels
    ptx_signature.py a PTX kernel's declared parameter types
    allocator.py     the caching allocator under CUDA tensors
    cublas.py        cuBLAS, bound like the driver; gemm.py: row-major GEMM on top of it
    errors.py        CudaError, ContextResetError

Everything here works the same on the real libcuda and on the emulated GPU (lowlevel.emu);
nothing here asks which one it has. `driver_info()` says which one runs.
"""
from ..capi.versions import format_driver_version
from .context import GPU, device_count, reset_device, synchronize
from .driver import get_driver, real_driver_status, use_driver
from .errors import ContextResetError, CudaError
from .memory import (DeviceAllocation, mem_alloc, mem_alloc_async, mem_get_info, memcpy_dtod,
                     memcpy_dtod_async, memcpy_dtoh, memcpy_dtoh_async, memcpy_htod, memcpy_htod_async,
                     memset_d8, memset_d16, memset_d32, pinned_empty)
from .graph import Graph, GraphExec, capture, is_current_stream_capturing
from .graph_capture import CUDAGraph, graph
from .limits import get_limit, set_limit, stream_priority_range
from .managed import (ManagedAllocation, RegisteredHost, advise, mem_alloc_managed, prefetch, range_attribute,
                      register_host)
from .peer import can_access_peer, disable_peer_access, enable_peer_access, memcpy_peer
from .pitched import PitchedAllocation, alloc_pitch, copy_2d, copy_3d, memset_d2d32
from .pointer import PointerAttributes, pointer_attribute, pointer_attributes
from .module import Function, Module
from .occupancy import available_dynamic_shared, max_active_clusters, max_potential_block_size, max_potential_cluster_size
from .stream import Event, Stream, current_stream, stream
from .tensormap import TensorMap
from .allocator import empty_cache, memory_stats


def driver_info() -> dict:
    """Which driver runs ("cuda" or "emu"), what it is, its CUDA version, and what its device
    times mean (Driver.timing)."""
    drv = get_driver()
    return {"kind": drv.kind, "description": drv.description, "version": format_driver_version(drv.version()),
            "timing": drv.timing}


__all__ = [
    "CUDAGraph", "ContextResetError", "CudaError", "GPU", "DeviceAllocation", "Event", "Function", "Graph",
    "GraphExec", "Module", "Stream", "capture", "graph", "is_current_stream_capturing",
    "device_count", "driver_info", "get_driver", "mem_alloc", "mem_alloc_async", "mem_get_info",
    "memcpy_dtod", "memcpy_dtod_async", "memcpy_dtoh", "memcpy_dtoh_async", "memcpy_htod",
    "memcpy_htod_async", "memset_d8", "memset_d32", "pinned_empty", "real_driver_status",
    "reset_device", "synchronize", "use_driver", "stream", "current_stream", "memory_stats", "empty_cache",
    "available_dynamic_shared", "max_active_clusters", "max_potential_block_size", "max_potential_cluster_size",
    "PointerAttributes", "pointer_attribute", "pointer_attributes",
    "get_limit", "set_limit", "stream_priority_range", "TensorMap",
    "ManagedAllocation", "RegisteredHost", "advise", "mem_alloc_managed", "prefetch", "range_attribute",
    "register_host",
    "can_access_peer", "disable_peer_access", "enable_peer_access", "memcpy_peer",
    "PitchedAllocation", "alloc_pitch", "copy_2d", "copy_3d", "memset_d16", "memset_d2d32",
]

"""The emulated driver: the C functions of libcuda, and of cuBLAS, in Python.

    entry.py      CFunctions (a table of C functions and its decorator), write_out, Ctrl-C
    context.py    state: cuInit, versions, errors, the device, its primary context
    ctx_stack.py  each thread's context stack (push, pop, set), cuCtxCreate as the primary context
    reports.py    thread-instructions, what device times mean, the last launch's figures
    ctx_v2.py     CUDA 13's cuCtxGetDevice_v2, cuCtxSynchronize_v2 (a context named)
    memory.py     cuMemAlloc/Free, pinned host memory, copies, memsets
    modules.py    cuModuleLoad*, functions, globals, cuFuncGetParamInfo
    linked.py     cubins nvJitLink linked in this process, and the PTX each came from
    culink.py     cuLink*: the driver's linker, linking PTX into PTX (ptx/linker.py)
    libraries.py  cuLibrary*, cuKernel*: a library is a module, a CUkernel its CUfunction
    funcattrs.py  cuFuncGetAttribute/SetAttribute: resources, the shared opt-in, clusters
    pointer.py    cuPointerGetAttribute(s): the owner and kind of any address
    limits.py     cuCtxGet/SetLimit, stream priority range, device UUID and PCI bus id
    mempools.py   memory pools: each device's default, cuMemAllocFromPoolAsync, attributes
    managed.py    cuMemAllocManaged, prefetch and advice (recorded), cuMemHostRegister
    peer.py       several devices: peer access, cuMemcpyPeer(Async)
    pitched.py    cuMemAllocPitch, cuMemcpy2D/3D, cuMemsetD16, cuMemsetD2D32
    launch.py     cuLaunchKernel: parameters, configuration checks, the launch queued
    launch_ex.py  cuLaunchKernelEx (launch attributes), cuLaunchCooperativeKernel
    clusters.py   the cluster shape of a launch, checked
    occupancy.py  cuOccupancy*, the cooperative co-residency check (occupancy_rules.py)
    tensormaps.py cuTensorMapEncodeTiled/Im2col, cuTensorMapReplaceAddress: TMA descriptors
    streams.py    cuStream*, cuEvent*, cuLaunchHostFunc(_v2)
    queues.py     the stream and event objects: a worker thread per stream
    graphs.py     stream capture (cuStreamBeginCapture...), cuGraph*: capture.py, its objects
    assembler.py  the JIT's first check: ptxas (nvJitLink), when one is found
    device.py     the emulated device's attributes and limits
    errors.py     EmuError, the CUresult descriptions, static C strings
    cublas.py     cuBLAS's C functions

Importing this package registers every driver function (functions() lists them).
"""
from . import funcattrs, graphs, launch, launch_ex, memory, modules, occupancy, streams  # noqa: F401  (they register their C functions)
from . import (ctx_stack, ctx_v2, culink, libraries, limits, mempools, managed, peer, pitched, pointer,  # noqa: F401
               tensormaps)
from .context import error_details, functions
from .reports import last_launch_stats, thread_instructions, timing
from .entry import call_time, count_call_time, pending_interrupt

__all__ = ["call_time", "count_call_time", "error_details", "functions", "last_launch_stats", "pending_interrupt",
           "thread_instructions", "timing"]

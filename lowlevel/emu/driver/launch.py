"""cuLaunchKernel: the parameter buffer, the launch configuration checked against the
device's limits, and the launch queued on its stream."""
import ctypes

from ...capi.constants import DEVICE_ATTRIBUTE as A
from ..engine.scheduler import run_kernel
from ..tools import enabled
from ..tools.counters import LaunchCounters
from ..tools.printf import PrintfOutput
from ..tools.timemodel import KernelTime
from . import device
from .clusters import cluster_for_launch
from .context import api, current
from .errors import EmuError
from .limits import LaunchLimits, note_launch
from .modules import Function, function_of
from .occupancy import max_threads_per_block


LAUNCH_PARAM_END, LAUNCH_PARAM_BUFFER_POINTER, LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2


def param_buffer(kernel, kernel_params: int, extra: int) -> bytes:
    """The kernel's parameter bytes, copied now (the caller may reuse its memory at once)."""
    if kernel_params and extra:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "both kernelParams and extra were given")
    buf = bytearray(kernel.param_size)
    if kernel_params:
        for i, p in enumerate(kernel.params):
            arg = ctypes.c_void_p.from_address(kernel_params + 8 * i).value
            if not arg:
                raise EmuError("CUDA_ERROR_INVALID_VALUE", f"kernelParams[{i}] ({p.name}) is NULL")
            buf[p.offset:p.offset + p.size] = ctypes.string_at(arg, p.size)
        return bytes(buf)
    if extra:
        pointer = size = None
        i = 0
        while True:
            key = ctypes.c_void_p.from_address(extra + 8 * i).value or 0
            if key == LAUNCH_PARAM_END:
                break
            value = ctypes.c_void_p.from_address(extra + 8 * (i + 1)).value
            if key == LAUNCH_PARAM_BUFFER_POINTER:
                pointer = value
            elif key == LAUNCH_PARAM_BUFFER_SIZE:
                size = ctypes.c_size_t.from_address(value).value if value else None
            else:
                raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown key {key:#x} in extra")
            i += 2
        if pointer is None or size is None:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           "extra needs both CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE")
        if size != kernel.param_size:
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"parameter buffer is {size} bytes, kernel {kernel.name} takes {kernel.param_size}")
        return ctypes.string_at(pointer, size)
    if kernel.params:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"kernel {kernel.name} takes parameters and none were given")
    return b""


def check_config(f: Function, grid, block, shared: int) -> None:
    limits = device.attributes()
    maxima_block = [limits[A[f"CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{c}"]] for c in "XYZ"]
    maxima_grid = [limits[A[f"CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{c}"]] for c in "XYZ"]
    name = f.kernel.name
    if any(d < 1 for d in (*grid, *block)):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: grid {grid} and block {block} must be >= 1 in every dimension")
    required = f.kernel.reqntid
    if required and tuple(block) != (*required, 1, 1)[:3]:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: .reqntid requires a block of exactly "
                                                   f"{(*required, 1, 1)[:3]}, got {tuple(block)}")
    for d, m, c in zip(block, maxima_block, "xyz"):
        if d > m:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: block.{c} = {d} exceeds the device limit {m}")
    for d, m, c in zip(grid, maxima_grid, "xyz"):
        if d > m:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: grid.{c} = {d} exceeds the device limit {m}")
    threads = block[0] * block[1] * block[2]
    limit = min(1024, f.kernel.max_threads_per_block)
    if threads > limit:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{name}: {threads} threads per block exceed the limit {limit}")
    by_registers = max_threads_per_block(f)
    if threads > by_registers:
        raise EmuError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                       f"{name}: {threads} threads per block need more registers than a block has "
                       f"({f.resources()['registers']} per thread: at most {by_registers} threads)")
    if shared > f.max_dynamic_shared:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{name}: {shared} bytes of dynamic shared memory exceed the limit {f.max_dynamic_shared}")


@api
def cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, shared, stream_handle, kernel_params, extra):
    ctx = current()
    f = function_of(ctx, handle)
    stream = ctx.stream(stream_handle)
    grid, block = (gx, gy, gz), (bx, by, bz)
    check_config(f, grid, block, shared)
    cluster = cluster_for_launch(f, grid)         # a __cluster_dims__ kernel runs in clusters
    params = param_buffer(f.kernel, kernel_params, extra)
    ctx.submit(stream, kernel_run(ctx, f, grid, block, shared, params, cluster), f"kernel {f.kernel.name}",
               key=("kernel", handle))     # key: what a graph update keeps


def kernel_run(ctx, f: Function, grid, block, shared: int, params: bytes, cluster=None, cooperative=False):
    """The work of one launch (a stream runs it, or a graph node, at each replay).
    `cluster`: the checked cluster shape (clusters.py); `cooperative`: all CTAs resident
    at once (grid-wide synchronisation)."""
    module, memory, name = f.module.ptx, ctx.memory, f.kernel.name
    note_launch(ctx, f.kernel)          # the printf FIFO and malloc heap sizes are fixed now

    def run():
        workspace = grid_workspace(memory) if cooperative else 0
        try:
            run_kernel(module, name, grid=grid, block=block, params=params, memory=memory, shared_bytes=shared,
                       tools=[*enabled(), KernelTime(), LaunchCounters(ctx, name), LaunchLimits(ctx), PrintfOutput()],
                       cluster=cluster, cooperative=cooperative,
                       envregs={1: workspace >> 32, 2: workspace & 0xFFFFFFFF})
        finally:
            if workspace:
                memory.free(workspace)
    return run


GRID_WORKSPACE_BYTES = 16


def grid_workspace(memory) -> int:
    """The zeroed global memory a cooperative launch's grid.sync() counts arrivals in: the
    driver hands its address to the kernel in %envreg1 (high word) and %envreg2 (low; the
    PTX of cooperative_groups joins them with bfi.b64 d, envreg1, envreg2, 32, 32);
    cooperative_groups' grid sync traps when it is NULL (a launch that is not cooperative)."""
    address = memory.alloc(GRID_WORKSPACE_BYTES)
    start = memory.check_range(address, GRID_WORKSPACE_BYTES)
    memory.u8[start:start + GRID_WORKSPACE_BYTES] = 0
    return address



"""cuOccupancy*: how many CTAs of a kernel the emulated GPU holds per SM, by the
occupancy calculator's rules (occupancy_rules.py) applied to the kernel's resources as
ptxas reports them and to the device's limits; and the co-residency check of a
cooperative launch (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE).

Clusters are placed within one GPC (a group of SMs): the emulated H200 has 8 GPCs, two of
18 SMs and six of 16 (66 TPCs of two SMs, 132 SMs), as an H100 SXM5 has."""
import ctypes
import dataclasses

from ...capi.constants import DEVICE_ATTRIBUTE as A, OCCUPANCY_FLAGS
from ...capi.launch_types import CUoccupancyB2DSize
from . import device
from .context import api, current
from .entry import write_out
from .errors import EmuError
from .modules import Function, function_of
from .occupancy_rules import SM_80, SM_86, SM_90, KernelResources, Occupancy, SmProperties
from .occupancy_rules import available_dynamic_shared, max_active_blocks, max_potential_block_size
from .occupancy_rules import max_threads_for_registers

GPC_SMS = (18, 18, 16, 16, 16, 16, 16, 16)


def device_properties() -> SmProperties:
    """The emulated device as the calculator sees it: its reported limits, with the
    shared memory configurations and CTA slots of its compute capability."""
    cc = device.compute_capability()
    base = SM_80 if cc in ((8, 0), (8, 7)) else SM_86 if cc[0] == 8 else SM_90
    a = device.attributes()

    def attr(name):
        return a[A["CU_DEVICE_ATTRIBUTE_" + name]]
    return dataclasses.replace(
        base, major=cc[0], minor=cc[1], sms=attr("MULTIPROCESSOR_COUNT"),
        max_threads_per_sm=attr("MAX_THREADS_PER_MULTIPROCESSOR"), max_threads_per_block=attr("MAX_THREADS_PER_BLOCK"),
        max_blocks_per_sm=attr("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        registers_per_sm=attr("MAX_REGISTERS_PER_MULTIPROCESSOR"), registers_per_block=attr("MAX_REGISTERS_PER_BLOCK"),
        shared_per_sm=attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"), shared_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK"),
        shared_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        reserved_shared_per_block=attr("RESERVED_SHARED_MEMORY_PER_BLOCK"))


def max_threads_per_block(f: Function) -> int:
    """The kernel's own limit (.maxntid/.reqntid) or what its registers allow, the lower."""
    return min(f.kernel.max_threads_per_block, max_threads_for_registers(device_properties(), f.resources()["registers"]))


def kernel_resources(f: Function) -> KernelResources:
    used = f.resources()
    return KernelResources(registers=used["registers"], static_shared=used["shared"],
                           max_dynamic_shared=f.max_dynamic_shared,
                           max_threads_per_block=max_threads_per_block(f), carveout=f.carveout)


def occupancy(f: Function, block_size: int, dynamic: int) -> Occupancy:
    if block_size <= 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: blockSize = {block_size}")
    return max_active_blocks(device_properties(), kernel_resources(f), block_size, dynamic)


def _check_flags(flags: int) -> None:
    if flags & ~sum(OCCUPANCY_FLAGS.values()):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown occupancy flags {flags:#x}")


@api
def cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks_out, handle, block_size, dynamic):
    f = function_of(current(), handle)
    write_out(ctypes.c_int, blocks_out, occupancy(f, block_size, dynamic).blocks)


@api
def cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks_out, handle, block_size, dynamic, flags):
    _check_flags(flags)          # caching overrides do not exist on sm_80+: the flag changes nothing
    f = function_of(current(), handle)
    write_out(ctypes.c_int, blocks_out, occupancy(f, block_size, dynamic).blocks)


def _potential(grid_out, block_out, handle, callback, dynamic, limit):
    f = function_of(current(), handle)
    if limit < 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: blockSizeLimit = {limit}")
    # The callback is a C function pointer: size_t (*)(int blockSize).
    dynamic_for = CUoccupancyB2DSize(callback) if callback else (lambda size: dynamic)
    grid, size = max_potential_block_size(device_properties(), kernel_resources(f), dynamic_for, limit)
    write_out(ctypes.c_int, grid_out, grid)
    write_out(ctypes.c_int, block_out, size)


@api
def cuOccupancyMaxPotentialBlockSize(grid_out, block_out, handle, callback, dynamic, limit):
    _potential(grid_out, block_out, handle, callback, dynamic, limit)


@api
def cuOccupancyMaxPotentialBlockSizeWithFlags(grid_out, block_out, handle, callback, dynamic, limit, flags):
    _check_flags(flags)
    _potential(grid_out, block_out, handle, callback, dynamic, limit)


@api
def cuOccupancyAvailableDynamicSMemPerBlock(bytes_out, handle, blocks, block_size):
    f = function_of(current(), handle)
    if block_size <= 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: blockSize = {block_size}")
    available = available_dynamic_shared(device_properties(), kernel_resources(f), blocks, block_size)
    if available is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{f.kernel.name}: {blocks} blocks of {block_size} threads never fit on one SM")
    write_out(ctypes.c_size_t, bytes_out, available)


def max_active_clusters(f: Function, block, shared: int, cluster) -> int:
    """Clusters of `cluster` CTAs resident at once: each GPC holds its SMs' CTAs."""
    per_sm = occupancy(f, block[0] * block[1] * block[2], shared).blocks
    size = cluster[0] * cluster[1] * cluster[2]
    scale = device_properties().sms / sum(GPC_SMS)       # a device with other SM counts
    return sum(int(sms * scale) * per_sm // size for sms in GPC_SMS)


def max_potential_cluster_size(f: Function, block, shared: int, size_limit: int) -> int:
    """The largest cluster (in CTAs, up to `size_limit`) of which at least one is resident
    at once, by max_active_clusters' rule (its CTAs in one GPC); 0 when none fits."""
    for size in range(size_limit, 0, -1):
        if max_active_clusters(f, block, shared, (size, 1, 1)):
            return size
    return 0


def check_cooperative(f: Function, grid, block, shared: int, cluster) -> None:
    """A cooperative grid must be resident all at once (its CTAs wait for each other)."""
    ctas = grid[0] * grid[1] * grid[2]
    per_sm = occupancy(f, block[0] * block[1] * block[2], shared).blocks
    fits = per_sm * device_properties().sms
    if cluster is not None:
        fits = max_active_clusters(f, block, shared, cluster) * cluster[0] * cluster[1] * cluster[2]
    if ctas > fits:
        raise EmuError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
                       f"{f.kernel.name}: a cooperative grid of {ctas} blocks; at most {fits} are resident "
                       f"at once ({per_sm} per SM x {device_properties().sms} SMs)")

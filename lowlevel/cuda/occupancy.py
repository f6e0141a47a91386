"""Occupancy: how many blocks of a kernel one SM holds at once, and the block size that
fills an SM best (cuOccupancy*), on whichever driver runs.

    f.occupancy(256)                                  # active blocks per SM
    cuda.max_potential_block_size(f)                  # (min grid size, block size)
    cuda.max_potential_block_size(f, dynamic_shared=lambda threads: 4 * threads)
    cuda.available_dynamic_shared(f, blocks=2, block_size=256)
    cuda.max_active_clusters(f, grid=64, block=128, cluster=(2, 1, 1))
    cuda.max_potential_cluster_size(f, block=128)

The shared-memory callback of cuOccupancyMaxPotentialBlockSize is a C function pointer
(size_t (*)(int blockSize)): a Python callable is wrapped as one (CUoccupancyB2DSize), kept
alive for the call; an exception in it becomes the error of the call.
"""
import ctypes
from ctypes import c_int, c_size_t, c_uint

from ..capi.constants import OCCUPANCY_FLAGS
from ..capi.launch_types import CUoccupancyB2DSize
from .checked import c_integer, integer
from .launch_config import LaunchConfig, launch_attributes
from .prepared import launch_dims


def _flags(disable_caching_override: bool) -> int:
    return OCCUPANCY_FLAGS["CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE" if disable_caching_override
                           else "CU_OCCUPANCY_DEFAULT"]


def active_blocks_per_sm(f, block_size: int, dynamic_shared: int = 0, disable_caching_override=False) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags."""
    blocks = c_int()
    f.driver.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        ctypes.byref(blocks), f.handle, c_integer(block_size, c_int, f"{f.name}: block_size"),
        c_integer(dynamic_shared, c_size_t, f"{f.name}: dynamic_shared"), _flags(disable_caching_override))
    return blocks.value


class _Callback:
    """A Python callable as a CUoccupancyB2DSize; remembers an exception it raised (ctypes
    would print it and return 0 to C)."""

    def __init__(self, f, fn):
        self.error = None
        self.name = f.name

        def call(block_size):
            try:
                return c_integer(fn(block_size), c_size_t, f"{self.name}: dynamic_shared({block_size})")
            except BaseException as e:      # noqa: BLE001  (re-raised after the C call)
                self.error = self.error or e
                return 0
        self.pointer = CUoccupancyB2DSize(call)


def max_potential_block_size(f, dynamic_shared=0, block_size_limit: int = 0,
                             disable_caching_override=False) -> tuple[int, int]:
    """(minimum grid size for full occupancy, block size) of cuOccupancyMaxPotentialBlockSize.
    `dynamic_shared`: bytes per block, or a callable block size -> bytes."""
    grid, block = c_int(), c_int()
    callback, fixed = None, 0
    if callable(dynamic_shared):
        callback = _Callback(f, dynamic_shared)
    else:
        fixed = c_integer(dynamic_shared, c_size_t, f"{f.name}: dynamic_shared")
    code = f.driver.cuOccupancyMaxPotentialBlockSizeWithFlags.unchecked(
        ctypes.byref(grid), ctypes.byref(block), f.handle, callback.pointer if callback else None, fixed,
        c_integer(block_size_limit, c_int, f"{f.name}: block_size_limit"), _flags(disable_caching_override))
    if callback is not None and callback.error is not None:
        raise callback.error
    if code != 0:
        raise f.driver.error(code, "cuOccupancyMaxPotentialBlockSizeWithFlags")
    return grid.value, block.value


def available_dynamic_shared(f, blocks: int, block_size: int) -> int:
    """cuOccupancyAvailableDynamicSMemPerBlock: the most dynamic shared memory per block
    that lets `blocks` blocks of `block_size` threads share one SM."""
    nbytes = c_size_t()
    f.driver.cuOccupancyAvailableDynamicSMemPerBlock(
        ctypes.byref(nbytes), f.handle, c_integer(blocks, c_int, f"{f.name}: blocks"),
        c_integer(block_size, c_int, f"{f.name}: block_size"))
    return nbytes.value


def max_active_clusters(f, grid, block, cluster=None, dynamic_shared: int = 0) -> int:
    """cuOccupancyMaxActiveClusters: clusters of this launch shape resident at once
    (`cluster` None: the kernel's own __cluster_dims__)."""
    attrs = launch_attributes(f.name, cluster=cluster)
    config = LaunchConfig(launch_dims(grid, f"{f.name}: grid"), launch_dims(block, f"{f.name}: block"),
                          integer(dynamic_shared, f"{f.name}: dynamic_shared"), 0, attrs)
    clusters = c_int()
    f.driver.cuOccupancyMaxActiveClusters(ctypes.byref(clusters), f.handle, config.pointer())
    return clusters.value




def max_potential_cluster_size(f, block, dynamic_shared: int = 0, *, grid=1) -> int:
    """cuOccupancyMaxPotentialClusterSize: the largest cluster (in blocks of `block`
    threads with `dynamic_shared` bytes each) that can be launched: the kernel's required
    cluster size if it has one, else at most the portable 8, or more where the kernel
    allows non-portable sizes (NON_PORTABLE_CLUSTER_SIZE_ALLOWED); 0 when none fits."""
    config = LaunchConfig(launch_dims(grid, f"{f.name}: grid"), launch_dims(block, f"{f.name}: block"),
                          c_integer(dynamic_shared, c_uint, f"{f.name}: dynamic_shared"), 0, [])
    size = c_int()
    f.driver.cuOccupancyMaxPotentialClusterSize(ctypes.byref(size), f.handle, config.pointer())
    return size.value

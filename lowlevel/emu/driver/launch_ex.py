"""cuLaunchKernelEx (a CUlaunchConfig with its launch attributes), cuLaunchCooperativeKernel,
and cuOccupancyMaxActiveClusters and cuOccupancyMaxPotentialClusterSize (which take a
CUlaunchConfig too).

Each attribute is read as the driver reads it: the ones that change what runs (cluster
shape, cooperative, the portable-cluster mode) are honoured; scheduling hints (priority,
cluster scheduling policy, carveout, memory sync domains, NVLink hint, programmatic
stream serialisation: the emulated GPU runs a stream's work in order anyway) are checked
and recorded; the ones the emulated GPU cannot honour (programmatic and launch-completion
events, shared memory modes) are CUDA_ERROR_NOT_SUPPORTED; the stream-only and
graph-only ones, and unknown ids, are CUDA_ERROR_INVALID_VALUE.
"""
import ctypes
from dataclasses import dataclass

from ...capi.constants import CLUSTER_SCHEDULING_POLICY, LAUNCH_ATTRIBUTE
from ...capi.launch_types import PORTABLE_CLUSTER_MODE, CUlaunchAttribute, CUlaunchConfig
from .clusters import MAX_CLUSTER_SIZE, PORTABLE_CLUSTER_SIZE, cluster_for_launch, non_portable_allowed
from .context import api, current
from .entry import write_out
from .errors import EmuError
from .launch import check_config, kernel_run, param_buffer
from .modules import function_of
from . import device
from .occupancy import check_cooperative, max_active_clusters, max_potential_cluster_size

_NAMES = {number: name.removeprefix("CU_LAUNCH_ATTRIBUTE_") for name, number in LAUNCH_ATTRIBUTE.items()}
_HINTS = {"MEM_SYNC_DOMAIN_MAP"}
_UNSUPPORTED = {"PROGRAMMATIC_EVENT", "LAUNCH_COMPLETION_EVENT", "SHARED_MEMORY_MODE"}
_NOT_FOR_LAUNCHES = {"SYNCHRONIZATION_POLICY": "valid for streams only",
                     "DEVICE_UPDATABLE_KERNEL_NODE": "valid for graph kernel nodes only"}


@dataclass
class LaunchOptions:
    """What a launch's attributes ask for."""
    cluster: tuple | None = None
    preferred_cluster: tuple | None = None
    cooperative: bool = False
    priority: int = 0
    portable_mode: int = 0


def _zero_or_one(name: str, value: int) -> int:
    if value not in (0, 1):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"launch attribute {name} = {value}: 0 or 1")
    return value


def _read_attribute(attr: CUlaunchAttribute, options: LaunchOptions) -> None:
    name = _NAMES.get(attr.id)
    v = attr.value
    if name is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown launch attribute id {attr.id}")
    if name in _NOT_FOR_LAUNCHES:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"launch attribute {name} is {_NOT_FOR_LAUNCHES[name]}")
    if name in _UNSUPPORTED:
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", f"launch attribute {name} is not supported by the emulated GPU")
    if name == "COOPERATIVE":
        options.cooperative = v.cooperative != 0
    elif name == "CLUSTER_DIMENSION":
        options.cluster = (v.clusterDim.x, v.clusterDim.y, v.clusterDim.z)
    elif name == "PREFERRED_CLUSTER_DIMENSION":
        options.preferred_cluster = (v.preferredClusterDim.x, v.preferredClusterDim.y, v.preferredClusterDim.z)
    elif name == "PRIORITY":
        options.priority = v.priority          # a hint: the emulated GPU has one queue
    elif name == "CLUSTER_SCHEDULING_POLICY_PREFERENCE":
        if v.clusterSchedulingPolicyPreference not in CLUSTER_SCHEDULING_POLICY.values():
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"{v.clusterSchedulingPolicyPreference} is no CUclusterSchedulingPolicy")
    elif name == "PORTABLE_CLUSTER_SIZE_MODE":
        if v.portableClusterSizeMode not in PORTABLE_CLUSTER_MODE.values():
            raise EmuError("CUDA_ERROR_INVALID_VALUE",
                           f"{v.portableClusterSizeMode} is no CUlaunchAttributePortableClusterMode")
        options.portable_mode = v.portableClusterSizeMode
    elif name == "PREFERRED_SHARED_MEMORY_CARVEOUT":
        if not (v.sharedMemCarveout == 0xFFFFFFFF or v.sharedMemCarveout <= 100):
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"a shared memory carveout of {v.sharedMemCarveout}%")
    elif name == "PROGRAMMATIC_STREAM_SERIALIZATION":
        _zero_or_one(name, v.programmaticStreamSerializationAllowed)
    elif name == "NVLINK_UTIL_CENTRIC_SCHEDULING":
        _zero_or_one(name, v.nvlinkUtilCentricScheduling)
    elif name == "ACCESS_POLICY_WINDOW":
        _check_window(v.accessPolicyWindow)
    elif name == "MEM_SYNC_DOMAIN":
        _zero_or_one(name, v.memSyncDomain)         # CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT / _REMOTE
    elif name not in _HINTS and name != "IGNORE":
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"launch attribute {name} is not valid for a launch")


def _check_window(w) -> None:
    """An L2 access policy window is a hint, but its fields are checked (CUaccessProperty:
    NORMAL 0, STREAMING 1, PERSISTING 2; a miss cannot persist)."""
    if not 0.0 <= w.hitRatio <= 1.0 or w.hitProp not in (0, 1, 2) or w.missProp not in (0, 1):
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"access policy window: hitRatio {w.hitRatio}, hitProp {w.hitProp}, missProp {w.missProp}")


def _check_preferred(f, options: LaunchOptions, cluster) -> None:
    """A preferred cluster shape is a hint, but a malformed one is refused."""
    pref = options.preferred_cluster
    if pref is None:
        return
    base = cluster or (1, 1, 1)
    if cluster is None or any(p == 0 or p % b for p, b in zip(pref[:2], base[:2])) or pref[2] != base[2]:
        raise EmuError("CUDA_ERROR_INVALID_CLUSTER_SIZE",
                       f"{f.kernel.name}: the preferred cluster {pref} must be a multiple of the cluster "
                       f"{cluster} in x and y and equal in z")


def read_config(config: int) -> tuple[CUlaunchConfig, LaunchOptions]:
    if not config:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "config is NULL")
    c = CUlaunchConfig.from_address(config)
    options = LaunchOptions()
    if c.numAttrs:
        if not c.attrs:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"config.numAttrs = {c.numAttrs} with attrs NULL")
        for i in range(c.numAttrs):
            _read_attribute(c.attrs[i], options)
    return c, options


def launch_grouping(f, grid, block, shared, launch_cluster=None, portable_mode=0, cooperative=False):
    """(cluster shape, cooperative) a launch runs with, checked (clusters.py, occupancy.py)."""
    cluster = cluster_for_launch(f, grid, launch_cluster, portable_mode)
    if cooperative:
        check_cooperative(f, grid, block, shared, cluster)
    return cluster, cooperative


def launch(handle, grid, block, shared, stream_handle, kernel_params, extra, options: LaunchOptions):
    ctx = current()
    f = function_of(ctx, handle)
    stream = ctx.stream(stream_handle)
    check_config(f, grid, block, shared)
    cluster, cooperative = launch_grouping(f, grid, block, shared, options.cluster, options.portable_mode,
                                           options.cooperative)
    _check_preferred(f, options, cluster)
    params = param_buffer(f.kernel, kernel_params, extra)
    run = kernel_run(ctx, f, grid, block, shared, params, cluster, cooperative)
    # key: what a graph update keeps (the function), and the attributes its node keeps
    key = ("kernel", handle, options.cluster, options.portable_mode, options.cooperative)
    ctx.submit(stream, run, f"kernel {f.kernel.name}", key=key)


@api
def cuLaunchKernelEx(config, handle, kernel_params, extra):
    c, options = read_config(config)
    launch(handle, (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ),
           c.sharedMemBytes, c.hStream or 0, kernel_params, extra, options)


@api
def cuLaunchCooperativeKernel(handle, gx, gy, gz, bx, by, bz, shared, stream_handle, kernel_params):
    launch(handle, (gx, gy, gz), (bx, by, bz), shared, stream_handle, kernel_params, None,
           LaunchOptions(cooperative=True))


@api
def cuOccupancyMaxActiveClusters(clusters_out, handle, config):
    f = function_of(current(), handle)
    c, options = read_config(config)
    grid, block = (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ)
    cluster = cluster_for_launch(f, grid, options.cluster, options.portable_mode)
    if cluster is None:
        raise EmuError("CUDA_ERROR_INVALID_CLUSTER_SIZE",
                       f"{f.kernel.name}: neither the config nor the kernel gives a cluster size")
    write_out(ctypes.c_int, clusters_out, max_active_clusters(f, block, c.sharedMemBytes, cluster))


@api
def cuOccupancyMaxPotentialClusterSize(size_out, handle, config):
    """"The cluster dimensions in config are ignored"; a kernel's required cluster shape is
    the answer; otherwise the portable size (8), or 16 where non-portable sizes are allowed,
    within the kernel's .maxclusterrank, as far as a cluster of it is resident at once."""
    f = function_of(current(), handle)
    c, options = read_config(config)
    if device.arch() < 90:
        raise EmuError("CUDA_ERROR_INVALID_CLUSTER_SIZE",
                       f"{f.kernel.name}: thread-block clusters need compute capability 9.0, the device is "
                       f"sm_{device.arch()}")
    if any(f.cluster_dims):                 # __cluster_dims__, or REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH
        x, y, z = f.cluster_dims
        write_out(ctypes.c_int, size_out, x * y * z)
        return
    limit = MAX_CLUSTER_SIZE if non_portable_allowed(f, options.portable_mode) else PORTABLE_CLUSTER_SIZE
    if f.kernel.maxclusterrank:
        limit = min(limit, f.kernel.maxclusterrank)
    block = (c.blockDimX, c.blockDimY, c.blockDimZ)
    write_out(ctypes.c_int, size_out, max_potential_cluster_size(f, block, c.sharedMemBytes, limit))

"""Which cluster shape a launch runs with, checked as the driver checks it.

A kernel gets its cluster shape from, in order: its compile-time `__cluster_dims__`
(.reqnctapercluster), which a launch may not change; the launch's
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; the function attributes
REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH. A kernel marked .explicitcluster must get one.
Clusters exist from compute capability 9.0; a cluster of more than 8 CTAs (the portable
size) needs NON_PORTABLE_CLUSTER_SIZE_ALLOWED (or the launch's portable-cluster mode),
and 16 is the most an H100/H200 runs. Every grid dimension must be a multiple of the
cluster's. Each refusal is CUDA_ERROR_INVALID_CLUSTER_SIZE, as on the driver.
"""
from ...capi.launch_types import PORTABLE_CLUSTER_MODE
from . import device
from .errors import EmuError
from .modules import Function

PORTABLE_CLUSTER_SIZE = 8
MAX_CLUSTER_SIZE = 16


def _refuse(f: Function, why: str):
    raise EmuError("CUDA_ERROR_INVALID_CLUSTER_SIZE", f"{f.kernel.name}: {why}")


def _requested(f: Function, launch_dims) -> tuple | None:
    if f.cluster_dims_compiled:
        if launch_dims is not None and tuple(launch_dims) != f.cluster_dims:
            _refuse(f, f"the launch asks for a cluster of {tuple(launch_dims)}, the kernel was compiled "
                       f"for {f.cluster_dims} (__cluster_dims__)")
        return f.cluster_dims
    if launch_dims is not None:
        return tuple(launch_dims)
    if any(f.cluster_dims):
        return f.cluster_dims
    return None


def non_portable_allowed(f: Function, mode: int) -> bool:
    """Whether a cluster beyond the portable size may run (the launch's mode wins)."""
    if mode == PORTABLE_CLUSTER_MODE["REQUIRE_PORTABLE"]:
        return False
    if mode == PORTABLE_CLUSTER_MODE["ALLOW_NON_PORTABLE"]:
        return True
    return bool(f.non_portable_cluster)


def cluster_for_launch(f: Function, grid, launch_dims=None, portable_mode: int = 0) -> tuple | None:
    """The (x, y, z) cluster this launch runs with, or None for no clusters."""
    dims = _requested(f, launch_dims)
    if dims is None:
        if f.kernel.explicitcluster:
            _refuse(f, "the kernel is marked .explicitcluster and was launched without a cluster shape")
        return None
    if not (all(d > 0 for d in dims) or all(d == 0 for d in dims)):
        _refuse(f, f"a cluster of {dims}: its dimensions must be all positive or all zero")
    if not any(dims):
        return None
    if device.arch() < 90:
        _refuse(f, f"thread-block clusters need compute capability 9.0, the device is sm_{device.arch()}")
    size = dims[0] * dims[1] * dims[2]
    limit = MAX_CLUSTER_SIZE if non_portable_allowed(f, portable_mode) else PORTABLE_CLUSTER_SIZE
    if size > limit:
        hint = "" if limit == MAX_CLUSTER_SIZE else \
            " without NON_PORTABLE_CLUSTER_SIZE_ALLOWED (or the launch's portable-cluster mode)"
        _refuse(f, f"a cluster of {size} CTAs exceeds the limit of {limit}{hint}")
    if f.kernel.maxclusterrank and size > f.kernel.maxclusterrank:
        _refuse(f, f"a cluster of {size} CTAs exceeds the kernel's .maxclusterrank {f.kernel.maxclusterrank}")
    for g, d, axis in zip(grid, dims, "xyz"):
        if g % d:
            _refuse(f, f"grid.{axis} = {g} is not a multiple of the cluster's {axis} dimension {d}")
    return tuple(dims)

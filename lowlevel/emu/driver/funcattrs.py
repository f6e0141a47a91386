"""cuFuncGetAttribute and cuFuncSetAttribute: what a kernel uses (ptxas's figures) and the
settings a program may change (the dynamic shared memory opt-in, the carveout, clusters).

As on the driver, a read-only attribute cannot be set (CUDA_ERROR_INVALID_VALUE), nor a
value outside its range; a cluster shape fixed at compile time (`__cluster_dims__`,
.reqnctapercluster) cannot be changed (CUDA_ERROR_NOT_PERMITTED)."""
import ctypes

from ...capi.constants import CLUSTER_SCHEDULING_POLICY, FUNCTION_ATTRIBUTE
from . import device
from .context import api, current
from .entry import write_out
from .errors import EmuError
from .modules import Function, function_of
from .occupancy import max_threads_per_block

_NAMES = {number: name.removeprefix("CU_FUNC_ATTRIBUTE_") for name, number in FUNCTION_ATTRIBUTE.items()}
_CLUSTER_AXES = {"REQUIRED_CLUSTER_WIDTH": 0, "REQUIRED_CLUSTER_HEIGHT": 1, "REQUIRED_CLUSTER_DEPTH": 2}


def values(f: Function) -> dict[str, int]:
    """Every CUfunction_attribute of `f`, by its short name."""
    k, used = f.kernel, f.resources()            # ptxas's figures where it ran
    return {
        "MAX_THREADS_PER_BLOCK": max_threads_per_block(f),     # registers limit it too
        "SHARED_SIZE_BYTES": used["shared"],
        "CONST_SIZE_BYTES": used["const"],
        "LOCAL_SIZE_BYTES": used["local"],
        "NUM_REGS": used["registers"],
        "PTX_VERSION": k.ptx_version,
        "BINARY_VERSION": k.binary_version,
        "CACHE_MODE_CA": 0,
        "MAX_DYNAMIC_SHARED_SIZE_BYTES": f.max_dynamic_shared,
        "PREFERRED_SHARED_MEMORY_CARVEOUT": f.carveout,
        "CLUSTER_SIZE_MUST_BE_SET": int(k.explicitcluster),
        "REQUIRED_CLUSTER_WIDTH": f.cluster_dims[0],
        "REQUIRED_CLUSTER_HEIGHT": f.cluster_dims[1],
        "REQUIRED_CLUSTER_DEPTH": f.cluster_dims[2],
        "NON_PORTABLE_CLUSTER_SIZE_ALLOWED": f.non_portable_cluster,
        "CLUSTER_SCHEDULING_POLICY_PREFERENCE": f.cluster_scheduling,
        "DEVICE_NODE_UPDATE_SUPPORTED": 0,
        "SHARED_MEMORY_MODE": 0,                 # CU_SHARED_MEMORY_MODE_DEFAULT
    }


def _attribute_name(attribute: int) -> str:
    name = _NAMES.get(attribute)
    if name is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown function attribute {attribute}")
    return name


@api
def cuFuncGetAttribute(value_out, attribute, handle):
    f = function_of(current(), handle)
    name = _attribute_name(attribute)
    write_out(ctypes.c_int, value_out, values(f)[name])


def _set_dynamic_shared(f: Function, value: int) -> None:
    limit = device.shared_per_block_optin() - f.resources()["shared"]
    if not 0 <= value <= limit:
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{f.kernel.name}: MAX_DYNAMIC_SHARED_SIZE_BYTES = {value} is outside 0..{limit} "
                       f"(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN {device.shared_per_block_optin()} minus "
                       f"{f.resources()['shared']} bytes of static shared memory)")
    f.max_dynamic_shared = value


def _set_carveout(f: Function, value: int) -> None:
    if not (value == -1 or 0 <= value <= 100):
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{f.kernel.name}: PREFERRED_SHARED_MEMORY_CARVEOUT = {value}: a percentage 0..100, "
                       f"or -1 (CU_SHAREDMEM_CARVEOUT_DEFAULT)")
    f.carveout = value


def _set_cluster_axis(f: Function, axis: int, value: int) -> None:
    if f.cluster_dims_compiled:
        raise EmuError("CUDA_ERROR_NOT_PERMITTED",
                       f"{f.kernel.name}: the cluster shape {f.cluster_dims} was fixed at compile time "
                       f"(.reqnctapercluster)")
    if value < 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: a cluster dimension of {value}")
    dims = list(f.cluster_dims)
    dims[axis] = value          # all zero or all positive: checked at launch, as the driver does
    f.cluster_dims = tuple(dims)


def _set_flag(f: Function, name: str, value: int) -> None:
    if value not in (0, 1):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: {name} = {value}: 0 or 1")
    f.non_portable_cluster = value


def _set_scheduling(f: Function, value: int) -> None:
    if value not in CLUSTER_SCHEDULING_POLICY.values():
        raise EmuError("CUDA_ERROR_INVALID_VALUE",
                       f"{f.kernel.name}: {value} is no CUclusterSchedulingPolicy")
    f.cluster_scheduling = value


@api
def cuFuncSetAttribute(handle, attribute, value):
    f = function_of(current(), handle)
    name = _attribute_name(attribute)
    if name == "MAX_DYNAMIC_SHARED_SIZE_BYTES":
        _set_dynamic_shared(f, value)
    elif name == "PREFERRED_SHARED_MEMORY_CARVEOUT":
        _set_carveout(f, value)
    elif name in _CLUSTER_AXES:
        _set_cluster_axis(f, _CLUSTER_AXES[name], value)
    elif name == "NON_PORTABLE_CLUSTER_SIZE_ALLOWED":
        _set_flag(f, name, value)
    elif name == "CLUSTER_SCHEDULING_POLICY_PREFERENCE":
        _set_scheduling(f, value)
    elif name == "SHARED_MEMORY_MODE":
        raise EmuError("CUDA_ERROR_NOT_SUPPORTED", f"{f.kernel.name}: the emulated GPU has no shared memory modes")
    else:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"{f.kernel.name}: the function attribute {name} is read-only")

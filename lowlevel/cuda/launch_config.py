"""cuLaunchKernelEx's CUlaunchConfig, built from Python keywords: a cluster shape, a
cooperative launch, a priority (and, by name, any other launch attribute).

    f.launch(grid=(8,), block=128, args=(...), cluster=(2, 1, 1))
    f.launch(grid=132, block=256, args=(...), cooperative=True)
    run = f.prepare(grid=8, block=128, cluster=(2, 1, 1)); run(x, y, stream=s)

The structures are capi/launch_types.py's (laid out as cuda.h lays them out); the
config keeps its attribute array alive for the call.
"""
import ctypes
from ctypes import c_int, c_uint

from ..capi.constants import LAUNCH_ATTRIBUTE
from ..capi.launch_types import CUlaunchAttribute, CUlaunchConfig
from .checked import c_integer
from .prepared import launch_dims, shared_bytes
from .stream import stream_handle


def _attribute(name: str) -> CUlaunchAttribute:
    attr = CUlaunchAttribute()
    attr.id = LAUNCH_ATTRIBUTE["CU_LAUNCH_ATTRIBUTE_" + name]
    return attr


def launch_attributes(what: str, cluster=None, cooperative=None, priority=None) -> list[CUlaunchAttribute]:
    """The launch attributes for the keywords given (None: not given)."""
    attrs = []
    if cluster is not None:
        x, y, z = launch_dims(cluster, f"{what}: cluster")
        attr = _attribute("CLUSTER_DIMENSION")
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = x, y, z
        attrs.append(attr)
    if cooperative is not None:
        if not isinstance(cooperative, bool):
            raise TypeError(f"{what}: cooperative must be True or False, got {cooperative!r}")
        attr = _attribute("COOPERATIVE")
        attr.value.cooperative = int(cooperative)
        attrs.append(attr)
    if priority is not None:
        attr = _attribute("PRIORITY")
        attr.value.priority = c_integer(priority, c_int, f"{what}: priority")
        attrs.append(attr)
    return attrs


class LaunchConfig:
    """A CUlaunchConfig and the attribute array it points to."""

    def __init__(self, grid, block, shared: int, stream: int, attrs: list[CUlaunchAttribute]):
        self.array = (CUlaunchAttribute * max(1, len(attrs)))(*attrs)
        c = self.struct = CUlaunchConfig()
        c.gridDimX, c.gridDimY, c.gridDimZ = grid
        c.blockDimX, c.blockDimY, c.blockDimZ = block
        c.sharedMemBytes = c_integer(shared, c_uint, "sharedMemBytes")
        c.hStream = stream or None
        c.attrs = ctypes.cast(self.array, ctypes.POINTER(CUlaunchAttribute))
        c.numAttrs = len(attrs)

    def pointer(self):
        return ctypes.byref(self.struct)


class PreparedLaunchEx:
    """`Function.prepare(..., cluster=, cooperative=, priority=)`: a prepared launch through
    cuLaunchKernelEx. The configuration and its attributes are checked and built once; per
    call the arguments are packed as `Function.launch` packs them (a buffer of their own, so
    threads may share it) and the stream goes into the config. The plain PreparedLaunch
    (prepared.py) keeps its own, faster path for launches without attributes."""

    def __init__(self, function, grid, block, shared_mem: int, attrs: list[CUlaunchAttribute]):
        name = function.name
        self.function = function
        self.grid = launch_dims(grid, f"{name}: grid")
        self.block = launch_dims(block, f"{name}: block")
        self.shared_mem = shared_bytes(shared_mem, name)
        self.attrs = list(attrs)

    def __repr__(self):
        return (f"<PreparedLaunchEx {self.function.name} grid={self.grid} block={self.block} "
                f"attributes={len(self.attrs)}>")

    def __call__(self, *args, stream=None) -> None:
        """Queue the kernel with `args` on `stream` (default: the legacy default stream)."""
        f = self.function
        handle = stream_handle(stream, f"{f.name}: stream")
        packed = f.pack(args)
        config = LaunchConfig(self.grid, self.block, self.shared_mem, handle, self.attrs)
        f.driver.cuLaunchKernelEx(config.pointer(), f.handle, packed.kernel_params, None)

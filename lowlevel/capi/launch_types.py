"""The C structures of cuLaunchKernelEx, laid out as cuda.h lays them out.

Both drivers read these bytes: the real one in C, the emulated one through the same
ctypes classes. tests/capi/test_launch_types.py compiles a C file against cuda.h and
compares every size and offset.
"""
import ctypes
from ctypes import c_float, c_int, c_size_t, c_ubyte, c_uint, c_void_p

# CUoccupancyB2DSize: size_t (*)(int blockSize), the per-block dynamic shared memory a
# block size needs (cuOccupancyMaxPotentialBlockSize's callback).
CUoccupancyB2DSize = ctypes.CFUNCTYPE(c_size_t, c_int)


class Dim3(ctypes.Structure):
    """The anonymous struct { unsigned x, y, z; } of clusterDim and preferredClusterDim."""
    _fields_ = [("x", c_uint), ("y", c_uint), ("z", c_uint)]


class CUaccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", c_void_p), ("num_bytes", c_size_t), ("hitRatio", c_float),
                ("hitProp", c_int), ("missProp", c_int)]


class ProgrammaticEvent(ctypes.Structure):
    _fields_ = [("event", c_void_p), ("flags", c_int), ("triggerAtBlockStart", c_int)]


class LaunchCompletionEvent(ctypes.Structure):
    _fields_ = [("event", c_void_p), ("flags", c_int)]


class CUlaunchMemSyncDomainMap(ctypes.Structure):
    _fields_ = [("default_", c_ubyte), ("remote", c_ubyte)]


class DeviceUpdatableKernelNode(ctypes.Structure):
    _fields_ = [("deviceUpdatable", c_int), ("devNode", c_void_p)]


class CUlaunchAttributeValue(ctypes.Union):
    _fields_ = [
        ("pad", ctypes.c_char * 64),
        ("accessPolicyWindow", CUaccessPolicyWindow),
        ("cooperative", c_int),
        ("syncPolicy", c_int),
        ("clusterDim", Dim3),
        ("clusterSchedulingPolicyPreference", c_int),
        ("programmaticStreamSerializationAllowed", c_int),
        ("programmaticEvent", ProgrammaticEvent),
        ("launchCompletionEvent", LaunchCompletionEvent),
        ("priority", c_int),
        ("memSyncDomainMap", CUlaunchMemSyncDomainMap),
        ("memSyncDomain", c_int),
        ("preferredClusterDim", Dim3),
        ("deviceUpdatableKernelNode", DeviceUpdatableKernelNode),
        ("sharedMemCarveout", c_uint),
        ("nvlinkUtilCentricScheduling", c_uint),
        ("portableClusterSizeMode", c_int),
        ("sharedMemoryMode", c_int),
    ]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", c_int), ("pad", ctypes.c_char * 4), ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [
        ("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
        ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint),
        ("sharedMemBytes", c_uint),
        ("hStream", c_void_p),
        ("attrs", ctypes.POINTER(CUlaunchAttribute)),
        ("numAttrs", c_uint),
    ]


# CUlaunchAttributePortableClusterMode (cuda.h; its enum is small and stable)
PORTABLE_CLUSTER_MODE = {"DEFAULT": 0, "REQUIRE_PORTABLE": 1, "ALLOW_NON_PORTABLE": 2}

"""The C prototypes of every driver function lowlevel calls, as cuda.h declares them.

Each entry is the public name, the exported symbol that cuda.h maps it to (the versioned
`_v2` names), and the argument types. Every function returns a CUresult (a C int). Both
drivers implement this table: the real libcuda, and the emulated GPU (lowlevel/emu).
Pointers are declared `c_void_p` (callers pass `byref(x)`, buffers or ints); device pointers
(CUdeviceptr) are 64-bit integers, which is what they are in C.
"""
import ctypes
from ctypes import c_char_p, c_int, c_size_t, c_uint, c_uint64, c_ubyte, c_ushort, c_void_p

from .structs import CUmemLocation

CUresult = c_int
CUdevice = c_int
CUdeviceptr = c_uint64
handle = c_void_p          # CUcontext, CUmodule, CUfunction, CUstream, CUevent: opaque pointers
ptr = c_void_p             # any T* (out-parameters, host buffers, arrays)

# public name: (exported symbol, argument types)
PROTOTYPES: dict[str, tuple[str, tuple]] = {
    # initialisation, versions, errors
    "cuInit":                     ("cuInit", (c_uint,)),
    "cuDriverGetVersion":         ("cuDriverGetVersion", (ptr,)),
    "cuGetErrorName":             ("cuGetErrorName", (CUresult, ptr)),
    "cuGetErrorString":           ("cuGetErrorString", (CUresult, ptr)),
    # devices
    "cuDeviceGetCount":           ("cuDeviceGetCount", (ptr,)),
    "cuDeviceGet":                ("cuDeviceGet", (ptr, c_int)),
    "cuDeviceGetName":            ("cuDeviceGetName", (ptr, c_int, CUdevice)),
    "cuDeviceTotalMem":           ("cuDeviceTotalMem_v2", (ptr, CUdevice)),
    "cuDeviceGetAttribute":       ("cuDeviceGetAttribute", (ptr, c_int, CUdevice)),
    "cuDeviceGetUuid":            ("cuDeviceGetUuid_v2", (ptr, CUdevice)),
    "cuDeviceGetPCIBusId":        ("cuDeviceGetPCIBusId", (ptr, c_int, CUdevice)),
    # the primary context
    "cuDevicePrimaryCtxRetain":   ("cuDevicePrimaryCtxRetain", (ptr, CUdevice)),
    "cuDevicePrimaryCtxRelease":  ("cuDevicePrimaryCtxRelease_v2", (CUdevice,)),
    "cuDevicePrimaryCtxReset":    ("cuDevicePrimaryCtxReset_v2", (CUdevice,)),
    "cuCtxSetCurrent":            ("cuCtxSetCurrent", (handle,)),
    "cuCtxGetCurrent":            ("cuCtxGetCurrent", (ptr,)),
    "cuCtxGetDevice":             ("cuCtxGetDevice", (ptr,)),
    "cuCtxSynchronize":           ("cuCtxSynchronize", ()),
    "cuProfilerStart":            ("cuProfilerStart", ()),
    "cuProfilerStop":             ("cuProfilerStop", ()),
    "cuCtxGetDevice_v2":          ("cuCtxGetDevice_v2", (ptr, handle)),      # CUDA 13: of a context,
    "cuCtxSynchronize_v2":        ("cuCtxSynchronize_v2", (handle,)),        # NULL: the current one
    # the context stack, and contexts made by other clients (the emulated libcuda's; ctx_stack.py)
    "cuCtxPushCurrent":           ("cuCtxPushCurrent_v2", (handle,)),
    "cuCtxPopCurrent":            ("cuCtxPopCurrent_v2", (ptr,)),
    "cuCtxCreate":                ("cuCtxCreate_v4", (ptr, ptr, c_uint, CUdevice)),
    "cuCtxCreate_v2":             ("cuCtxCreate_v2", (ptr, c_uint, CUdevice)),    # before CUDA 12.5
    "cuCtxDestroy":               ("cuCtxDestroy_v2", (handle,)),
    "cuCtxGetApiVersion":         ("cuCtxGetApiVersion", (handle, ptr)),
    "cuCtxGetFlags":              ("cuCtxGetFlags", (ptr,)),
    "cuDevicePrimaryCtxGetState": ("cuDevicePrimaryCtxGetState", (CUdevice, ptr, ptr)),
    "cuDevicePrimaryCtxSetFlags": ("cuDevicePrimaryCtxSetFlags_v2", (CUdevice, c_uint)),
    # several devices: peer access and copies between contexts
    "cuDeviceCanAccessPeer":      ("cuDeviceCanAccessPeer", (ptr, CUdevice, CUdevice)),
    "cuCtxEnablePeerAccess":      ("cuCtxEnablePeerAccess", (handle, c_uint)),
    "cuCtxDisablePeerAccess":     ("cuCtxDisablePeerAccess", (handle,)),
    "cuMemcpyPeer":               ("cuMemcpyPeer", (CUdeviceptr, handle, CUdeviceptr, handle, c_size_t)),
    "cuMemcpyPeerAsync":          ("cuMemcpyPeerAsync", (CUdeviceptr, handle, CUdeviceptr, handle, c_size_t, handle)),
    # context limits (CUlimit: a C enum, an int) and stream priorities
    "cuCtxGetLimit":              ("cuCtxGetLimit", (ptr, c_int)),
    "cuCtxSetLimit":              ("cuCtxSetLimit", (c_int, c_size_t)),
    "cuCtxGetStreamPriorityRange": ("cuCtxGetStreamPriorityRange", (ptr, ptr)),
    # memory
    "cuMemGetInfo":               ("cuMemGetInfo_v2", (ptr, ptr)),
    "cuMemAlloc":                 ("cuMemAlloc_v2", (ptr, c_size_t)),
    "cuMemFree":                  ("cuMemFree_v2", (CUdeviceptr,)),
    "cuMemGetAddressRange":       ("cuMemGetAddressRange_v2", (ptr, ptr, CUdeviceptr)),
    "cuMemAllocHost":             ("cuMemAllocHost_v2", (ptr, c_size_t)),
    "cuMemFreeHost":              ("cuMemFreeHost", (ptr,)),
    "cuMemHostAlloc":             ("cuMemHostAlloc", (ptr, c_size_t, c_uint)),
    "cuMemHostGetFlags":          ("cuMemHostGetFlags", (ptr, ptr)),
    "cuMemAllocAsync":            ("cuMemAllocAsync", (ptr, c_size_t, handle)),
    "cuMemFreeAsync":             ("cuMemFreeAsync", (CUdeviceptr, handle)),
    "cuMemcpyHtoD":               ("cuMemcpyHtoD_v2", (CUdeviceptr, ptr, c_size_t)),
    "cuMemcpyDtoH":               ("cuMemcpyDtoH_v2", (ptr, CUdeviceptr, c_size_t)),
    "cuMemcpyDtoD":               ("cuMemcpyDtoD_v2", (CUdeviceptr, CUdeviceptr, c_size_t)),
    "cuMemcpyHtoDAsync":          ("cuMemcpyHtoDAsync_v2", (CUdeviceptr, ptr, c_size_t, handle)),
    "cuMemcpyDtoHAsync":          ("cuMemcpyDtoHAsync_v2", (ptr, CUdeviceptr, c_size_t, handle)),
    "cuMemcpyDtoDAsync":          ("cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, c_size_t, handle)),
    "cuMemsetD8":                 ("cuMemsetD8_v2", (CUdeviceptr, c_ubyte, c_size_t)),
    "cuMemsetD32":                ("cuMemsetD32_v2", (CUdeviceptr, c_uint, c_size_t)),
    "cuMemsetD8Async":            ("cuMemsetD8Async", (CUdeviceptr, c_ubyte, c_size_t, handle)),
    "cuMemsetD32Async":           ("cuMemsetD32Async", (CUdeviceptr, c_uint, c_size_t, handle)),
    # pitched memory (CUDA_MEMCPY2D/3D: lowlevel/capi/structs.py, passed by pointer)
    "cuMemAllocPitch":            ("cuMemAllocPitch_v2", (ptr, ptr, c_size_t, c_size_t, c_uint)),
    "cuMemcpy2D":                 ("cuMemcpy2D_v2", (ptr,)),
    "cuMemcpy2DAsync":            ("cuMemcpy2DAsync_v2", (ptr, handle)),
    "cuMemcpy3D":                 ("cuMemcpy3D_v2", (ptr,)),
    "cuMemcpy3DAsync":            ("cuMemcpy3DAsync_v2", (ptr, handle)),
    "cuMemsetD16":                ("cuMemsetD16_v2", (CUdeviceptr, c_ushort, c_size_t)),
    "cuMemsetD16Async":           ("cuMemsetD16Async", (CUdeviceptr, c_ushort, c_size_t, handle)),
    "cuMemsetD2D32":              ("cuMemsetD2D32_v2", (CUdeviceptr, c_size_t, c_uint, c_size_t, c_size_t)),
    "cuMemsetD2D32Async":         ("cuMemsetD2D32Async", (CUdeviceptr, c_size_t, c_uint, c_size_t, c_size_t, handle)),
    # managed and registered memory (CUmemLocation: lowlevel/capi/structs.py, passed by value)
    "cuMemAllocManaged":          ("cuMemAllocManaged", (ptr, c_size_t, c_uint)),
    "cuMemPrefetchAsync":         ("cuMemPrefetchAsync_v2", (CUdeviceptr, c_size_t, CUmemLocation, c_uint, handle)),
    "cuMemAdvise":                ("cuMemAdvise_v2", (CUdeviceptr, c_size_t, c_int, CUmemLocation)),
    "cuMemRangeGetAttribute":     ("cuMemRangeGetAttribute", (ptr, c_size_t, c_int, CUdeviceptr, c_size_t)),
    "cuMemHostRegister":          ("cuMemHostRegister_v2", (ptr, c_size_t, c_uint)),
    "cuMemHostUnregister":        ("cuMemHostUnregister", (ptr,)),
    "cuMemHostGetDevicePointer":  ("cuMemHostGetDevicePointer_v2", (ptr, ptr, c_uint)),
    # pointer attributes (CUpointer_attribute: a C enum, an int)
    "cuPointerGetAttribute":      ("cuPointerGetAttribute", (ptr, c_int, CUdeviceptr)),
    "cuPointerGetAttributes":     ("cuPointerGetAttributes", (c_uint, ptr, ptr, CUdeviceptr)),
    # modules and functions
    "cuModuleLoadData":           ("cuModuleLoadData", (ptr, ptr)),
    "cuModuleLoadDataEx":         ("cuModuleLoadDataEx", (ptr, ptr, c_uint, ptr, ptr)),
    "cuModuleLoadFatBinary":      ("cuModuleLoadFatBinary", (ptr, ptr)),
    "cuModuleUnload":             ("cuModuleUnload", (handle,)),
    "cuModuleGetFunction":        ("cuModuleGetFunction", (ptr, handle, c_char_p)),
    "cuModuleGetGlobal":          ("cuModuleGetGlobal_v2", (ptr, ptr, handle, c_char_p)),
    # the driver's linker (CUlinkState: opaque; CUjitInputType: a C enum, an int)
    "cuLinkCreate":               ("cuLinkCreate_v2", (c_uint, ptr, ptr, ptr)),
    "cuLinkAddData":              ("cuLinkAddData_v2", (handle, c_int, ptr, c_size_t, c_char_p, c_uint, ptr, ptr)),
    "cuLinkAddFile":              ("cuLinkAddFile_v2", (handle, c_int, c_char_p, c_uint, ptr, ptr)),
    "cuLinkComplete":             ("cuLinkComplete", (handle, ptr, ptr)),
    "cuLinkDestroy":              ("cuLinkDestroy", (handle,)),
    "cuFuncGetAttribute":         ("cuFuncGetAttribute", (ptr, c_int, handle)),
    "cuFuncSetAttribute":         ("cuFuncSetAttribute", (handle, c_int, c_int)),
    "cuFuncGetParamInfo":         ("cuFuncGetParamInfo", (handle, c_size_t, ptr, ptr)),
    "cuLaunchKernel":             ("cuLaunchKernel", (handle, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
                                                      c_uint, handle, ptr, ptr)),
    "cuLaunchKernelEx":           ("cuLaunchKernelEx", (ptr, handle, ptr, ptr)),
    "cuLaunchCooperativeKernel":  ("cuLaunchCooperativeKernel", (handle, c_uint, c_uint, c_uint, c_uint, c_uint,
                                                                 c_uint, c_uint, handle, ptr)),
    # memory pools (other clients'; mempools.py; CUmemLocation passed by pointer here)
    "cuDeviceGetDefaultMemPool":  ("cuDeviceGetDefaultMemPool", (ptr, CUdevice)),
    "cuDeviceGetMemPool":         ("cuDeviceGetMemPool", (ptr, CUdevice)),
    "cuDeviceSetMemPool":         ("cuDeviceSetMemPool", (CUdevice, handle)),
    "cuMemPoolCreate":            ("cuMemPoolCreate", (ptr, ptr)),
    "cuMemPoolDestroy":           ("cuMemPoolDestroy", (handle,)),
    "cuMemAllocFromPoolAsync":    ("cuMemAllocFromPoolAsync", (ptr, c_size_t, handle, handle)),
    "cuMemPoolGetAttribute":      ("cuMemPoolGetAttribute", (handle, c_int, ptr)),
    "cuMemPoolSetAttribute":      ("cuMemPoolSetAttribute", (handle, c_int, ptr)),
    "cuMemPoolTrimTo":            ("cuMemPoolTrimTo", (handle, c_size_t)),
    "cuMemPoolGetAccess":         ("cuMemPoolGetAccess", (ptr, handle, ptr)),
    # libraries and kernels, context-independent loading (other clients'; libraries.py)
    "cuLibraryLoadData":          ("cuLibraryLoadData", (ptr, ptr, ptr, ptr, c_uint, ptr, ptr, c_uint)),
    "cuLibraryUnload":            ("cuLibraryUnload", (handle,)),
    "cuLibraryGetModule":         ("cuLibraryGetModule", (ptr, handle)),
    "cuLibraryGetKernel":         ("cuLibraryGetKernel", (ptr, handle, c_char_p)),
    "cuLibraryGetGlobal":         ("cuLibraryGetGlobal", (ptr, ptr, handle, c_char_p)),
    "cuKernelGetFunction":        ("cuKernelGetFunction", (ptr, handle)),
    "cuKernelGetName":            ("cuKernelGetName", (ptr, handle)),
    "cuKernelGetAttribute":       ("cuKernelGetAttribute", (ptr, c_int, handle, CUdevice)),
    "cuKernelSetAttribute":       ("cuKernelSetAttribute", (c_int, c_int, handle, CUdevice)),
    "cuKernelSetCacheConfig":     ("cuKernelSetCacheConfig", (handle, c_int, CUdevice)),
    "cuFuncSetCacheConfig":       ("cuFuncSetCacheConfig", (handle, c_int)),
    "cuKernelGetParamInfo":       ("cuKernelGetParamInfo", (handle, c_size_t, ptr, ptr)),
    # TMA descriptors (CUtensorMap: 128 bytes, 64-aligned; its enums are C ints; tensormaps.py)
    "cuTensorMapEncodeTiled":     ("cuTensorMapEncodeTiled", (ptr, c_int, c_uint, ptr, ptr, ptr, ptr, ptr,
                                                              c_int, c_int, c_int, c_int)),
    "cuTensorMapEncodeIm2col":    ("cuTensorMapEncodeIm2col", (ptr, c_int, c_uint, ptr, ptr, ptr, ptr, ptr,
                                                               c_uint, c_uint, ptr, c_int, c_int, c_int, c_int)),
    "cuTensorMapReplaceAddress":  ("cuTensorMapReplaceAddress", (ptr, ptr)),
    # occupancy (CUoccupancyB2DSize: a C function pointer, capi/launch_types.py)
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": ("cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                                    (ptr, handle, c_int, c_size_t)),
    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags": ("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                                                             (ptr, handle, c_int, c_size_t, c_uint)),
    "cuOccupancyMaxPotentialBlockSize": ("cuOccupancyMaxPotentialBlockSize", (ptr, ptr, handle, ptr, c_size_t, c_int)),
    "cuOccupancyMaxPotentialBlockSizeWithFlags": ("cuOccupancyMaxPotentialBlockSizeWithFlags",
                                                  (ptr, ptr, handle, ptr, c_size_t, c_int, c_uint)),
    "cuOccupancyAvailableDynamicSMemPerBlock": ("cuOccupancyAvailableDynamicSMemPerBlock", (ptr, handle, c_int, c_int)),
    "cuOccupancyMaxActiveClusters": ("cuOccupancyMaxActiveClusters", (ptr, handle, ptr)),
    "cuOccupancyMaxPotentialClusterSize": ("cuOccupancyMaxPotentialClusterSize", (ptr, handle, ptr)),
    # streams
    "cuStreamCreate":             ("cuStreamCreate", (ptr, c_uint)),
    "cuStreamCreateWithPriority": ("cuStreamCreateWithPriority", (ptr, c_uint, c_int)),
    "cuStreamGetPriority":        ("cuStreamGetPriority", (handle, ptr)),
    "cuStreamGetFlags":           ("cuStreamGetFlags", (handle, ptr)),
    "cuStreamDestroy":            ("cuStreamDestroy_v2", (handle,)),
    "cuStreamSynchronize":        ("cuStreamSynchronize", (handle,)),
    "cuStreamQuery":              ("cuStreamQuery", (handle,)),
    "cuStreamWaitEvent":          ("cuStreamWaitEvent", (handle, handle, c_uint)),
    "cuLaunchHostFunc":           ("cuLaunchHostFunc", (handle, ptr, ptr)),
    # CUDA 13: with a CUhostTaskSyncMode (CU_HOST_TASK_BLOCKING 0, CU_HOST_TASK_SPINWAIT 1)
    "cuLaunchHostFunc_v2":        ("cuLaunchHostFunc_v2", (handle, ptr, ptr, c_uint)),
    # stream capture (CUstreamCaptureMode, CUstreamCaptureStatus: C enums, ints)
    "cuStreamBeginCapture":       ("cuStreamBeginCapture_v2", (handle, c_int)),
    "cuStreamEndCapture":         ("cuStreamEndCapture", (handle, ptr)),
    "cuStreamIsCapturing":        ("cuStreamIsCapturing", (handle, ptr)),
    "cuStreamGetCaptureInfo":     ("cuStreamGetCaptureInfo_v3", (handle, ptr, ptr, ptr, ptr, ptr, ptr)),
    "cuThreadExchangeStreamCaptureMode": ("cuThreadExchangeStreamCaptureMode", (ptr,)),
    # graphs (CUgraph, CUgraphExec, CUgraphNode: opaque pointers)
    "cuGraphInstantiateWithFlags": ("cuGraphInstantiateWithFlags", (ptr, handle, c_uint64)),
    "cuGraphLaunch":              ("cuGraphLaunch", (handle, handle)),
    "cuGraphExecDestroy":         ("cuGraphExecDestroy", (handle,)),
    "cuGraphDestroy":             ("cuGraphDestroy", (handle,)),
    "cuGraphGetNodes":            ("cuGraphGetNodes", (handle, ptr, ptr)),
    "cuGraphNodeGetType":         ("cuGraphNodeGetType", (handle, ptr)),
    "cuGraphDebugDotPrint":       ("cuGraphDebugDotPrint", (handle, c_char_p, c_uint)),
    "cuGraphExecUpdate":          ("cuGraphExecUpdate_v2", (handle, handle, ptr)),
    "cuGraphExecKernelNodeSetParams": ("cuGraphExecKernelNodeSetParams_v2", (handle, handle, ptr)),
    # events
    "cuEventCreate":              ("cuEventCreate", (ptr, c_uint)),
    "cuEventDestroy":             ("cuEventDestroy_v2", (handle,)),
    "cuEventRecord":              ("cuEventRecord", (handle, handle)),
    "cuEventSynchronize":         ("cuEventSynchronize", (handle,)),
    "cuEventQuery":               ("cuEventQuery", (handle,)),
    "cuEventElapsedTime":         ("cuEventElapsedTime_v2", (ptr, handle, handle)),
}

# Drivers older than the header may lack a versioned symbol but export its predecessor with
# the same prototype (cuEventElapsedTime_v2 arrived in CUDA 12.8); bind that instead.
OLDER_SYMBOLS = {"cuEventElapsedTime": "cuEventElapsedTime"}

# The C type of a host callback passed to cuLaunchHostFunc: void (*)(void *userData).
CUhostFn = ctypes.CFUNCTYPE(None, c_void_p)


def prototype(name: str):
    """The ctypes function type of `name`: returns CUresult, takes the table's argtypes."""
    return ctypes.CFUNCTYPE(CUresult, *PROTOTYPES[name][1])

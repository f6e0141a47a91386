"""Context-independent loading (cuLibrary*, cuKernel*), as cuda.core and numba-cuda load code.

A library is, on the emulated device, a module of the current context (each device has only
its primary context, where the driver would load a library into every context): its handle
is the module's, and a CUkernel is the CUfunction of that module, so cuKernelGetFunction
returns the kernel handle itself and a CUkernel passed to cuLaunchKernel launches, as the
driver documents. What the module calls check, these check too (they call them).
"""
import ctypes

from .context import api, current
from .entry import write_out
from .errors import EmuError, static_c_string
from .funcattrs import cuFuncGetAttribute, cuFuncSetAttribute
from .modules import (cuFuncGetParamInfo, cuModuleGetFunction, cuModuleGetGlobal, cuModuleLoadDataEx,
                      cuModuleUnload, function_of)

# CUlibraryOption: CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE 0, CU_LIBRARY_BINARY_IS_PRESERVED 1
LIBRARY_OPTIONS = (0, 1)
CACHE_CONFIGS = (0, 1, 2, 3)        # CUfunc_cache: PREFER_NONE, SHARED, L1, EQUAL


@api
def cuLibraryLoadData(library_out, image, jit_options, jit_values, jit_count, options, option_values, option_count):
    for i in range(option_count):
        option = ctypes.c_int.from_address(options + 4 * i).value
        if option not in LIBRARY_OPTIONS:
            raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuLibraryLoadData: unknown library option {option}")
    cuModuleLoadDataEx.__wrapped__(library_out, image, jit_count, jit_options, jit_values)


@api
def cuLibraryUnload(library):
    cuModuleUnload.__wrapped__(library)


@api
def cuLibraryGetModule(module_out, library):
    current()
    write_out(ctypes.c_void_p, module_out, library)


@api
def cuLibraryGetKernel(kernel_out, library, name):
    cuModuleGetFunction.__wrapped__(kernel_out, library, name)


@api
def cuLibraryGetGlobal(dptr_out, size_out, library, name):
    cuModuleGetGlobal.__wrapped__(dptr_out, size_out, library, name)


@api
def cuKernelGetFunction(function_out, kernel):
    function_of(current(), kernel)
    write_out(ctypes.c_void_p, function_out, kernel)


@api
def cuKernelGetName(name_out, kernel):
    function = function_of(current(), kernel)
    write_out(ctypes.c_void_p, name_out, static_c_string(function.kernel.name))


@api
def cuKernelGetAttribute(value_out, attribute, kernel, dev):
    cuFuncGetAttribute.__wrapped__(value_out, attribute, kernel)


@api
def cuKernelSetAttribute(attribute, value, kernel, dev):
    cuFuncSetAttribute.__wrapped__(kernel, attribute, value)


@api
def cuKernelSetCacheConfig(kernel, config, dev):
    function_of(current(), kernel)
    if config not in CACHE_CONFIGS:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"cuKernelSetCacheConfig: unknown CUfunc_cache {config}")


@api
def cuFuncSetCacheConfig(function, config):
    cuKernelSetCacheConfig.__wrapped__(function, config, 0)


@api
def cuKernelGetParamInfo(kernel, index, offset_out, size_out):
    cuFuncGetParamInfo.__wrapped__(kernel, index, offset_out, size_out)

"""CUresult codes as the emulated driver returns them, with descriptions written for it."""
import ctypes
import threading

from ...capi.constants import CURESULT, CURESULT_NAME

# What cuGetErrorString says on the emulated GPU, for the codes it can return.
DESCRIPTIONS = {
    "CUDA_SUCCESS": "no error",
    "CUDA_ERROR_INVALID_VALUE": "an argument is outside its allowed range",
    "CUDA_ERROR_OUT_OF_MEMORY": "not enough device memory for the request",
    "CUDA_ERROR_NOT_INITIALIZED": "the driver has not been initialised with cuInit",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is present",
    "CUDA_ERROR_INVALID_DEVICE": "the device ordinal is not a valid device",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image in the module can run on this device",
    "CUDA_ERROR_INVALID_IMAGE": "the module image is not a valid PTX, cubin or fatbin",
    "CUDA_ERROR_INVALID_CONTEXT": "there is no current context on this thread, or it is invalid",
    "CUDA_ERROR_INVALID_PTX": "PTX JIT compilation failed",
    "CUDA_ERROR_INVALID_SOURCE": "device kernel image is invalid (a link input defines a symbol twice)",
    "CUDA_ERROR_FILE_NOT_FOUND": "file not found",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX ISA version is newer than this driver supports",
    "CUDA_ERROR_INVALID_HANDLE": "a handle (stream, event, module, function) is invalid",
    "CUDA_ERROR_NOT_FOUND": "a named symbol (kernel or variable) was not found",
    "CUDA_ERROR_NOT_READY": "asynchronous work issued earlier has not completed yet",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel loaded or stored through an invalid address",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "a kernel loaded or stored through a misaligned address",
    "CUDA_ERROR_LAUNCH_FAILED": "a kernel failed on the device (trap or other exception)",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "a kernel ran past the watchdog's limit and was stopped",
    "CUDA_ERROR_ASSERT": "a device-side assert() failed in a kernel",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the launch asks for more resources than the device has",
    "CUDA_ERROR_NOT_SUPPORTED": "the operation is not supported by the emulated GPU",
    "CUDA_ERROR_INVALID_CLUSTER_SIZE": "the launch's cluster shape is invalid for this kernel or device",
    "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE": "a cooperative grid has more blocks than can be resident at once",
    "CUDA_ERROR_NOT_PERMITTED": "the operation is not permitted (e.g. changing a compile-time attribute)",
    "CUDA_ERROR_UNKNOWN": "an unexpected internal error in the emulated driver",
}


class EmuError(Exception):
    """Raised inside an emulated driver function to return `code`; `details` say why."""

    def __init__(self, name: str, details: str = ""):
        super().__init__(f"{name}: {details}" if details else name)
        self.code = CURESULT[name]
        self.name = name
        self.details = details


def describe(code: int) -> str | None:
    name = CURESULT_NAME.get(code)
    if name is None:
        return None
    return DESCRIPTIONS.get(name, name.replace("CUDA_ERROR_", "").replace("_", " ").lower())


_c_strings: dict = {}
_c_strings_lock = threading.Lock()


def static_c_string(text: str) -> int:
    """Address of a NUL-terminated copy of `text` that lives as long as the process (the
    `const char*` that cuGetErrorName, cublasGetStatusString and the like hand out)."""
    with _c_strings_lock:
        buf = _c_strings.get(text)
        if buf is None:
            buf = _c_strings[text] = ctypes.create_string_buffer(text.encode())
        return ctypes.addressof(buf)

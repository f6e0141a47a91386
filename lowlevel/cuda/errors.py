"""CudaError: a failed driver call, with everything needed to understand it."""
from ..capi.constants import CURESULT_NAME


class CudaError(RuntimeError):
    """A driver call returned something other than CUDA_SUCCESS.

    .code         the CUresult number
    .name         its name, e.g. CUDA_ERROR_INVALID_PTX
    .description  the driver's own text for it (cuGetErrorString)
    .function     the driver function that returned it, e.g. cuModuleLoadDataEx
    .log          the JIT error log for module loads, else ""
    .details      what the emulated GPU knows beyond the code (which kernel, thread, line and
                  address faulted); "" on the real driver, which reports the code alone
    """

    def __init__(self, code: int, function: str, description: str = "", log: str = "", details: str = ""):
        self.code = code
        self.name = CURESULT_NAME.get(code, f"CUresult {code}")
        self.description = description
        self.function = function
        self.log = log
        self.details = details
        text = f"{function} failed: {self.name} ({code})"
        if description:
            text += f": {description}"
        if details and details.strip() != log.strip():
            text += f"\n{details}"
        if log:
            text += f"\nJIT log:\n{log.rstrip()}"
        super().__init__(text)


class ContextResetError(ValueError):
    """An object made in a context that has since been reset (cuda.reset_device()) was used.

    Its handle or device address stood for something in the old context; the new one may
    have given the same number to something else, so it is refused, never passed on."""

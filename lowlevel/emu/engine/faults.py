"""What can go wrong while the emulated GPU runs a kernel.

A fault inside a kernel does not raise in the caller's thread: the stream's worker catches
it, the context records it as a sticky error, and the next synchronising driver call
returns its CUresult, exactly as a real GPU reports an illegal address late.
"""


class KernelFault(Exception):
    """A launch that aborted on the device.

    `code_name` is the CUresult it turns into (CUDA_ERROR_ILLEGAL_ADDRESS,
    CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_LAUNCH_TIMEOUT, ...);
    the message names the kernel, block, thread, PTX line, access size and address.
    """

    def __init__(self, code_name: str, message: str):
        super().__init__(message)
        self.code_name = code_name
        self.message = message


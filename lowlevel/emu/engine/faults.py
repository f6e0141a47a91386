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



class WarpWait(Exception):
    """Raised by a warp instruction's member-mask check (isa/warpmask.py) on the divergent
    path when lanes it names are elsewhere in the kernel: on sm_70 and later the executing
    lanes wait for them there. The block has done nothing yet (a warp instruction starts its
    block), so the scheduler parks `lanes` (batch lane numbers) at it with their member
    `masks` and the `values` they give other lanes (None for bar.warp.sync): warpwait.py."""

    def __init__(self, lanes, masks, values=None):
        super().__init__("warp instruction waits for lanes named in its member mask")
        self.lanes = lanes
        self.masks = masks
        self.values = values

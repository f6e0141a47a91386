"""The one error of the PTX front end (and of decoding): PTX the emulator cannot load."""


class PtxError(Exception):
    """PTX the emulator cannot load: a syntax error or an instruction it does not support.

    Raised at module load, never at run time; the driver turns it into
    CUDA_ERROR_INVALID_PTX and puts `str(self)` in the JIT error log.
    """

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line
        self.message = message

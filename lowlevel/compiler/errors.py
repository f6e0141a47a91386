"""Errors of the compile pipeline; each carries the tool's own log."""


class CompileError(Exception):
    """NVRTC could not compile the source. `.log` is NVRTC's log (file:line: error ...)."""

    def __init__(self, message: str, log: str = "", options=()):
        super().__init__(f"{message}\n{log.rstrip()}" if log else message)
        self.log = log
        self.options = tuple(options)


class LinkError(Exception):
    """nvJitLink (or nvfatbin) failed. `.log` is the linker's error log (with ptxas's lines)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(f"{message}\n{log.rstrip()}" if log else message)
        self.log = log


class ToolMissing(RuntimeError):
    """A toolkit program or library is not installed; the message says how to get it."""

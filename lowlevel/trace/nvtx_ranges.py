"""NVTX ranges, so that Nsight Systems shows lowlevel's layers beside the GPU's work: the
`nvtx` package (the optional `nvtx` extra). Ranges are pushed only while a profile is active
(its hooks are the only callers), and only when `nvtx` imports; LOWLEVEL_NVTX=0 turns them
off. Without a profiler attached (nsys), the nvtx package's calls are no-ops.

    domain "lowlevel", categories: "dispatch" (each op: dispatch and backend), "ctypes" (each
    driver and cuBLAS call); the frontend's validation is a mark ("validated OP") when it ends
"""
import os

DOMAIN = "lowlevel"
_module = None          # the nvtx module, False if unavailable or off, None until first asked


def nvtx():
    """The nvtx module if ranges are on, else None."""
    global _module
    if _module is None:
        _module = False
        if os.environ.get("LOWLEVEL_NVTX", "") != "0":
            try:
                import nvtx as found  # noqa: PLC0415  (optional)
                _module = found
            except ImportError:
                pass
    return _module or None


def reset() -> None:
    """Look for the nvtx package (and LOWLEVEL_NVTX) again at the next profile."""
    global _module
    _module = None


def push(message: str, category: str) -> None:
    module = nvtx()
    if module is not None:
        module.push_range(message=message, domain=DOMAIN, category=category)


def pop() -> None:
    module = nvtx()
    if module is not None:
        module.pop_range(domain=DOMAIN)


def mark(message: str, category: str) -> None:
    module = nvtx()
    if module is not None:
        module.mark(message=message, domain=DOMAIN, category=category)

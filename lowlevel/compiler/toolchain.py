"""The NVIDIA toolchain pieces that need no GPU, found with cuda.pathfinder.

ptxas, nvdisasm and cuobjdump are programs (from the nvidia-cuda-nvcc wheel, or a CUDA
install); NVRTC and nvJitLink are libraries reached through cuda-python's bindings.

cuda-python is imported inside the functions: a piece that is missing is reported as
missing (by `lowlevel info`), and importing lowlevel does not need it.
"""
import functools
import re
import subprocess


@functools.cache
def find_tool(name: str) -> str | None:
    """Path of a toolkit program (ptxas, nvdisasm, cuobjdump, nvcc), or None."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility  # noqa: PLC0415  (optional: see the module doc)
    except ImportError:
        return None
    return find_nvidia_binary_utility(name)


def tool_version(name: str) -> str | None:
    """"13.5.37"-style version of a toolkit program, or None when it is absent."""
    path = find_tool(name)
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1]


def nvrtc_version() -> str | None:
    try:
        from cuda.bindings import nvrtc  # noqa: PLC0415  (optional: see the module doc)
        _, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}"
    except Exception:
        return None


def nvjitlink_version() -> str | None:
    try:
        from cuda.bindings import nvjitlink  # noqa: PLC0415  (optional: see the module doc)
        major, minor = nvjitlink.version()
        return f"{major}.{minor}"
    except Exception:
        return None


def summary() -> dict[str, str]:
    """Each toolchain piece -> its version and where it is, or why it is missing."""
    out = {}
    for tool in ("ptxas", "nvdisasm", "cuobjdump"):
        version = tool_version(tool)
        out[tool] = f"{version} ({find_tool(tool)})" if version else "not found"
    out["NVRTC"] = nvrtc_version() or "not found (pip install cuda-python)"
    out["nvJitLink"] = nvjitlink_version() or "not found (pip install nvidia-nvjitlink)"
    return out

"""Which PTX a driver accepts: a fact of the driver ABI, shared by the real and emulated sides.

A driver JITs PTX up to the ISA version of its own CUDA release; newer PTX is refused with
CUDA_ERROR_UNSUPPORTED_PTX_VERSION. That is why PTX from a new NVRTC may not load on an
older driver, while a cubin compiled for the exact GPU does.
"""
import re

# lowlevel's own version (lowlevel.__version__); the compile cache keys on it, and it lives
# here, at the bottom, so that the compiler need not import the package's root for it.
LOWLEVEL_VERSION = "0.1.0"


def format_driver_version(version: int) -> str:
    """A CUDA version as cuDriverGetVersion reports it (1000 * major + 10 * minor) in the
    usual form: 13000 -> "13.0", 12080 -> "12.8"."""
    return f"{version // 1000}.{version % 1000 // 10}"


def max_ptx_isa(driver_version: int) -> tuple[int, int]:
    """The newest PTX ISA a driver of this CUDA version (e.g. 13000) JITs.

    11.x -> 7.x, 12.0-12.4 -> 8.0-8.4, 12.5 and 12.6 -> 8.5, 12.8 -> 8.7, 12.9 -> 8.8,
    13.x -> 9.x."""
    major, minor = driver_version // 1000, (driver_version % 1000) // 10
    if major == 12:
        return (8, {5: 5, 6: 5, 7: 6, 8: 7, 9: 8}.get(minor, minor))
    return (major - 4, minor)


def ptx_isa_version(ptx: str) -> tuple[int, int]:
    """The (major, minor) of a PTX text's .version directive."""
    m = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.M)
    if not m:
        raise ValueError("PTX text without a .version directive")
    return int(m.group(1)), int(m.group(2))


def target_refusal(target: str, have: int) -> str:
    """Why PTX for `.target target` cannot run on this device ('' when it can), as a JIT
    refuses it: PTX for sm_XY runs on compute capability X.Y and above; an architecture-
    specific target (sm_90a, sm_100f) only on exactly that architecture."""
    m = re.fullmatch(r"sm_(\d+)([af]?)", target)
    if m is None:
        return f"unknown target {target!r}"
    want, suffix = int(m.group(1)), m.group(2)
    if want > have:
        return (f"SM version specified by .target ({target}) is higher than the device's "
                f"(sm_{have}, compute capability {have // 10}.{have % 10})")
    if suffix and want != have:
        return (f".target {target} is architecture-specific: it runs on sm_{want} only, "
                f"and the device is sm_{have}")
    return ""

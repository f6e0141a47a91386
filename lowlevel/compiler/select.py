"""Which image to hand the driver for CUDA C compiled here: SASS or PTX, and why.

On a real GPU a cubin for its exact architecture is best: nothing is left to JIT, and it
loads whatever PTX ISA the driver knows. PTX is the fallback, and it only loads when the
driver is at least as new as the compiler's PTX ISA: NVRTC 13.5 writes `.version 9.5`,
which a CUDA 13.0 driver refuses (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). The emulated GPU
runs PTX only, so there PTX must fit its driver version.
"""
from ..capi.versions import format_driver_version, max_ptx_isa


class NoLoadableImage(RuntimeError):
    """Nothing this compiler can produce will load on this device; the message says why."""


def plan(emulated: bool, device_arch: int, driver_version: int, sass_archs, ptx_isa: tuple[int, int],
         nvrtc_version: tuple[int, int]) -> list[str]:
    """The kinds of image to try, best first: "sass" and/or "ptx-jit".

    Raises NoLoadableImage, saying exactly why, when neither can work."""
    newest = max_ptx_isa(driver_version)
    driver = format_driver_version(driver_version)
    ptx_ok = tuple(ptx_isa) <= newest
    steps = []
    if not emulated and device_arch in sass_archs:
        steps.append("sass")
    if ptx_ok:
        steps.append("ptx-jit")
    if steps:
        return steps
    why_ptx = (f"its PTX (ISA {ptx_isa[0]}.{ptx_isa[1]}, from NVRTC {nvrtc_version[0]}.{nvrtc_version[1]}) "
               f"is newer than the driver (CUDA {driver}) accepts (at most ISA {newest[0]}.{newest[1]})")
    if emulated:
        raise NoLoadableImage(f"the emulated GPU runs PTX only, and {why_ptx}; "
                              f"unset LOWLEVEL_EMU_DRIVER_VERSION or use an older NVRTC")
    raise NoLoadableImage(f"NVRTC {nvrtc_version[0]}.{nvrtc_version[1]} cannot compile SASS for sm_{device_arch} "
                          f"(it knows {', '.join(f'sm_{a}' for a in sorted(sass_archs))}), and {why_ptx}; "
                          f"update the driver, or install an NVRTC that knows sm_{device_arch}")

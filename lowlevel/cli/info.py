"""`lowlevel info`: the driver in use (real or emulated, and why), each device, and the
toolchain found."""
from .. import __version__, cuda
from ..compiler import toolchain


def add_parser(sub) -> None:
    sub.add_parser("info", help="the driver in use (real or emulated), devices and toolchain").set_defaults(run=command)


def command(args) -> int:
    """The driver in use, each device, and the toolchain found."""
    info = cuda.driver_info()
    print(f"lowlevel {__version__}")
    print(f"driver:  {info['kind']} - {info['description']}")
    print(f"         CUDA driver API version {info['version']}")
    print(f"         device times: {info['timing']}")
    if info["kind"] == "emu":
        # Imported here, not at the top: only the emulated GPU has a JIT of lowlevel's own.
        from .. import emu  # noqa: PLC0415
        print(f"         PTX JIT: {emu.assembler_description()}")
    for i in range(cuda.device_count()):
        dev = cuda.GPU(i)
        major, minor = dev.compute_capability
        print(f"device {i}: {dev.name}")
        print(f"         compute capability {major}.{minor} (sm_{major}{minor}), "
              f"{dev.multiprocessor_count} SMs, {dev.total_memory / 2**30:.1f} GiB, "
              f"{dev.attribute('MAX_THREADS_PER_BLOCK')} threads/block max")
    print("toolchain:")
    for name, what in toolchain.summary().items():
        print(f"  {name:10s} {what}")
    return 0

"""The `lowlevel` command (also `python -m lowlevel`)."""
import argparse
import sys


def cmd_info(args) -> int:
    """The driver in use, each device, and the toolchain found."""
    import lowlevel
    from lowlevel import cuda, toolchain
    info = cuda.driver_info()
    print(f"lowlevel {lowlevel.__version__}")
    print(f"driver:  {info['kind']} - {info['description']}")
    print(f"         CUDA driver API version {info['version']}")
    for i in range(cuda.device_count()):
        dev = cuda.Device(i)
        major, minor = dev.compute_capability
        print(f"device {i}: {dev.name}")
        print(f"         compute capability {major}.{minor} (sm_{major}{minor}), "
              f"{dev.multiprocessor_count} SMs, {dev.total_memory / 2**30:.1f} GiB, "
              f"{dev.attribute('MAX_THREADS_PER_BLOCK')} threads/block max")
    print("toolchain:")
    for name, what in toolchain.summary().items():
        print(f"  {name:10s} {what}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lowlevel", description="Drive a GPU from the CUDA driver API up.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="the driver in use (real or emulated), devices and toolchain").set_defaults(run=cmd_info)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

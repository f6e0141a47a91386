"""The `lowlevel` command (also `python -m lowlevel`): argument parsing here, one module
per subcommand.

    info.py    lowlevel info: the driver in use (real or emulated), devices, toolchain
    ptx.py     lowlevel ptx FILE: what a .cu or .ptx file becomes (PTX, SASS, resources, occupancy)
    trace.py   lowlevel trace OP: one op followed through the five layers, and the report
    demo.py    lowlevel demo [NAME]: the demos of sync and async execution (tools/demos/)
    emu_libcuda.py  lowlevel emu-libcuda: the emulated GPU as a drop-in libcuda.so.1 (its folder)
"""
import argparse
import sys

from . import demo, emu_libcuda, info, ptx, trace


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lowlevel", description="Drive a GPU from the CUDA driver API up.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (info, ptx, trace, demo, emu_libcuda):
        command.add_parser(sub)
    args = parser.parse_args(ptx.join_option_values(sys.argv[1:] if argv is None else list(argv)))
    if getattr(args, "emit", None) and not args.output:
        parser.error("--emit needs -o OUT")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

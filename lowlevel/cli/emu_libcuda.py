"""`lowlevel emu-libcuda`: build the emulated GPU's drop-in libcuda.so.1 if needed and print
the folder that holds it (libcuda.so.1 and libcuda.so), for LD_LIBRARY_PATH:

    LD_LIBRARY_PATH=$(lowlevel emu-libcuda) python YOUR_APP.py
"""
import sys

from ..emu import libcuda


def add_parser(sub) -> None:
    parser = sub.add_parser("emu-libcuda", help="build the emulated GPU's libcuda.so.1; print its folder",
                            description="Build (once, into the compile cache) the emulated GPU as a drop-in "
                                        "libcuda.so.1 and print the folder holding it, for LD_LIBRARY_PATH.")
    parser.set_defaults(run=command)


def command(args) -> int:
    try:
        print(libcuda.directory())
    except libcuda.BuildError as e:
        print(f"lowlevel emu-libcuda: {e}", file=sys.stderr)
        return 1
    return 0

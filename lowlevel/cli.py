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
    if info["kind"] == "emu":
        from lowlevel.emu import assembler
        print(f"         PTX JIT: {assembler.description()}")
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


def _heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 76 - len(text)))


def cmd_ptx(args) -> int:
    """Show the pipeline stage by stage: source, PTX, SASS, resources."""
    import pathlib

    from lowlevel import compiler
    path = pathlib.Path(args.file)
    data = path.read_bytes()
    is_ptx = path.suffix == ".ptx" or b".version" in data[:4096] and b"__global__" not in data
    arch = args.arch
    try:
        if is_ptx:
            ptx = data.decode()
        else:
            source = data.decode()
            _heading(f"CUDA C++ source: {path}")
            print(source.rstrip())
            ptx = compiler.compile(source, "ptx", arch, args.option, name=path.name)
        _heading(f"PTX ({'from ' + path.name if is_ptx else 'NVRTC for compute_' + str(compiler.parse_arch(arch))})")
        print(ptx.rstrip())
        cubin = None
        if args.sass or args.resources or args.emit in ("cubin", "fatbin"):
            cubin = compiler.link_ptx(ptx, arch, ("-O3",))
        if args.sass:
            _heading(f"SASS for sm_{compiler.parse_arch(arch)} (nvJitLink, then cuobjdump)")
            print(compiler.disassemble(cubin).rstrip())
        if args.resources:
            _heading(f"resources per kernel, sm_{compiler.parse_arch(arch)}")
            print(f"{'kernel':32s} {'regs':>5s} {'shared':>7s} {'stack':>6s} {'local':>6s} {'const':>6s} {'spills':>7s}")
            for name, r in compiler.resource_usage(cubin).items():
                spills = "-" if r["spills"] is None else str(r["spills"])
                print(f"{name:32s} {r['registers']:5d} {r['shared']:7d} {r['stack']:6d} {r['local']:6d} "
                      f"{r['constant']:6d} {spills:>7s}")
        _heading("the emulated GPU")
        from lowlevel.emu.faults import PtxError
        from lowlevel.emu.ptx_parser import load_ptx
        try:
            print(load_ptx(ptx).info_log().rstrip())
        except PtxError as e:
            print(f"refuses this PTX: {e}")
        if args.emit:
            out = {"ptx": lambda: ptx.encode(), "cubin": lambda: cubin,
                   "fatbin": lambda: compiler.make_fatbin({arch: cubin}, {arch: ptx})}[args.emit]()
            pathlib.Path(args.output).write_bytes(out)
            print(f"\nwrote {args.emit} ({len(out)} bytes) to {args.output}")
    except (compiler.CompileError, compiler.LinkError) as e:
        print(f"\n{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_trace(args) -> int:
    """One op followed through the five layers, with what each cost."""
    from lowlevel import tracing
    try:
        print(tracing.run(args.op, size=args.size, dtype=args.dtype, device=args.device))
    except NotImplementedError as e:       # e.g. a reduction the backend has no float16 kernel for
        print(f"lowlevel trace: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="lowlevel", description="Drive a GPU from the CUDA driver API up.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="the driver in use (real or emulated), devices and toolchain").set_defaults(run=cmd_info)
    ptx = sub.add_parser("ptx", help="show what a .cu or .ptx file becomes: PTX, SASS, resources")
    ptx.add_argument("file", help="a CUDA C++ (.cu) or PTX (.ptx) file")
    ptx.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    ptx.add_argument("--sass", action="store_true", help="show the SASS (nvJitLink + cuobjdump)")
    ptx.add_argument("--resources", action="store_true", help="registers, shared memory, stack, spills per kernel")
    ptx.add_argument("--emit", choices=("ptx", "cubin", "fatbin"), help="also write this stage to -o")
    ptx.add_argument("-o", "--output", help="where --emit writes")
    ptx.add_argument("-O", "--option", action="append", default=[], help="an NVRTC option for .cu files (repeatable)")
    ptx.set_defaults(run=cmd_ptx)
    from lowlevel.tracing import OPS
    trace = sub.add_parser("trace", help="run one op and show what each of the five layers did and cost")
    trace.add_argument("op", choices=OPS)
    trace.add_argument("--size", type=int, default=1024, help="square inputs of this size (default 1024)")
    trace.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    trace.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    trace.set_defaults(run=cmd_trace)
    args = parser.parse_args(argv)
    if getattr(args, "emit", None) and not args.output:
        parser.error("--emit needs -o OUT")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

"""`lowlevel ptx FILE.cu|FILE.ptx`: what source becomes, stage by stage: the CUDA C++, its
PTX (NVRTC), SASS and resources per kernel (nvJitLink, cuobjdump), and whether the emulated
GPU runs it."""
import pathlib
import sys

from .. import compiler


def add_parser(sub) -> None:
    parser = sub.add_parser("ptx", help="show what a .cu or .ptx file becomes: PTX, SASS, resources")
    parser.add_argument("file", help="a CUDA C++ (.cu) or PTX (.ptx) file")
    parser.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    parser.add_argument("--sass", action="store_true", help="show the SASS (nvJitLink + cuobjdump)")
    parser.add_argument("--resources", action="store_true", help="registers, shared memory, stack, spills per kernel")
    parser.add_argument("--emit", choices=("ptx", "cubin", "fatbin"), help="also write this stage to -o")
    parser.add_argument("-o", "--output", help="where --emit writes")
    parser.add_argument("-O", "--option", action="append", default=[],
                        help="an NVRTC option for .cu files (repeatable)")
    parser.set_defaults(run=command)


def _heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 76 - len(text)))


def command(args) -> int:
    """Show the pipeline stage by stage: source, PTX, SASS, resources."""
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
            print(f"{'kernel':32s} {'regs':>5s} {'shared':>7s} {'stack':>6s} {'local':>6s} {'const':>6s} "
                  f"{'spills':>7s}")
            for name, r in compiler.resource_usage(cubin).items():
                spills = "-" if r["spills"] is None else str(r["spills"])
                print(f"{name:32s} {r['registers']:5d} {r['shared']:7d} {r['stack']:6d} {r['local']:6d} "
                      f"{r['constant']:6d} {spills:>7s}")
        _heading("the emulated GPU")
        # Imported here, not at the top: the emulator loads only for this subcommand.
        from .. import emu  # noqa: PLC0415
        try:
            print(emu.check_ptx(ptx).info_log().rstrip())
        except emu.PtxError as e:
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

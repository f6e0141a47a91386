"""`lowlevel ptx FILE.cu|FILE.ptx`: what source becomes, stage by stage: the CUDA C++, its
PTX (NVRTC), SASS and resources per kernel (nvJitLink, cuobjdump), and whether the emulated
GPU runs it."""
import dataclasses
import pathlib
import sys

from .. import compiler


def add_parser(sub) -> None:
    parser = sub.add_parser("ptx", help="show what a .cu or .ptx file becomes: PTX, SASS, resources")
    parser.add_argument("file", help="a CUDA C++ (.cu) or PTX (.ptx) file")
    parser.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    parser.add_argument("--sass", action="store_true", help="show the SASS (nvJitLink + cuobjdump)")
    parser.add_argument("--resources", action="store_true", help="registers, shared memory, stack, spills per kernel")
    parser.add_argument("--occupancy", action="store_true",
                        help="per kernel: active blocks and warps per SM by block size, and what limits them")
    parser.add_argument("--dynamic-shared", type=int, default=0, metavar="BYTES",
                        help="dynamic shared memory per block for --occupancy (default 0)")
    parser.add_argument("--emit", choices=("ptx", "cubin", "fatbin"), help="also write this stage to -o")
    parser.add_argument("-o", "--output", help="where --emit writes")
    parser.add_argument("-O", "--option", action="append", default=[], type=_option,
                        help="an NVRTC option for .cu files (repeatable; --option -G or --option=-G); -O0 or -O3 "
                             "is the optimisation level of ptxas (nvJitLink), default -O3, -O0 for debug PTX (-G)")
    parser.set_defaults(run=command)


def _option(value: str) -> str:
    """`-O3` on the command line reaches here as "3" (-O is --option's short form): it
    means the optimisation level, as in nvcc, so it becomes "-O3" again."""
    return f"-O{value}" if value.isdigit() else value


def join_option_values(argv: list[str]) -> list[str]:
    """`--option -G` as `--option=-G`: argparse takes a value that starts with "-" for an
    option of its own and refuses it, where the user means the value of --option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("-O", "--option") and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"--option={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _split_options(options: list[str], ptx: str) -> tuple[list[str], tuple[str, ...]]:
    """(NVRTC's options, nvJitLink's): -O<n> is ptxas's level, which NVRTC does not take.
    Without one, -O3, except for debug PTX (-G: `.target ..., debug`), which ptxas
    refuses to optimise ("Optimized debugging not supported"): -O0."""
    levels = [o for o in options if o[:2] == "-O" and o[2:].isdigit()]
    nvrtc = [o for o in options if o not in levels]
    debug = "-G" in nvrtc or "--device-debug" in nvrtc or _is_debug_ptx(ptx)
    return nvrtc, (levels[-1],) if levels else (("-O0",) if debug else ("-O3",))


def _is_debug_ptx(ptx: str) -> bool:
    return any(line.startswith(".target") and "debug" in line for line in ptx.splitlines())


def _heading(text: str) -> None:
    print(f"\n== {text} " + "=" * max(0, 76 - len(text)))


def command(args) -> int:
    """Show the pipeline stage by stage: source, PTX, SASS, resources."""
    path = pathlib.Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as e:
        print(f"lowlevel ptx: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 2
    is_ptx = path.suffix == ".ptx" or b".version" in data[:4096] and b"__global__" not in data
    arch = args.arch
    try:
        if is_ptx:
            ptx = data.decode()
        else:
            source = data.decode()
            _heading(f"CUDA C++ source: {path}")
            print(source.rstrip())
            ptx = compiler.compile(source, "ptx", arch, _split_options(args.option, "")[0], name=path.name)
        _heading(f"PTX ({'from ' + path.name if is_ptx else 'NVRTC for compute_' + str(compiler.parse_arch(arch))})")
        print(ptx.rstrip())
        cubin = None
        if args.sass or args.resources or args.emit in ("cubin", "fatbin"):
            cubin = compiler.link_ptx(ptx, arch, _split_options(args.option, ptx)[1])
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
        if args.occupancy:
            occupancy_table(ptx, args.dynamic_shared)
        if args.emit:
            out = {"ptx": lambda: ptx.encode(), "cubin": lambda: cubin,
                   "fatbin": lambda: compiler.make_fatbin({arch: cubin}, {arch: ptx})}[args.emit]()
            pathlib.Path(args.output).write_bytes(out)
            print(f"\nwrote {args.emit} ({len(out)} bytes) to {args.output}")
    except (compiler.CompileError, compiler.LinkError) as e:
        print(f"\n{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


BLOCK_SIZES = (32, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 896, 1024)


def occupancy_table(ptx: str, dynamic: int) -> None:
    """Each kernel loaded on the driver in use: active blocks per SM (cuOccupancy) by block
    size, the warps they make, and the resource that limits them (the occupancy
    calculator's rules, lowlevel/emu/driver/occupancy_rules.py, on this device's limits)."""
    # Imported here: the driver loads only for this option.
    from .. import cuda  # noqa: PLC0415
    from ..cuda.ptx_signature import kernel_params  # noqa: PLC0415
    from ..emu.driver import occupancy_rules as rules  # noqa: PLC0415
    module = cuda.Module.from_ptx(ptx)
    dev = cuda.GPU(0)
    sm = _device_rules(rules, dev)
    max_warps = sm.max_threads_per_sm // sm.warp
    for name in kernel_params(ptx):
        f = module.get_function(name)
        _heading(f"occupancy of {name} on {dev.name} ({f.num_regs} registers, {f.shared_size_bytes} B static "
                 f"shared, {dynamic} B dynamic)")
        print(f"{'block':>6s} {'blocks/SM':>9s} {'warps/SM':>8s} {'occupancy':>9s}  limited by")
        k = rules.KernelResources(f.num_regs, f.shared_size_bytes, f.max_dynamic_shared_memory,
                                  f.max_threads_per_block, f.attribute("PREFERRED_SHARED_MEMORY_CARVEOUT"))
        for size in (b for b in BLOCK_SIZES if b <= f.max_threads_per_block):
            blocks = f.occupancy(size, dynamic)
            warps = blocks * -(-size // sm.warp)
            limit = ", ".join(rules.max_active_blocks(sm, k, size, dynamic).limiting)
            print(f"{size:6d} {blocks:9d} {warps:8d} {100 * warps / max_warps:8.0f}%  {limit}")


def _device_rules(rules, dev):
    """The calculator's view of device `dev`, from its attributes."""
    cc = dev.compute_capability
    base = rules.SM_80 if cc in ((8, 0), (8, 7)) else rules.SM_86 if cc[0] == 8 else rules.SM_90
    a = dev.attribute
    return dataclasses.replace(
        base, sms=a("MULTIPROCESSOR_COUNT"), max_threads_per_sm=a("MAX_THREADS_PER_MULTIPROCESSOR"),
        max_blocks_per_sm=a("MAX_BLOCKS_PER_MULTIPROCESSOR"), registers_per_sm=a("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        registers_per_block=a("MAX_REGISTERS_PER_BLOCK"), shared_per_sm=a("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        shared_per_block=a("MAX_SHARED_MEMORY_PER_BLOCK"), shared_per_block_optin=a("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        reserved_shared_per_block=a("RESERVED_SHARED_MEMORY_PER_BLOCK"))

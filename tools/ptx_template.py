"""The pieces the PTX generators of tools/ share (gen_dtype_ptx.py, gen_cast_ptx.py,
gen_reduce_ptx.py, gen_half_ptx.py, gen_math_f64_ptx.py, gen_pow_f64_ptx.py, gen_floordiv_ptx.py): the file header, the grid-stride skeleton of ptx/elementwise_f32.ptx,
the one-warp-per-row skeleton of ptx/tensor_ops.ptx's reductions, and how each dtype is
loaded into a register, converted and stored.

Every line a generator emits is an (instruction, comment) pair, so the generated files read
like the handwritten ones: tests/backends/test_ptx_files.py checks every instruction line
carries a comment, and tests/backends/test_generated_ptx.py that each committed file is what
its generator writes.
"""

VERSION = """\
.version 7.0            // PTX ISA 7.0 (CUDA 11.0): JIT-able by any driver since CUDA 11
.target sm_60           // Pascal and newer (f16 conversions need sm_53: included)
.address_size 64        // 64-bit pointers
"""

# dtype -> (bytes, PTX type of its register, C type): the "natural" register of each dtype.
# bfloat16 lives in a .b32 register holding its 16 bits in the low half (sm_60 has no
# bf16 instructions); bool in a .u16 register (0 or 1; any nonzero byte counts as true).
DTYPES = {
    "bool": (1, "u16", "bool"),
    "i32": (4, "s32", "int"),
    "i64": (8, "s64", "long long"),
    "f16": (2, "b16", "__half"),
    "bf16": (2, "b32", "__nv_bfloat16"),
    "f32": (4, "f32", "float"),
    "f64": (8, "f64", "double"),
}
SHIFT = {1: 0, 2: 1, 4: 2, 8: 3}
# each natural register type gets its own register name, so a kernel can hold several
REG = {"u16": "%rs", "s32": "%ri", "s64": "%rl", "b16": "%h", "b32": "%rb", "f32": "%f", "f64": "%fd"}
LD = {"bool": "ld.global.u8", "i32": "ld.global.s32", "i64": "ld.global.s64", "f16": "ld.global.b16",
      "bf16": "ld.global.u16", "f32": "ld.global.f32", "f64": "ld.global.f64"}
ST = {"bool": "st.global.u8", "i32": "st.global.s32", "i64": "st.global.s64", "f16": "st.global.b16",
      "bf16": "st.global.b16", "f32": "st.global.f32", "f64": "st.global.f64"}


def reg(dtype: str, k: int = 0) -> str:
    """The k-th natural register of dtype (e.g. %ri0 for int32)."""
    return f"{REG[DTYPES[dtype][1]]}{k}"


def declare_regs(counts: dict) -> list[str]:
    """.reg lines for {PTX type: count}, one per type."""
    return [f"    .reg .{t:<5} {REG[t]}<{n}>;" + " " * max(1, 12 - len(REG[t]) - len(str(n))) + f"// {t} values"
            for t, n in counts.items()]


def lines(pairs) -> str:
    """Instruction lines with their comments, indented as in the handwritten files."""
    out = []
    for ins, comment in pairs:
        if ins.endswith(":"):
            out.append(f"{ins}" + (f"                                      // {comment}" if comment else ""))
        else:
            out.append(f"    {ins:<40} // {comment}")
    return "\n".join(out)


def element_address(dst: str, base: str, index: str, size: int, name: str = "the element") -> list:
    """dst = &base[index] for elements of `size` bytes (64-bit arithmetic)."""
    if size == 1:
        return [(f"add.u64         {dst}, {base}, {index};", f"{dst} = &{name} (one byte per element)")]
    return [(f"shl.b64         {dst}, {index}, {SHIFT[size]};", f"{dst} = index * {size}: byte offset"),
            (f"add.u64         {dst}, {base}, {dst};", f"{dst} = &{name}")]


def addresses(size: int, targets, index: str = "%rd0", offset: str = "%rd19") -> list:
    """One byte offset of element `index`, then dst = &base[index] for each (dst, base, name)
    of targets: operands of one element size share the shift."""
    if size == 1:
        return [(f"add.u64         {dst}, {base}, {index};", f"{dst} = &{name} (one byte per element)")
                for dst, base, name in targets]
    return [(f"shl.b64         {offset}, {index}, {SHIFT[size]};", f"{offset[1:]} = i * {size}: the byte offset of element i"),
            *[(f"add.u64         {dst}, {base}, {offset};", f"{dst[1:]} = &{name}") for dst, base, name in targets]]


def banner(name: str, summary: str) -> str:
    bar = "// " + "-" * 76
    return f"\n{bar}\n// {name}: {summary}\n{bar}\n"


def grid_stride(name: str, summary: str, params, body, regs: dict) -> str:
    """A 1-D grid-stride kernel over i < n. params: [(name, C description)] of .u64 device
    pointers, followed by n; body: (instruction, comment) pairs that see i in %rd0 and the
    k-th pointer, as a global address, in %rd(10 + k); %rd20..%rd29 are free for addresses."""
    decl = "\n".join(f"    .param .u64 {p},{' ' * max(1, 14 - len(p))}// {c}" for p, c in params)
    loads = []
    for k, (p, _) in enumerate(params):
        loads += [(f"ld.param.u64    %rd{10 + k}, [{p}];", f"rd{10 + k} = {p} (generic address)"),
                  (f"cvta.to.global.u64 %rd{10 + k}, %rd{10 + k};", f"rd{10 + k} = {p} as a global address")]
    prologue = [("mov.u32         %r0, %ctaid.x;", "r0 = blockIdx.x"),
                ("mov.u32         %r1, %ntid.x;", "r1 = blockDim.x"),
                ("mov.u32         %r2, %tid.x;", "r2 = threadIdx.x"),
                ("mul.wide.u32    %rd0, %r0, %r1;", "rd0 = blockIdx.x * blockDim.x (64-bit)"),
                ("cvt.u64.u32     %rd1, %r2;", "rd1 = threadIdx.x (64-bit)"),
                ("add.u64         %rd0, %rd0, %rd1;", "rd0 = i, my first element"),
                ("mov.u32         %r3, %nctaid.x;", "r3 = gridDim.x"),
                ("mul.wide.u32    %rd1, %r3, %r1;", "rd1 = stride = threads in the grid"),
                ("ld.param.u64    %rd2, [n];", "rd2 = n"),
                ("setp.ge.u64     %p0, %rd0, %rd2;", "p0 = (i >= n)"),
                ("@%p0 bra        DONE;", "no element for this thread (or n == 0)"),
                *loads,
                ("LOOP:", ""),
                *body,
                ("add.u64         %rd0, %rd0, %rd1;", "i += stride"),
                ("setp.lt.u64     %p1, %rd0, %rd2;", "p1 = (i < n)"),
                ("@%p1 bra        LOOP;", "more work: loop"),
                ("DONE:", ""),
                ("ret;", "finished")]
    return (banner(name, summary)
            + f".visible .entry {name}(" + " " * max(1, 14 - len(name)) + f"// kernel {name}\n"
            + decl + "\n    .param .u64 n               // unsigned long long n\n)\n{\n"
            + "    .reg .pred  %p<8>;          // predicates: loop tests, special cases\n"
            + "    .reg .b32   %r<8>;          // 32-bit integers: special registers, scratch bits\n"
            + "    .reg .b64   %rd<30>;        // 64-bit integers: index, stride, n, addresses\n"
            + "\n".join(declare_regs(regs)) + "\n\n"
            + lines(prologue) + "\n}\n")


def widen_to_f32(dtype: str, dst: str, src: str) -> list:
    """f16 or bf16 (natural register) -> an exact float32."""
    if dtype == "f16":
        return [(f"cvt.f32.f16     {dst}, {src};", f"{dst} = the half as a float32 (exact)")]
    return [(f"shl.b32         %r6, {src}, 16;", "r6 = the bfloat16 bits as the top half of a float32"),
            (f"mov.b32         {dst}, %r6;", f"{dst} = that float32 (exact: bfloat16 is float32's top half)")]


def round_f32_to_bf16(dst: str, src: str) -> list:
    """float32 -> bfloat16 bits (round to nearest even; any NaN -> the quiet NaN 0x7FC0),
    as ptx/cast_bf16.ptx and the CPU backend do it."""
    return [(f"mov.b32         %r4, {src};", "r4 = the float32's bits"),
            ("shr.u32         %r5, %r4, 16;", "r5 = bits >> 16"),
            ("and.b32         %r5, %r5, 1;", "r5 = lsb: the lowest bit that is kept (breaks ties to even)"),
            ("add.u32         %r5, %r5, 32767;", "r5 = 0x7FFF + lsb"),
            ("add.u32         %r4, %r4, %r5;", "r4 = bits + 0x7FFF + lsb: carries into the kept half when rounding up"),
            ("shr.u32         %r4, %r4, 16;", "r4 = the rounded bfloat16"),
            (f"setp.nan.f32    %p6, {src}, {src};", "p6 = the float32 is NaN"),
            (f"selp.b32        {dst}, 32704, %r4, %p6;", f"{dst} = 0x7FC0 (canonical NaN) for NaN, else rounded")]


def load(dtype: str, dst: str, address: str) -> list:
    """dst (dtype's natural register) = the element at address."""
    return [(f"{LD[dtype]:<15} {dst}, [{address}];", f"{dst} = the {DTYPES[dtype][2]} element")]


def store(dtype: str, address: str, src: str) -> list:
    """The element at address = src (dtype's natural register)."""
    if dtype == "bf16":
        return [(f"cvt.u16.u32     %rs7, {src};", "rs7 = the low 16 bits: the bfloat16"),
                (f"st.global.b16   [{address}], %rs7;", "store the bfloat16")]
    return [(f"{ST[dtype]:<15} [{address}], {src};", f"store the {DTYPES[dtype][2]}")]


def warp_rows(name: str, summary: str, params, row_body, regs: dict) -> str:
    """A kernel giving each row of a rows x cols matrix to one warp, as ptx/tensor_ops.ptx's
    reduce_rows_sum_f32: params are (x, y) device pointers then .u32 rows and cols;
    row_body: pairs that see the row in %rd0, cols in %rd3, x and y as global addresses in
    %rd4 and %rd5, the lane in %r1 (64-bit in %rd10) and p3 = (lane == 0). Every branch
    inside must be taken by the whole warp alike (the shuffles need all 32 lanes)."""
    decl = "\n".join(f"    .param .u64 {p},{' ' * max(1, 14 - len(p))}// {c}" for p, c in params)
    prologue = [("mov.u32         %r0, %tid.x;", "r0 = threadIdx.x"),
                ("and.b32         %r1, %r0, 31;", "r1 = lane = threadIdx.x % 32"),
                ("shr.u32         %r2, %r0, 5;", "r2 = warp index inside the block"),
                ("mov.u32         %r3, %ntid.x;", "r3 = blockDim.x"),
                ("shr.u32         %r4, %r3, 5;", "r4 = warps per block"),
                ("mov.u32         %r5, %ctaid.x;", "r5 = blockIdx.x"),
                ("mul.wide.u32    %rd0, %r5, %r4;", "rd0 = blockIdx.x * warps per block (64-bit)"),
                ("cvt.u64.u32     %rd1, %r2;", "rd1 = warp index (64-bit)"),
                ("add.u64         %rd0, %rd0, %rd1;", "rd0 = row = global warp id"),
                ("mov.u32         %r6, %nctaid.x;", "r6 = gridDim.x"),
                ("mul.wide.u32    %rd1, %r6, %r4;", "rd1 = row stride = warps in the grid"),
                ("ld.param.u32    %r7, [rows];", "r7 = rows"),
                ("cvt.u64.u32     %rd2, %r7;", "rd2 = rows (64-bit)"),
                ("setp.ge.u64     %p0, %rd0, %rd2;", "p0 = (row >= rows): the whole warp alike"),
                ("@%p0 bra        DONE;", "no row for this warp"),
                ("ld.param.u32    %r7, [cols];", "r7 = cols"),
                ("cvt.u64.u32     %rd3, %r7;", "rd3 = cols (64-bit: column indices never wrap)"),
                ("ld.param.u64    %rd4, [x];", "rd4 = x (generic address)"),
                ("ld.param.u64    %rd5, [y];", "rd5 = y (generic address)"),
                ("cvta.to.global.u64 %rd4, %rd4;", "rd4 = x as a global address"),
                ("cvta.to.global.u64 %rd5, %rd5;", "rd5 = y as a global address"),
                ("cvt.u64.u32     %rd10, %r1;", "rd10 = lane (64-bit): my first column"),
                ("setp.eq.u32     %p3, %r1, 0;", "p3 = (lane == 0): the lane that writes y[row]"),
                ("ROW_LOOP:", ""),
                *row_body,
                ("add.u64         %rd0, %rd0, %rd1;", "row += warps in the grid"),
                ("setp.lt.u64     %p2, %rd0, %rd2;", "p2 = (row < rows), the same for the whole warp"),
                ("@%p2 bra        ROW_LOOP;", "another row for this warp: go again"),
                ("DONE:", ""),
                ("ret;", "finished")]
    return (banner(name, summary)
            + f".visible .entry {name}(" + " " * max(1, 14 - len(name)) + f"// kernel {name}\n"
            + decl + "\n    .param .u32 rows,           // unsigned int rows\n"
            + "    .param .u32 cols            // unsigned int cols\n)\n{\n"
            + "    .reg .pred  %p<12>;         // predicates: loop tests, comparisons\n"
            + "    .reg .b32   %r<16>;         // 32-bit integers: lane, warp, shuffled halves\n"
            + "    .reg .b64   %rd<30>;        // 64-bit integers: row, cols, indices, addresses\n"
            + "\n".join(declare_regs(regs)) + "\n\n"
            + lines(prologue) + "\n}\n")


def shuffle(reg_type: str, dst: str, src: str, offset: int) -> list:
    """dst = src of lane (lane XOR offset): one shfl for 32 bits, two (the halves) for 64."""
    if reg_type in ("s32", "f32", "b32"):
        return [(f"shfl.sync.bfly.b32 {dst}, {src}, {offset}, 0x1f, 0xffffffff;", f"{dst} = lane L^{offset}'s value")]
    return [(f"mov.b64         {{%r8, %r9}}, {src};", f"r8, r9 = the low and high halves of {src}"),
            (f"shfl.sync.bfly.b32 %r10, %r8, {offset}, 0x1f, 0xffffffff;", f"r10 = lane L^{offset}'s low half"),
            (f"shfl.sync.bfly.b32 %r11, %r9, {offset}, 0x1f, 0xffffffff;", f"r11 = lane L^{offset}'s high half"),
            (f"mov.b64         {dst}, {{%r10, %r11}};", f"{dst} = lane L^{offset}'s 64-bit value")]

"""Generate ptx/index_ops.ptx: the CUDA backend's indexing, sorting and scan kernels.

    gather_b{8,16,32,64}        out[o][m][k] = x[o][idx[o][m][k]][k]      (any dtype of that width)
    scatter_b{8,16,32,64}       out[o][idx[o][m][k]][k] = src[o][m][k]    (into out, in place)
    scatter_add_{f32,f64,i32,i64}  out[o][idx[o][m][k]][k] += src[o][m][k] (red.global.add)
    argsort_rows_{f32,f64,i32,i64} the stable ascending / descending order of each row, as
                                int64 column indices, by rank: element c of a row goes to
                                slot (the number of elements that sort before it), NaN last
                                ascending and first descending, as in PyTorch
    scan_rows_{sum,prod}_{f32,f64,i64}  inclusive running sum / product along each row

Every kernel is a grid-stride loop over n output elements (or rows) with 64-bit
indices. Tensors are contiguous and viewed as (outer, middle, inner): the middle is the
indexed dimension. An index outside [0, middle) -- negative ones included, since they are
compared unsigned -- executes `trap`: the launch fails loudly (a sticky error, as PyTorch's
device-side assert), never reading or writing out of bounds. The frontend checks the
indices on the host before it launches, so a user sees an IndexError instead.

The rank sort compares each element with its whole row: O(cols^2) work per row but no
shared memory or passes, and stable by construction (ties are broken by column). It suits
the short rows of sort/topk/kthvalue in models; a GPU library would use a radix sort.

    python tools/gen_index_ptx.py          # rewrites ptx/index_ops.ptx

tests/backends/test_generated_ptx.py checks the committed file is what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, banner, declare_regs, lines  # noqa: E402

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"
SHIFT = {1: 0, 2: 1, 4: 2, 8: 3}
# element width -> (load, store, register): gather and scatter move bits, whatever the dtype
MOVE = {1: ("ld.global.u8", "st.global.u8", "%rs0"), 2: ("ld.global.b16", "st.global.b16", "%rs0"),
        4: ("ld.global.b32", "st.global.b32", "%r4"), 8: ("ld.global.b64", "st.global.b64", "%rd30")}
# dtype -> (PTX type, register, bytes, C type)
TYPES = {"f32": ("f32", "%f", 4, "float"), "f64": ("f64", "%fd", 8, "double"),
         "i32": ("s32", "%ri", 4, "int"), "i64": ("s64", "%rl", 8, "long long")}
REG_TYPE = {"f32": {"f32": 4}, "f64": {"f64": 4}, "i32": {"s32": 4}, "i64": {"s64": 4}}


def kernel(name: str, summary: str, pointers, scalars, body, regs: dict, over: str = "n") -> str:
    """A grid-stride loop over i < `over` (the first scalar). pointers: [(name, C text)]
    become global addresses in %rd10, %rd11, ...; scalars: [(name, C text)] of .u64 in
    %rd14, %rd15, ... (the first is the loop's bound, also in %rd2); %rd20..%rd39 are free."""
    params = [f"    .param .u64 {p},{' ' * max(1, 14 - len(p))}// {c}" for p, c in pointers]
    params += [f"    .param .u64 {p}{',' if k < len(scalars) - 1 else ' '}{' ' * max(1, 14 - len(p))}// {c}"
               for k, (p, c) in enumerate(scalars)]
    loads = []
    for k, (p, _) in enumerate(pointers):
        loads += [(f"ld.param.u64    %rd{10 + k}, [{p}];", f"rd{10 + k} = {p} (generic address)"),
                  (f"cvta.to.global.u64 %rd{10 + k}, %rd{10 + k};", f"rd{10 + k} = {p} as a global address")]
    for k, (p, _) in enumerate(scalars):
        loads.append((f"ld.param.u64    %rd{14 + k}, [{p}];", f"rd{14 + k} = {p}"))
    prologue = [("mov.u32         %r0, %ctaid.x;", "r0 = blockIdx.x"),
                ("mov.u32         %r1, %ntid.x;", "r1 = blockDim.x"),
                ("mov.u32         %r2, %tid.x;", "r2 = threadIdx.x"),
                ("mul.wide.u32    %rd0, %r0, %r1;", "rd0 = blockIdx.x * blockDim.x (64-bit)"),
                ("cvt.u64.u32     %rd1, %r2;", "rd1 = threadIdx.x (64-bit)"),
                ("add.u64         %rd0, %rd0, %rd1;", "rd0 = i, my first element"),
                ("mov.u32         %r3, %nctaid.x;", "r3 = gridDim.x"),
                ("mul.wide.u32    %rd1, %r3, %r1;", "rd1 = stride = threads in the grid"),
                (f"ld.param.u64    %rd2, [{over}];", f"rd2 = {over}, the loop's bound"),
                ("setp.ge.u64     %p0, %rd0, %rd2;", f"p0 = (i >= {over})"),
                ("@%p0 bra        DONE;", "nothing for this thread"),
                *loads,
                ("LOOP:", ""),
                *body,
                ("add.u64         %rd0, %rd0, %rd1;", "i += stride"),
                ("setp.lt.u64     %p1, %rd0, %rd2;", f"p1 = (i < {over})"),
                ("@%p1 bra        LOOP;", "more work: loop"),
                ("DONE:", ""),
                ("ret;", "finished")]
    return (banner(name, summary)
            + f".visible .entry {name}(" + " " * max(1, 14 - len(name)) + f"// kernel {name}\n"
            + "\n".join(params) + "\n)\n{\n"
            + "    .reg .pred  %p<12>;         // predicates: loop tests, comparisons\n"
            + "    .reg .b16   %rs<2>;         // 8- and 16-bit elements\n"
            + "    .reg .b32   %r<8>;          // 32-bit integers: special registers, 32-bit elements\n"
            + "    .reg .b64   %rd<40>;        // 64-bit integers: indices, sizes, addresses, 64-bit elements\n"
            + "\n".join(declare_regs(regs)) + ("\n" if regs else "") + "\n"
            + lines(prologue) + "\n}\n")


def _split(middle: str) -> list:
    """i = (o * middle + m) * inner + k: rd20 = k, rd21 = o (middle in `middle`, inner in rd16)."""
    return [("rem.u64         %rd20, %rd0, %rd16;", "rd20 = k = i % inner"),
            ("div.u64         %rd21, %rd0, %rd16;", "rd21 = i / inner = o * middle + m"),
            (f"div.u64         %rd21, %rd21, {middle};", "rd21 = o, the outer index")]


def _index(bound: str, what: str) -> list:
    """rd23 = idx[i], trapping unless 0 <= idx[i] < bound; rd24 = the element it names."""
    return [("shl.b64         %rd22, %rd0, 3;", "rd22 = i * 8: idx is int64"),
            ("add.u64         %rd22, %rd12, %rd22;", "rd22 = &idx[i]"),
            ("ld.global.u64   %rd23, [%rd22];", "rd23 = j = idx[i]"),
            (f"setp.ge.u64     %p2, %rd23, {bound};", f"p2 = (j >= {what}), unsigned: a negative j is huge"),
            ("@%p2 trap;", "an index out of range: abort the launch, never touch memory there"),
            (f"mad.lo.u64      %rd24, %rd21, {bound}, %rd23;", f"rd24 = o * {what} + j"),
            ("mad.lo.u64      %rd24, %rd24, %rd16, %rd20;", f"rd24 = (o * {what} + j) * inner + k")]


def _address(dst: str, base: str, index: str, size: int, name: str) -> list:
    if size == 1:
        return [(f"add.u64         {dst}, {base}, {index};", f"{dst} = &{name} (one byte per element)")]
    return [(f"shl.b64         {dst}, {index}, {SHIFT[size]};", f"{dst} = index * {size}"),
            (f"add.u64         {dst}, {base}, {dst};", f"{dst} = &{name}")]


def gather(size: int) -> str:
    ld, st, r = MOVE[size]
    body = [*_split("%rd17"), *_index("%rd15", "x_middle"),
            *_address("%rd25", "%rd11", "%rd24", size, "x[o][j][k]"),
            (f"{ld:<15} {r}, [%rd25];", f"{r} = x[o][j][k] ({size} bytes)"),
            *_address("%rd26", "%rd10", "%rd0", size, "out[i]"),
            (f"{st:<15} [%rd26], {r};", "out[i] = it")]
    return kernel(f"gather_b{8 * size}", "out[o][m][k] = x[o][idx[o][m][k]][k]",
                  [("out", "out (outer x middle x inner)"), ("x", "x (outer x x_middle x inner)"),
                   ("idx", "const long long* idx (the shape of out)")],
                  [("n", "elements of out"), ("x_middle", "x's size along the gathered dimension"),
                   ("inner", "elements after that dimension"), ("middle", "out's size along it")],
                  body, {})


def scatter(size: int) -> str:
    ld, st, r = MOVE[size]
    body = [*_split("%rd17"), *_index("%rd15", "out_middle"),
            *_address("%rd25", "%rd11", "%rd0", size, "src[i]"),
            (f"{ld:<15} {r}, [%rd25];", f"{r} = src[i] ({size} bytes)"),
            *_address("%rd26", "%rd10", "%rd24", size, "out[o][j][k]"),
            (f"{st:<15} [%rd26], {r};", "out[o][j][k] = it (equal indices: one of them wins)")]
    return kernel(f"scatter_b{8 * size}", "out[o][idx[o][m][k]][k] = src[o][m][k], in place",
                  [("out", "out (outer x out_middle x inner)"), ("src", "src (the shape of idx)"),
                   ("idx", "const long long* idx (outer x middle x inner)")],
                  [("n", "elements of idx"), ("out_middle", "out's size along the scattered dimension"),
                   ("inner", "elements after that dimension"), ("middle", "idx's size along it")], body, {})


def scatter_add(t: str) -> str:
    ptype, r, size, _ = TYPES[t]
    red = {"f32": "f32", "f64": "f64", "i32": "u32", "i64": "u64"}[t]
    body = [*_split("%rd17"), *_index("%rd15", "out_middle"),
            *_address("%rd25", "%rd11", "%rd0", size, "src[i]"),
            (f"ld.global.{ptype}   {r}0, [%rd25];", f"{r}0 = src[i]"),
            *_address("%rd26", "%rd10", "%rd24", size, "out[o][j][k]"),
            (f"red.global.add.{red} [%rd26], {r}0;", "out[o][j][k] += it, atomically (equal indices all add)")]
    return kernel(f"scatter_add_{t}", "out[o][idx[o][m][k]][k] += src[o][m][k], in place",
                  [("out", "out (outer x out_middle x inner)"), ("src", "src (the shape of idx)"),
                   ("idx", "const long long* idx (outer x middle x inner)")],
                  [("n", "elements of idx"), ("out_middle", "out's size along the scattered dimension"),
                   ("inner", "elements after that dimension"), ("middle", "idx's size along it")],
                  body, REG_TYPE[t])


def _precedes(t: str) -> list:
    """p5 = w (column j) sorts before v (column c): w < v ascending (w > v descending), or
    w, v equal (NaN equal to NaN) and j < c; a NaN is the largest value."""
    ptype, r, _, _ = TYPES[t]
    out = [(f"setp.lt.{ptype}    %p5, {r}1, {r}0;", "p5 = w < v (false with a NaN)"),
           (f"setp.gt.{ptype}    %p6, {r}1, {r}0;", "p6 = w > v (false with a NaN)"),
           (f"setp.eq.{ptype}    %p7, {r}1, {r}0;", "p7 = w == v")]
    if t.startswith("f"):
        out += [(f"setp.nan.{ptype}    %p8, {r}1, {r}1;", "p8 = w is NaN"),
                (f"setp.nan.{ptype}    %p9, {r}0, {r}0;", "p9 = v is NaN"),
                ("and.pred        %p10, %p8, %p9;", "p10 = both NaN"),
                ("or.pred         %p7, %p7, %p10;", "p7 = equal, NaN == NaN here"),
                ("not.pred        %p10, %p8;", "p10 = w is a number"),
                ("and.pred        %p10, %p10, %p9;", "p10 = only v is NaN: w is smaller"),
                ("or.pred         %p5, %p5, %p10;", "p5 = w < v, NaN the largest"),
                ("not.pred        %p10, %p9;", "p10 = v is a number"),
                ("and.pred        %p10, %p10, %p8;", "p10 = only w is NaN: w is larger"),
                ("or.pred         %p6, %p6, %p10;", "p6 = w > v, NaN the largest")]
    return out + [("selp.b32        %r5, 1, 0, %p5;", "r5 = 1 if w < v"),
                  ("selp.b32        %r6, 1, 0, %p6;", "r6 = 1 if w > v"),
                  ("setp.ne.u64     %p11, %rd16, 0;", "p11 = descending"),
                  ("selp.b32        %r5, %r6, %r5, %p11;", "r5 = w comes first by value (the order's own test)"),
                  ("setp.lt.u64     %p8, %rd26, %rd21;", "p8 = j < c"),
                  ("and.pred        %p7, %p7, %p8;", "p7 = equal and earlier: stable"),
                  ("selp.b32        %r6, 1, 0, %p7;", "r6 = 1 if so"),
                  ("or.b32          %r5, %r5, %r6;", "r5 = 1 when w sorts before v"),
                  ("cvt.u64.u32     %rd27, %r5;", "rd27 = that, 64-bit"),
                  ("add.u64         %rd23, %rd23, %rd27;", "rank += it")]


def argsort(t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    body = [("rem.u64         %rd21, %rd0, %rd15;", "rd21 = c = i % cols, my column"),
            ("sub.u64         %rd20, %rd0, %rd21;", "rd20 = the row's first element"),
            *_address("%rd22", "%rd11", "%rd0", size, "x[i]"),
            (f"ld.global.{ptype}   {r}0, [%rd22];", f"{r}0 = v = x[i]"),
            ("mov.u64         %rd23, 0;", "rd23 = rank = 0"),
            ("mov.u64         %rd26, 0;", "rd26 = j = 0"),
            ("COL:", ""),
            ("add.u64         %rd24, %rd20, %rd26;", "rd24 = the element of column j"),
            *_address("%rd25", "%rd11", "%rd24", size, "x[row][j]"),
            (f"ld.global.{ptype}   {r}1, [%rd25];", f"{r}1 = w = x[row][j]"),
            *_precedes(t),
            ("add.u64         %rd26, %rd26, 1;", "j += 1"),
            ("setp.lt.u64     %p4, %rd26, %rd15;", "p4 = (j < cols)"),
            ("@%p4 bra        COL;", "the next column"),
            ("add.u64         %rd24, %rd20, %rd23;", "rd24 = the row's slot `rank`"),
            ("shl.b64         %rd24, %rd24, 3;", "rd24 = its byte offset (int64 out)"),
            ("add.u64         %rd24, %rd10, %rd24;", "rd24 = &out[row][rank]"),
            ("st.global.u64   [%rd24], %rd21;", "out[row][rank] = c: the ranks are distinct, so every slot is written")]
    return kernel(f"argsort_rows_{t}", "out[r][rank of x[r][c]] = c: a stable sort of each row",
                  [("out", "long long* out (rows x cols)"), ("x", f"const {ctype}* x (rows x cols)")],
                  [("n", "rows * cols"), ("cols", "elements per row"), ("descending", "nonzero: largest first")],
                  body, REG_TYPE[t])


def scan(kind: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    one = {"f32": "0f3F800000", "f64": "0d3FF0000000000000", "i64": "1"}[t]
    zero = {"f32": "0f00000000", "f64": "0d0000000000000000", "i64": "0"}[t]
    ident, op = (zero, "add") if kind == "sum" else (one, "mul")
    rn = ".rn" if t.startswith("f") else (".lo" if kind == "prod" else "")
    body = [("mul.lo.u64      %rd20, %rd0, %rd15;", "rd20 = row * cols: the row's first element"),
            (f"mov.{ptype:<11} {r}0, {ident};", f"{r}0 = acc = the identity of {kind}"),
            ("mov.u64         %rd26, 0;", "rd26 = j = 0"),
            ("setp.eq.u64     %p4, %rd15, 0;", "p4 = (cols == 0): an empty row"),
            ("@%p4 bra        NEXT;", "(nothing to write)"),
            ("COL:", ""),
            ("add.u64         %rd24, %rd20, %rd26;", "rd24 = the element of column j"),
            *_address("%rd25", "%rd11", "%rd24", size, "x[row][j]"),
            (f"ld.global.{ptype}   {r}1, [%rd25];", f"{r}1 = x[row][j]"),
            (f"{op}{rn}.{ptype:<{15 - len(op) - len(rn)}} {r}0, {r}0, {r}1;", f"acc = acc {'+' if kind == 'sum' else '*'} x[row][j]"),
            *_address("%rd25", "%rd10", "%rd24", size, "out[row][j]"),
            (f"st.global.{ptype}   [%rd25], {r}0;", "out[row][j] = acc"),
            ("add.u64         %rd26, %rd26, 1;", "j += 1"),
            ("setp.lt.u64     %p4, %rd26, %rd15;", "p4 = (j < cols)"),
            ("@%p4 bra        COL;", "the next column"),
            ("NEXT:", "")]
    return kernel(f"scan_rows_{kind}_{t}", f"out[r][j] = x[r][0] {'+' if kind == 'sum' else '*'} ... x[r][j], a thread per row",
                  [("out", f"{ctype}* out (rows x cols)"), ("x", f"const {ctype}* x (rows x cols)")],
                  [("rows", "rows"), ("cols", "elements per row")], body, REG_TYPE[t], over="rows")


def generate() -> str:
    header = ("// index_ops.ptx: gather, scatter, scatter_add, a stable rank sort and running sums /\n"
              "// products for the CUDA backend (lowlevel/backends/cuda/indexing.py).\n"
              "// GENERATED by tools/gen_index_ptx.py -- edit the generator, not this file.\n\n")
    parts = [gather(s) for s in (1, 2, 4, 8)] + [scatter(s) for s in (1, 2, 4, 8)]
    parts += [scatter_add(t) for t in TYPES] + [argsort(t) for t in TYPES]
    parts += [scan(k, t) for k in ("sum", "prod") for t in ("f32", "f64", "i64")]
    return header + VERSION + "".join(parts)


if __name__ == "__main__":
    (PTX / "index_ops.ptx").write_text(generate())
    print("wrote ptx/index_ops.ptx")

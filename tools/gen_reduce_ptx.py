"""Generate the row reductions of the CUDA backend's other dtypes from one template, the
one-warp-per-row kernels of ptx/tensor_ops.ptx (reduce_rows_sum_f32) with the element type,
the combining step and the identity as parameters:

    ptx/reduce_dtypes.ptx  reduce_rows_{sum,max}_{i32,i64,f64}
    ptx/argreduce.ptx      arg_rows_{max,min}_{f32,f64,i32,i64}: the int64 index of the first
                           largest / smallest element of each row (a NaN counts as both)

    python tools/gen_reduce_ptx.py          # rewrites the files above

tests/backends/test_generated_ptx.py checks the committed files are what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, shuffle, warp_rows  # noqa: E402

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"

# dtype -> (PTX type, register, element bytes, C type)
TYPES = {"f32": ("f32", "%f", 4, "float"), "f64": ("f64", "%fd", 8, "double"),
         "i32": ("s32", "%ri", 4, "int"), "i64": ("s64", "%rl", 8, "long long")}
SHIFT = {4: 2, 8: 3}
# identities: the sum's zero, the max's (and argmax's) smallest value, argmin's largest
ZERO = {"f32": "0f00000000", "f64": "0d0000000000000000", "i32": "0", "i64": "0"}
LOWEST = {"f32": "0fFF800000", "f64": "0dFFF0000000000000", "i32": "0x80000000", "i64": "0x8000000000000000"}
HIGHEST = {"f32": "0f7F800000", "f64": "0d7FF0000000000000", "i32": "0x7FFFFFFF", "i64": "0x7FFFFFFFFFFFFFFF"}


def _row_start(size: int) -> list:
    """rd7 = &x[row][0]."""
    return [("mul.lo.u64      %rd6, %rd0, %rd3;", "rd6 = row * cols"),
            (f"shl.b64         %rd6, %rd6, {SHIFT[size]};", f"rd6 = row * cols * {size}: the row's byte offset"),
            ("add.u64         %rd7, %rd4, %rd6;", "rd7 = &x[row][0]")]


def _columns(t: str, step) -> list:
    """Lane L visits columns L, L+32, ... < cols, loading x[row][j] into v0 and running
    `step` (pairs; j in %rd9)."""
    ptype, r, size, _ = TYPES[t]
    return [("mov.u64         %rd9, %rd10;", "rd9 = j = lane"),
            ("setp.ge.u64     %p1, %rd9, %rd3;", "p1 = (j >= cols): no column for me"),
            ("@%p1 bra        REDUCE;", "(when cols <= lane)"),
            ("COL_LOOP:", ""),
            (f"shl.b64         %rd11, %rd9, {SHIFT[size]};", f"rd11 = j * {size}"),
            ("add.u64         %rd12, %rd7, %rd11;", "rd12 = &x[row][j]"),
            (f"ld.global.{ptype}   {r}1, [%rd12];", "v1 = x[row][j] (32 neighbours per warp: coalesced)"),
            *step,
            ("add.u64         %rd9, %rd9, 32;", "j += 32: the warp covers 32 columns per step"),
            ("setp.lt.u64     %p2, %rd9, %rd3;", "p2 = (j < cols)"),
            ("@%p2 bra        COL_LOOP;", "more columns for me: loop"),
            ("REDUCE:", "")]


def _combine(kind: str, t: str, acc: str, v: str) -> list:
    ptype = TYPES[t][0]
    if kind == "sum":
        rn = ".rn" if t.startswith("f") else ""
        return [(f"add{rn}.{ptype:<10} {acc}, {acc}, {v};", f"{acc} += {v}" + ("" if rn else " (wraps, as numpy's does)"))]
    if not t.startswith("f"):
        return [(f"max.{ptype:<11} {acc}, {acc}, {v};", f"{acc} = max({acc}, {v})")]
    # max.f64 skips a NaN; numpy.max propagates it: a NaN operand takes acc + v = NaN instead
    return [(f"setp.nan.{ptype}    %p4, {acc}, {v};", f"p4 = {acc} or {v} is NaN"),
            (f"@!%p4 max.{ptype}   {acc}, {acc}, {v};", f"neither: {acc} = max({acc}, {v})"),
            (f"@%p4 add.rn.{ptype} {acc}, {acc}, {v};", f"a NaN: {acc} = NaN (and stays NaN)")]


def reduce_kernel(kind: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    ident = ZERO[t] if kind == "sum" else LOWEST[t]
    body = [*_row_start(size),
            (f"mov.{ptype:<11} {r}0, {ident};", f"v0 = the identity of {kind} (an empty row gives it)"),
            *_columns(t, _combine(kind, t, f"{r}0", f"{r}1"))]
    for off in (16, 8, 4, 2, 1):        # butterfly all-reduce: every lane ends with the row's value
        body += [*shuffle(ptype, f"{r}1", f"{r}0", off), *_combine(kind, t, f"{r}0", f"{r}1")]
    body += [(f"shl.b64         %rd11, %rd0, {SHIFT[size]};", f"rd11 = row * {size}"),
             ("add.u64         %rd12, %rd5, %rd11;", "rd12 = &y[row]"),
             (f"@%p3 st.global.{ptype} [%rd12], {r}0;", "lane 0 writes y[row]")]
    params = [("x", f"const {ctype}* x (rows x cols, row-major)"), ("y", f"{ctype}* y (rows)")]
    what = "x[r][0] + ... + x[r][cols-1]" if kind == "sum" else "the largest of row r (NaN if it has one)"
    return warp_rows(f"reduce_rows_{kind}_{t}", f"y[r] = {what}", params, body, {ptype: 2})


def _better(kind: str, t: str, v: str, i: str, bv: str, bi: str, with_index: bool) -> list:
    """p9 = (v, i) replaces the best (bv, bi): v is larger (argmax) or smaller (argmin), or
    v is NaN and bv is not (a NaN wins both, as in PyTorch and numpy), or -- with_index --
    they are equal (both NaN included) and i comes first; or bi is still the sentinel."""
    ptype = TYPES[t][0]
    cmp = "gt" if kind == "max" else "lt"
    out = [(f"setp.{cmp}.{ptype}    %p9, {v}, {bv};", f"p9 = {v} {'>' if cmp == 'gt' else '<'} {bv} (false with NaN)")]
    if t.startswith("f"):
        out += [(f"setp.nan.{ptype}    %p5, {v}, {v};", f"p5 = {v} is NaN"),
                (f"setp.nan.{ptype}    %p6, {bv}, {bv};", f"p6 = {bv} is NaN"),
                ("not.pred        %p7, %p6;", f"p7 = {bv} is a number"),
                ("and.pred        %p7, %p5, %p7;", f"p7 = {v} is the first NaN"),
                ("or.pred         %p9, %p9, %p7;", "p9 = ... or that")]
    if with_index:
        out += [(f"setp.eq.{ptype}    %p8, {v}, {bv};", "p8 = equal values"),
                *([("and.pred        %p5, %p5, %p6;", "p5 = both NaN: equal too"),
                   ("or.pred         %p8, %p8, %p5;", "p8 = equal (NaN == NaN here)")] if t.startswith("f") else []),
                (f"setp.lt.u64     %p10, {i}, {bi};", f"p10 = {i} comes first"),
                ("and.pred        %p8, %p8, %p10;", "p8 = equal and earlier"),
                ("or.pred         %p9, %p9, %p8;", "p9 = ... or that")]
    out += [(f"setp.eq.u64     %p10, {bi}, 0xFFFFFFFFFFFFFFFF;", f"p10 = {bi} is the sentinel: nothing seen yet"),
            ("or.pred         %p9, %p9, %p10;", "p9 = take (v, i)"),
            (f"selp.{ptype}       {bv}, {v}, {bv}, %p9;", "the best value"),
            (f"selp.u64        {bi}, {i}, {bi}, %p9;", "and its index")]
    return out


def arg_kernel(kind: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    ident = LOWEST[t] if kind == "max" else HIGHEST[t]
    body = [*_row_start(size),
            (f"mov.{ptype:<11} {r}0, {ident};", "v0 = the best value so far (the identity)"),
            ("mov.u64         %rd20, 0xFFFFFFFFFFFFFFFF;", "rd20 = its index: the sentinel 2^64 - 1 (loses every tie)"),
            # columns come in increasing order in a lane: strictly better, or the first NaN, wins
            *_columns(t, _better(kind, t, f"{r}1", "%rd9", f"{r}0", "%rd20", with_index=False))]
    for off in (16, 8, 4, 2, 1):        # butterfly: the best (value, index) pair, the earliest of equals
        body += [*shuffle(ptype, f"{r}1", f"{r}0", off), *shuffle("s64", "%rd21", "%rd20", off),
                 *_better(kind, t, f"{r}1", "%rd21", f"{r}0", "%rd20", with_index=True)]
    body += [("shl.b64         %rd11, %rd0, 3;", "rd11 = row * 8"),
             ("add.u64         %rd12, %rd5, %rd11;", "rd12 = &y[row]"),
             ("@%p3 st.global.s64 [%rd12], %rd20;", "lane 0 writes y[row], an int64 index")]
    params = [("x", f"const {ctype}* x (rows x cols, row-major, cols >= 1)"), ("y", "long long* y (rows)")]
    what = "largest" if kind == "max" else "smallest"
    return warp_rows(f"arg_rows_{kind}_{t}", f"y[r] = the index of the first {what} element of row r", params,
                     body, {ptype: 2})


def reduce_file() -> str:
    header = f"""\
// reduce_dtypes.ptx -- sum and max of each row, for int32, int64 and float64:
//   reduce_rows_sum_i32 reduce_rows_max_i32 (and _i64, _f64)
// GENERATED by tools/gen_reduce_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void reduce_rows_sum_i64(const long long* x, long long* y,
//                                                    unsigned int rows, unsigned int cols)
//   y[r] = sum (or max) of x[r][0..cols-1]: one warp per row, lane L takes columns
//   L, L+32, ..., then 5 butterfly shuffles (a 64-bit value moves as two 32-bit
//   halves) combine the lanes, and lane 0 stores. Launch as reduce_rows_sum_f32 of
//   tensor_ops.ptx: block 32 * warps, grid ceil(rows / warps) or fewer.
//
// Numerics: integer sums wrap modulo 2^32 or 2^64 -- exactly what numpy's int64 sum
//   cast back to int32 gives (lowlevel keeps the dtype). float64 sums add in a
//   fixed order (per lane, then a tree): within about (cols/32 + 5) * 2^-53 *
//   sum|x| of the exact sum, bitwise the same run to run. max is exact; a float64
//   NaN anywhere gives NaN (numpy.max). An empty row gives 0 (sum) or the lowest
//   value (max; the frontend refuses empty maxima).

{VERSION}"""
    return header + "".join(reduce_kernel(k, t) for t in ("i32", "i64", "f64") for k in ("sum", "max"))


def arg_file() -> str:
    header = f"""\
// argreduce.ptx -- argmax and argmin of each row: the int64 index of the first
// largest (smallest) element, for float32, float64, int32 and int64:
//   arg_rows_max_f32 arg_rows_min_f32 (and _f64, _i32, _i64)
// GENERATED by tools/gen_reduce_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void arg_rows_max_f32(const float* x, long long* y,
//                                                 unsigned int rows, unsigned int cols)
//   cols >= 1 (the frontend refuses an empty reduction). One warp per row: each
//   lane keeps its best (value, index) over columns L, L+32, ... (strictly better
//   replaces, so the earliest stays), then 5 butterfly steps exchange the pairs and
//   keep the better one, the smaller index among equals: every lane ends with the
//   row's first best. A NaN is better than any number, as in PyTorch and numpy
//   (argmax and argmin both give the first NaN). Exact. Launch as reduce_dtypes.ptx.

{VERSION}"""
    return header + "".join(arg_kernel(k, t) for t in TYPES for k in ("max", "min"))


def generate() -> dict:
    """{file name: text} of every file this script writes."""
    return {"reduce_dtypes.ptx": reduce_file(), "argreduce.ptx": arg_file()}


if __name__ == "__main__":
    for name, text in generate().items():
        (PTX / name).write_text(text)
        sys.stdout.write(f"wrote ptx/{name}\n")

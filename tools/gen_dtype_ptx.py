"""Generate the element-wise kernels of the CUDA backend's other dtypes from one template:

    ptx/elementwise_i32.ptx  ptx/elementwise_i64.ptx  ptx/elementwise_f64.ptx
        add sub mul max min (binary), neg abs relu (unary); float64 also div and sqrt
    ptx/compare_i32.ptx  ptx/compare_i64.ptx  ptx/compare_f64.ptx
        eq ne lt le gt ge -> bool
    ptx/where_bits.ptx
        where_b8 where_b16 where_b64 (where_f32 of ptx/compare_f32.ptx serves 4 bytes)
    ptx/pow_f32.ptx
        pow_f32: x ** y with C's special cases

Each kernel is the grid-stride skeleton of ptx/elementwise_f32.ptx (tools/ptx_template.py)
with a different body; every body line carries its comment. Run

    python tools/gen_dtype_ptx.py          # rewrites the files above

tests/backends/test_generated_ptx.py checks the committed files are what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, addresses, grid_stride  # noqa: E402

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"

# dtype -> (PTX type, register, element bytes, C type, the suffix of integer-only instructions)
TYPES = {"i32": ("s32", "%ri", 4, "int"), "i64": ("s64", "%rl", 8, "long long"), "f64": ("f64", "%fd", 8, "double")}
ZERO = {"i32": "0", "i64": "0", "f64": "0d0000000000000000"}


def _arith(op: str, t: str, d: str, a: str, b: str) -> list:
    ptype = TYPES[t][0]
    is_float = t == "f64"
    rn = ".rn" if is_float else ""
    simple = {"add": (f"add{rn}.{ptype}", "a + b" + (", rounded to nearest even" if is_float else ", wrapping")),
              "sub": (f"sub{rn}.{ptype}", "a - b" + (", rounded to nearest even" if is_float else ", wrapping")),
              "mul": (f"mul.rn.{ptype}" if is_float else f"mul.lo.{ptype}",
                      "a * b, rounded" if is_float else "a * b: the low half of the product (wraps as C and numpy do)"),
              "div": (f"div.rn.{ptype}", "a / b, correctly rounded (IEEE)")}
    if op in simple:
        ins, comment = simple[op]
        return [(f"{ins:<15} {d}, {a}, {b};", f"{d} = {comment}")]
    # max / min: exact; for floats a NaN operand gives NaN (numpy.maximum), which max.f64
    # alone would skip
    lines = [(f"{op}.{ptype:<11} {d}, {a}, {b};", f"{d} = the {'larger' if op == 'max' else 'smaller'} of a, b")]
    if is_float:
        lines += [(f"setp.nan.{ptype}    %p2, {a}, {b};", "p2 = a is NaN OR b is NaN"),
                  (f"@%p2 add.rn.{ptype} {d}, {a}, {b};", f"then {d} = a + b = NaN (NaN propagates)")]
    return lines


def binary(op: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    body = [*addresses(size, [("%rd20", "%rd11", "a[i]"), ("%rd21", "%rd12", "b[i]"), ("%rd22", "%rd10", "out[i]")]),
            (f"ld.global.{ptype}   {r}0, [%rd20];", "a[i]"),
            (f"ld.global.{ptype}   {r}1, [%rd21];", "b[i]"),
            *_arith(op, t, f"{r}2", f"{r}0", f"{r}1"),
            (f"st.global.{ptype}   [%rd22], {r}2;", "out[i] = the result")]
    summary = {"add": "a[i] + b[i]", "sub": "a[i] - b[i]", "mul": "a[i] * b[i]", "div": "a[i] / b[i]",
               "max": "max(a[i], b[i])", "min": "min(a[i], b[i])"}[op]
    params = [("out", f"{ctype}* out (may alias a or b)"), ("a", f"const {ctype}* a"), ("b", f"const {ctype}* b")]
    return grid_stride(f"{op}_{t}", f"out[i] = {summary}", params, body, {ptype: 4})


def _unary_body(op: str, t: str, d: str, x: str) -> list:
    ptype = TYPES[t][0]
    if op in ("neg", "abs"):
        note = "exact" if t == "f64" else "wraps at the most negative value, as numpy does"
        return [(f"{op}.{ptype:<11} {d}, {x};", f"{d} = {'-x' if op == 'neg' else '|x|'} ({note})")]
    if op == "sqrt":
        return [(f"sqrt.rn.{ptype}    {d}, {x};", f"{d} = sqrt(x), correctly rounded; NaN for x < 0")]
    if t == "f64":      # relu as relu_f32: +0 where x <= 0 (-0.0 too), x elsewhere (NaN stays)
        return [(f"setp.le.{ptype}    %p2, {x}, {ZERO[t]};", "p2 = (x <= 0), -0.0 too; false for NaN"),
                (f"selp.{ptype}       {d}, {ZERO[t]}, {x}, %p2;", f"{d} = p2 ? +0.0 : x")]
    return [(f"max.{ptype:<11} {d}, {x}, 0;", f"{d} = max(x, 0)")]


def unary(op: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    body = [*addresses(size, [("%rd20", "%rd11", "x[i]"), ("%rd22", "%rd10", "out[i]")]),
            (f"ld.global.{ptype}   {r}0, [%rd20];", "x[i]"),
            *_unary_body(op, t, f"{r}2", f"{r}0"),
            (f"st.global.{ptype}   [%rd22], {r}2;", "out[i] = the result")]
    summary = {"neg": "-x[i]", "abs": "|x[i]|", "relu": "max(x[i], 0)", "sqrt": "sqrt(x[i])"}[op]
    params = [("out", f"{ctype}* out (may alias x)"), ("x", f"const {ctype}* x")]
    return grid_stride(f"{op}_{t}", f"out[i] = {summary}", params, body, {ptype: 4})


def elementwise_file(t: str) -> str:
    ctype = TYPES[t][3]
    binaries = ["add", "sub", "mul"] + (["div"] if t == "f64" else []) + ["max", "min"]
    unaries = ["neg", "abs", "relu"] + (["sqrt"] if t == "f64" else [])
    numerics = ("IEEE arithmetic rounded to nearest even (.rn), div and sqrt correctly\n"
                "// rounded; max/min give NaN when either operand is NaN (numpy.maximum), relu\n"
                "// keeps NaN and gives +0.0 for -0.0 (as relu_f32).") if t == "f64" else (
                "two's complement arithmetic modulo 2^N: add, sub, mul (the low half of\n"
                "// the product), neg and abs wrap exactly as C's unsigned arithmetic and numpy\n"
                "// do (abs of the most negative value is itself). Division is not here: / on\n"
                "// integer tensors is refused by the frontend on every backend (true division\n"
                "// gives floats, and lowlevel does not promote dtypes).")
    header = f"""\
// elementwise_{t}.ptx -- {ctype} element-wise kernels: {' '.join(binaries)} (binary),
// {' '.join(unaries)} (unary).
// GENERATED by tools/gen_dtype_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void add_{t}({ctype}* out, const {ctype}* a,
//                                       const {ctype}* b, unsigned long long n)
//      extern "C" __global__ void neg_{t}({ctype}* out, const {ctype}* x,
//                                       unsigned long long n)
//   All operands contiguous with n elements (the backend materialises broadcast
//   operands first); out may alias an input. Launch: 1-D, any block up to 1024,
//   any grid (grid-stride loop), as elementwise_f32.ptx.
//
// Numerics: {numerics}

{VERSION}"""
    return header + "".join(binary(op, t) for op in binaries) + "".join(unary(op, t) for op in unaries)


COMPARE = {"eq": ("eq", "a == b"), "ne": ("ne", "a != b"), "lt": ("lt", "a < b"), "le": ("le", "a <= b"),
           "gt": ("gt", "a > b"), "ge": ("ge", "a >= b")}


def compare(op: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    # floats: the ordered comparisons are false for NaN, != is the unordered neu (true for
    # NaN), as in compare_f32.ptx and IEEE 754
    cmp = "neu" if (op == "ne" and t == "f64") else op
    body = [*addresses(size, [("%rd20", "%rd11", "a[i]"), ("%rd21", "%rd12", "b[i]")]),
            (f"ld.global.{ptype}   {r}0, [%rd20];", "a[i]"),
            (f"ld.global.{ptype}   {r}1, [%rd21];", "b[i]"),
            (f"setp.{cmp}.{ptype}    %p2, {r}0, {r}1;", f"p2 = {COMPARE[op][1]}"),
            ("selp.u16        %rs0, 1, 0, %p2;", "rs0 = p2 ? 1 : 0 (no branch)"),
            ("add.u64         %rd22, %rd10, %rd0;", "rd22 = &out[i] (one byte per element)"),
            ("st.global.u8    [%rd22], %rs0;", "out[i] = the bool")]
    params = [("out", "bool* out"), ("a", f"const {ctype}* a"), ("b", f"const {ctype}* b")]
    return grid_stride(f"{op}_{t}", f"out[i] = {COMPARE[op][1]}", params, body, {ptype: 2, "u16": 1})


def compare_file(t: str) -> str:
    ctype = TYPES[t][3]
    nan = ("\n// NaN: the ordered comparisons are false when either operand is NaN; != is the\n"
           "// unordered setp.neu (true for NaN), as compare_f32.ptx. -0.0 == +0.0.") if t == "f64" else ""
    header = f"""\
// compare_{t}.ptx -- {ctype} comparisons giving bool (one byte, 0 or 1):
//   eq_{t} ne_{t} lt_{t} le_{t} gt_{t} ge_{t}
// GENERATED by tools/gen_dtype_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void eq_{t}(bool* out, const {ctype}* a, const {ctype}* b,
//                                      unsigned long long n)
//   Contiguous operands of n elements; launch as compare_f32.ptx.
// Numerics: exact (signed comparisons for the integers).{nan}

{VERSION}"""
    return header + "".join(compare(op, t) for op in COMPARE)


WHERE = {"b8": (1, "u8", "u16", "%rs"), "b16": (2, "b16", "b16", "%h"), "b64": (8, "b64", "b64", "%rl")}


def where(bits: str) -> str:
    size, mtype, rtype, r = WHERE[bits]
    body = [("add.u64         %rd20, %rd11, %rd0;", "rd20 = &cond[i] (one byte per element)"),
            ("ld.global.u8    %rs4, [%rd20];", "cond[i], zero-extended"),
            ("setp.ne.u16     %p2, %rs4, 0;", "p2 = (cond[i] != 0): any nonzero byte is true"),
            *addresses(size, [("%rd21", "%rd12", "a[i]"), ("%rd22", "%rd13", "b[i]"), ("%rd23", "%rd10", "out[i]")]),
            (f"ld.global.{mtype}   {r}0, [%rd21];", "a[i] (both are read: no divergent loads)"),
            (f"ld.global.{mtype}   {r}1, [%rd22];", "b[i]"),
            (f"selp.{rtype}       {r}2, {r}0, {r}1, %p2;", "p2 ? a[i] : b[i], bits unchanged"),
            (f"st.global.{mtype}   [%rd23], {r}2;", "out[i] = the selected element")]
    params = [("out", f"{size}-byte elements out"), ("cond", "const bool* cond"), ("a", "const a"), ("b", "const b")]
    # (a .b64 move may use any 64-bit register: the s64 ones)
    regs = {"u16": 5} if rtype == "u16" else {"s64" if rtype == "b64" else rtype: 3, "u16": 5}
    return grid_stride(f"where_{bits}", f"out[i] = cond[i] ? a[i] : b[i] ({size}-byte elements)", params, body, regs)


def where_file() -> str:
    header = f"""\
// where_bits.ptx -- where() for 1-, 2- and 8-byte elements, as raw bits:
//   out[i] = cond[i] ? a[i] : b[i]   where_b8 (bool)  where_b16 (float16, bfloat16)
//                                    where_b64 (int64, float64)
// GENERATED by tools/gen_dtype_ptx.py from one template: edit that, not this.
// (4-byte elements: where_f32 of compare_f32.ptx, which moves bits too.)
//
//   C: extern "C" __global__ void where_b64(void* out, const bool* cond, const void* a,
//                                         const void* b, unsigned long long n)
//   Contiguous operands of n elements; a cond byte other than 0 counts as true.

{VERSION}"""
    return header + "".join(where(b) for b in WHERE)


ONE, HALF, INF, NINF, NAN = "0f3F800000", "0f3F000000", "0f7F800000", "0fFF800000", "0f7FFFFFFF"


def pow_body() -> list:
    return [*addresses(4, [("%rd20", "%rd11", "x[i]"), ("%rd21", "%rd12", "y[i]"), ("%rd22", "%rd10", "out[i]")]),
            ("ld.global.f32   %f0, [%rd20];", "f0 = x = base"),
            ("ld.global.f32   %f1, [%rd21];", "f1 = y = exponent"),
            ("abs.f32         %f2, %f0;", "f2 = |x|"),
            ("lg2.approx.f32  %f3, %f2;", "f3 = log2|x| (approximate; -inf at 0, +inf at inf)"),
            ("mul.rn.f32      %f3, %f3, %f1;", "f3 = y * log2|x|"),
            ("ex2.approx.f32  %f4, %f3;", "f4 = 2^that = |x|^y (approximate)"),
            # the sign: negative only for a negative base (or -0.0, -inf) and an odd integer y
            ("cvt.rzi.f32.f32 %f5, %f1;", "f5 = trunc(y)"),
            ("setp.eq.f32     %p2, %f5, %f1;", "p2 = y is an integer (or +-inf)"),
            (f"mul.rn.f32      %f6, %f1, {HALF};", "f6 = y / 2 (exact)"),
            ("cvt.rzi.f32.f32 %f7, %f6;", "f7 = trunc(y / 2)"),
            ("setp.neu.f32    %p3, %f7, %f6;", "p3 = y / 2 is not an integer: y is odd (if an integer)"),
            ("and.pred        %p3, %p3, %p2;", "p3 = y is an odd integer"),
            ("mov.b32         %r4, %f0;", "r4 = x's bits"),
            ("setp.lt.s32     %p4, %r4, 0;", "p4 = x's sign bit is set (-0.0 and -inf too)"),
            ("and.pred        %p4, %p4, %p3;", "p4 = the result is negative"),
            ("neg.f32         %f8, %f4;", "f8 = -|x|^y"),
            ("selp.f32        %f4, %f8, %f4, %p4;", "f4 = the result with its sign"),
            # a negative finite base and a non-integer exponent: no real result
            ("setp.lt.f32     %p5, %f0, 0f00000000;", "p5 = x < 0 (not -0.0, not NaN)"),
            (f"setp.neu.f32    %p6, %f0, {NINF};", "p6 = x != -inf (C: pow(-inf, 0.5) = +inf)"),
            ("and.pred        %p5, %p5, %p6;", "p5 = x is negative and finite"),
            ("not.pred        %p6, %p2;", "p6 = y is not an integer"),
            ("and.pred        %p5, %p5, %p6;", "p5 = a negative finite base, a non-integer exponent"),
            (f"selp.f32        %f4, {NAN}, %f4, %p5;", "then NaN"),
            # the exact cases of C's pow: x^0 = 1 and 1^y = 1 (even for NaN), (-1)^+-inf = 1
            (f"setp.eq.f32     %p5, %f2, {ONE};", "p5 = |x| == 1"),
            (f"setp.eq.f32     %p6, %f1, {INF};", "p6 = y == +inf"),
            (f"setp.eq.or.f32  %p6, %f1, {NINF}, %p6;", "p6 = y is +-inf"),
            ("and.pred        %p5, %p5, %p6;", "p5 = (-1 or 1) ^ +-inf: 1 (log2 1 * inf would be NaN)"),
            (f"setp.eq.or.f32  %p5, %f0, {ONE}, %p5;", "or x == 1: 1, even for y = NaN"),
            ("setp.eq.or.f32  %p5, %f1, 0f00000000, %p5;", "or y == +-0: 1, even for x = NaN"),
            (f"selp.f32        %f4, {ONE}, %f4, %p5;", "f4 = 1 in those cases"),
            ("st.global.f32   [%rd22], %f4;", "out[i] = x ** y")]


def pow_file() -> str:
    header = f"""\
// pow_f32.ptx -- out[i] = x[i] ** y[i] in float32, with the special cases of C's powf
// (which numpy and PyTorch follow).
// GENERATED by tools/gen_dtype_ptx.py: edit that, not this.
//
//   C: extern "C" __global__ void pow_f32(float* out, const float* x, const float* y,
//                                        unsigned long long n)
//   Contiguous operands of n elements (a number exponent is broadcast first).
//
// How: |x|^y = 2^(y * log2|x|) with the SFU's lg2.approx.f32 and ex2.approx.f32,
//   then the sign (negative for a negative base and an odd integer exponent), NaN
//   for a negative finite base and a non-integer exponent, and 1 for x^0, 1^y and
//   (-1)^+-inf. Zeros and infinities fall out of the logarithm: log2 0 = -inf, so
//   0^y is 0 for y > 0 and inf for y < 0 (-0.0 keeps its sign for odd y).
// Numerics: approximate. lg2.approx has an absolute error of about 2^-22, which
//   the multiply by y scales, so the relative error of the result is about
//   |y * log2|x|| * 2^-22 * ln 2 plus ex2.approx's 2 ulp: results are close to
//   powf but not always correctly rounded (3 ** 2 may be 9.000001 on a GPU).

{VERSION}"""
    params = [("out", "float* out"), ("x", "const float* x (base)"), ("y", "const float* y (exponent)")]
    return header + grid_stride("pow_f32", "out[i] = x[i] ** y[i]", params, pow_body(), {"f32": 10})


def generate() -> dict:
    """{file name: text} of every file this script writes."""
    files = {f"elementwise_{t}.ptx": elementwise_file(t) for t in TYPES}
    files.update({f"compare_{t}.ptx": compare_file(t) for t in TYPES})
    files["where_bits.ptx"] = where_file()
    files["pow_f32.ptx"] = pow_file()
    return files


if __name__ == "__main__":
    for name, text in generate().items():
        (PTX / name).write_text(text)
        sys.stdout.write(f"wrote ptx/{name}\n")

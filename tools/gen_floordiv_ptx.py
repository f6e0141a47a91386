"""Generate ptx/floordiv.ptx: floor division and the remainder of Python and PyTorch
(a // b and a % b: the quotient rounded toward minus infinity, the remainder with the
divisor's sign), for int32, int64 and float64:

    floordiv_i32 floordiv_i64 floordiv_f64    out[i] = a[i] // b[i]
    remainder_i32 remainder_i64 remainder_f64  out[i] = a[i] %  b[i]

Integers: C's truncating div and rem, then one step down where the remainder is nonzero
and its sign differs from the divisor's (a // 0 and a % 0 are what the GPU's division
gives: undefined, as PyTorch's CUDA kernels leave them; the CPU backend refuses them).

float64: q = floor(a / b), r = a - q * b by one fma (exact for every quotient below 2^52:
a - q*b is then a float64), and the same step down where the division rounded up onto an
integer (r's sign differs from b's). A larger quotient of finite numbers takes the exact
fmod by long division (y doubled up to x's binade, then halved back, subtracted where it
fits: one loop step per binary digit of the quotient, up to about 2100), q = (a - r) / b
from it as PyTorch's div_floor_floating computes it (floor(a / b) of the rounded quotient
can be one off there), then the step. The special values follow PyTorch's
div_floor_floating and fmod: a // 0 is a / 0 (inf or NaN); an infinite a or a NaN gives
NaN; a // inf is 0, or -1 where a and b differ in sign (a % inf is then a, or inf).
float32, float16 and bfloat16 are widened to float64 by the backend (exact), run here and
rounded back once.

    python tools/gen_floordiv_ptx.py            # rewrites ptx/floordiv.ptx

tests/backends/test_generated_ptx.py checks the committed file is what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import VERSION, addresses, grid_stride  # noqa: E402

PATH = pathlib.Path(__file__).resolve().parents[1] / "ptx" / "floordiv.ptx"
# dtype -> (PTX type, register, bytes, C type)
TYPES = {"i32": ("s32", "%ri", 4, "int"), "i64": ("s64", "%rl", 8, "long long"), "f64": ("f64", "%fd", 8, "double")}


def _integer(op: str, t: str) -> list:
    ptype, r, size, _ = TYPES[t]
    bits = f"b{size * 8}"
    result = f"{r}2" if op == "floordiv" else f"{r}3"
    return [(f"div.{ptype}         {r}2, {r}0, {r}1;", "q = a / b, truncated toward zero (C)"),
            (f"rem.{ptype}         {r}3, {r}0, {r}1;", "r = a % b, with a's sign (C)"),
            (f"setp.ne.{ptype}     %p2, {r}3, 0;", "p2 = (r != 0)"),
            (f"xor.{bits}         {r}4, {r}3, {r}1;", "r4's sign bit = r's sign bit XOR b's"),
            (f"setp.lt.{ptype}     %p3, {r}4, 0;", "p3 = r and b differ in sign"),
            ("and.pred        %p2, %p2, %p3;", "p2 = truncation was not the floor: step down"),
            (f"@%p2 sub.{ptype}    {r}2, {r}2, 1;", "q -= 1: the floor of a / b"),
            (f"@%p2 add.{ptype}    {r}3, {r}3, {r}1;", "r += b: the remainder now has b's sign"),
            (f"st.global.{ptype}   [%rd22], {result};", f"out[i] = {'q' if op == 'floordiv' else 'r'}")]


def _float(op: str) -> list:
    zero, one, half = "0d0000000000000000", "0d3FF0000000000000", "0d3FE0000000000000"
    exact_limit, inf = "0d4330000000000000", "0d7FF0000000000000"          # 2^52, infinity
    common = [("div.rn.f64      %fd2, %fd0, %fd1;", "fd2 = a / b, rounded (inf or NaN where b == 0)"),
              ("cvt.rmi.f64.f64 %fd3, %fd2;", "fd3 = q = floor(a / b)"),
              ("abs.f64         %fd7, %fd0;", "fd7 = x = |a|"),
              ("abs.f64         %fd8, %fd1;", "fd8 = y = |b|"),
              ("abs.f64         %fd6, %fd2;", "fd6 = |a / b|"),
              (f"setp.ge.f64     %p2, %fd6, {exact_limit};", "p2 = |a / b| >= 2^52 (or inf): q*b would not be exact"),
              (f"setp.lt.f64     %p3, %fd7, {inf};", "p3 = a is finite (false for NaN)"),
              ("and.pred        %p2, %p2, %p3;", "p2 = ... and a finite"),
              (f"setp.lt.f64     %p3, %fd8, {inf};", "p3 = b is finite (false for NaN)"),
              ("and.pred        %p2, %p2, %p3;", "p2 = ... and b finite"),
              (f"setp.gt.f64     %p3, %fd8, {zero};", "p3 = (b != 0)"),
              ("and.pred        %p2, %p2, %p3;", "p2 = a huge quotient of finite numbers: the exact fmod below"),
              ("@!%p2 bra       SMALL_QUOTIENT;", "else the one-fma remainder"),
              # fmod(x, y) by long division: y doubled up to x's binade, then halved back,
              # subtracted wherever it fits (each subtraction exact: yy <= r < 2 yy)
              ("mov.f64         %fd9, %fd8;", "fd9 = yy = y"),
              ("UP:", ""),
              ("sub.rn.f64      %fd10, %fd7, %fd9;", "fd10 = x - yy (rounded: monotonic, enough for the test)"),
              ("setp.ge.f64     %p3, %fd10, %fd9;", "p3 = x >= 2 yy"),
              ("@!%p3 bra       DOWN;", "no: yy is within x's binade (x < 2 yy)"),
              ("add.rn.f64      %fd9, %fd9, %fd9;", "yy *= 2 (exact)"),
              ("bra             UP;", "and test again"),
              ("DOWN:", ""),
              ("mov.f64         %fd10, %fd7;", "fd10 = r = x"),
              ("DOWN_LOOP:", ""),
              ("setp.ge.f64     %p3, %fd10, %fd9;", "p3 = (r >= yy)"),
              ("@%p3 sub.rn.f64 %fd10, %fd10, %fd9;", "then r -= yy (exact: yy <= r < 2 yy)"),
              ("setp.le.f64     %p3, %fd9, %fd8;", "p3 = (yy == y): the last step"),
              ("@%p3 bra        FMOD_DONE;", "done: r = fmod(|a|, |b|)"),
              (f"mul.rn.f64      %fd9, %fd9, {half};", "yy /= 2 (exact: back down the doublings)"),
              ("bra             DOWN_LOOP;", "next binary digit of the quotient"),
              ("FMOD_DONE:", ""),
              ("copysign.f64    %fd5, %fd0, %fd10;", "fd5 = r = fmod(a, b): |r| with a's sign"),
              # q from the exact remainder, as PyTorch's div_floor_floating (and numpy) do:
              # floor(a / b) of the rounded quotient can be one off up here
              ("sub.rn.f64      %fd4, %fd0, %fd5;", "fd4 = a - r"),
              ("div.rn.f64      %fd3, %fd4, %fd1;", "fd3 = q = (a - r) / b: an integer this large"),
              (f"setp.ne.f64     %p3, %fd5, {zero};", "p3 = (r != 0)"),
              (f"setp.lt.f64     %p4, %fd5, {zero};", "p4 = (r < 0)"),
              (f"setp.lt.f64     %p5, %fd1, {zero};", "p5 = (b < 0)"),
              ("xor.pred        %p4, %p4, %p5;", "p4 = r and b differ in sign"),
              ("and.pred        %p3, %p3, %p4;", "p3 = r takes b's sign by one step"),
              (f"@%p3 sub.rn.f64 %fd3, %fd3, {one};", "q -= 1"),
              ("@%p3 add.rn.f64 %fd5, %fd5, %fd1;", "r += b (one rounding)"),
              ("bra             STORE;", "the result is ready"),
              ("SMALL_QUOTIENT:", "")]
    small = [("neg.f64         %fd4, %fd3;", "fd4 = -q"),
             ("fma.rn.f64      %fd5, %fd4, %fd1, %fd0;", "fd5 = r = a - q*b, rounded once (exact while q < 2^53)"),
             (f"setp.eq.f64     %p2, %fd3, {zero};", "p2 = (q == 0): |a/b| < 1 (or b infinite)"),
             ("@%p2 mov.f64    %fd5, %fd0;", "then r = a exactly (q*b would be 0*inf = NaN for b = inf)"),
             (f"setp.ne.f64     %p3, %fd5, {zero};", "p3 = (r != 0); false for NaN"),
             (f"setp.lt.f64     %p4, %fd5, {zero};", "p4 = (r < 0)"),
             (f"setp.lt.f64     %p5, %fd1, {zero};", "p5 = (b < 0)"),
             ("xor.pred        %p4, %p4, %p5;", "p4 = r and b differ in sign"),
             ("and.pred        %p3, %p3, %p4;", "p3 = the division rounded up onto an integer: step down"),
             (f"@%p3 sub.rn.f64 %fd3, %fd3, {one};", "q -= 1"),
             ("@%p3 add.rn.f64 %fd5, %fd5, %fd1;", "r += b (one rounding, as fmod(a, b) + b)"),
             ("setp.nan.f64    %p6, %fd5, %fd5;", "p6 = r is NaN: a infinite or NaN, b NaN, or b == 0"),
             (f"setp.ne.f64     %p7, %fd1, {zero};", "p7 = (b != 0)"),
             ("and.pred        %p6, %p6, %p7;", "p6 = NaN result: everything but a // 0"),
             ("@%p6 mov.f64    %fd3, %fd5;", "then q = NaN (a // 0 keeps q = a / 0: inf or NaN)"),
             ("STORE:", "")]
    result = "%fd3" if op == "floordiv" else "%fd5"
    return common + small + [(f"st.global.f64   [%rd22], {result};", f"out[i] = {'q' if op == 'floordiv' else 'r'}")]


def kernel(op: str, t: str) -> str:
    ptype, r, size, ctype = TYPES[t]
    body = [*addresses(size, [("%rd20", "%rd11", "a[i]"), ("%rd21", "%rd12", "b[i]"), ("%rd22", "%rd10", "out[i]")]),
            (f"ld.global.{ptype}   {r}0, [%rd20];", "a = a[i]"),
            (f"ld.global.{ptype}   {r}1, [%rd21];", "b = b[i]"),
            *(_float(op) if t == "f64" else _integer(op, t))]
    summary = "a[i] // b[i] (floor)" if op == "floordiv" else "a[i] % b[i] (the sign of b[i])"
    params = [("out", f"{ctype}* out (may alias a or b)"), ("a", f"const {ctype}* a"), ("b", f"const {ctype}* b")]
    return grid_stride(f"{op}_{t}", f"out[i] = {summary}", params, body, {ptype: 11 if t == "f64" else 6})


def generate() -> str:
    header = f"""\
// floordiv.ptx -- floor division and the remainder as Python and PyTorch define them:
//   floordiv_i32 floordiv_i64 floordiv_f64     out[i] = a[i] // b[i] (rounded toward -inf)
//   remainder_i32 remainder_i64 remainder_f64  out[i] = a[i] % b[i] (the divisor's sign)
// GENERATED by tools/gen_floordiv_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void floordiv_i64(long long* out, const long long* a,
//                                            const long long* b, unsigned long long n)
//   Contiguous operands of n elements; launch as elementwise_f32.ptx.
// Numerics: the integers exact (a // 0 and a % 0 undefined, as the GPU's division);
// float64 remainders exact (an fma below quotients of 2^52, long division above), special
// values as PyTorch's (see the generator).

{VERSION}"""
    return header + "".join(kernel(op, t) for op in ("floordiv", "remainder") for t in TYPES)


if __name__ == "__main__":
    PATH.write_text(generate())
    sys.stdout.write(f"wrote {PATH}\n")

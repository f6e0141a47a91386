"""Generate the half-precision kernels that compute in float32 registers:

    ptx/elementwise_bf16.ptx   bfloat16: add sub mul div max min (binary), neg relu exp abs sqrt
                               and rsqrt log log1p expm1 tanh sigmoid (unary)
    ptx/unary_f16.ptx          float16: rsqrt log log1p expm1 tanh sigmoid (elementwise_f16.ptx
                               has the arithmetic, natively)

Each element is widened to float32 (exact: every half is a float32), the float32 operation
runs in registers (the bodies of tools/gen_unary_ptx.py for the math), and the result is
rounded once at the store: to nearest even, NaN to the canonical quiet NaN (bfloat16 by hand
on the bits, as ptx/cast_bf16.ptx, since sm_60 has no bf16 instructions; float16 by
cvt.rn.f16.f32). That is what PyTorch does for these dtypes (opmath_t = float). Every line
a kernel emits is an (instruction, comment) pair.

    python tools/gen_half_ptx.py          # rewrites the files above

tests/backends/test_generated_ptx.py checks the committed files are what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from gen_unary_ptx import BODIES, LOG2E, SUMMARY  # noqa: E402
from ptx_template import VERSION, addresses, grid_stride, round_f32_to_bf16, widen_to_f32  # noqa: E402

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"
CTYPE = {"bf16": "__nv_bfloat16", "f16": "__half"}
NAN_F32 = "0f7FFFFFFF"


def load_widened(t: str, dst: str, address: str, k: int) -> list:
    """dst (f32) = the half at address, widened exactly."""
    if t == "f16":
        return [(f"ld.global.b16   %h{k}, [{address}];", f"h{k} = the __half element"),
                *widen_to_f32(t, dst, f"%h{k}")]
    return [(f"ld.global.u16   %rb{k}, [{address}];", f"rb{k} = the bfloat16 bits (zero-extended)"),
            *widen_to_f32(t, dst, f"%rb{k}")]


def store_rounded(t: str, address: str, src: str) -> list:
    """The half at address = src (f32) rounded to nearest even, once."""
    if t == "f16":
        return [(f"cvt.rn.f16.f32  %h2, {src};", "h2 = the result rounded to float16 (nearest even)"),
                (f"st.global.b16   [{address}], %h2;", "store the __half")]
    return [*round_f32_to_bf16("%rb2", src),
            ("cvt.u16.u32     %rs7, %rb2;", "rs7 = the low 16 bits: the bfloat16"),
            (f"st.global.b16   [{address}], %rs7;", "store the bfloat16")]


def binary_body(op: str) -> list:
    ins = {"add": "add.rn.f32", "sub": "sub.rn.f32", "mul": "mul.rn.f32", "div": "div.rn.f32",
           "max": "max.f32", "min": "min.f32"}[op]
    out = [(f"{ins:<15} %f1, %f0, %f2;", f"f1 = a {op} b in float32" + (", correctly rounded" if op == "div" else ""))]
    if op in ("max", "min"):       # max.f32 returns the number when one operand is NaN: numpy gives NaN
        out += [("setp.nan.f32    %p2, %f0, %f2;", "p2 = a is NaN OR b is NaN"),
                ("@%p2 add.rn.f32 %f1, %f0, %f2;", "then f1 = a + b = NaN (NaN propagates)")]
    return out


UNARY = {"neg": [("neg.f32         %f1, %f0;", "f1 = -x (exact)")],
         "abs": [("abs.f32         %f1, %f0;", "f1 = |x| (exact)")],
         "relu": [("setp.le.f32     %p2, %f0, 0f00000000;", "p2 = (x <= 0), -0.0 too; false for NaN"),
                  ("selp.f32        %f1, 0f00000000, %f0, %p2;", "f1 = p2 ? +0.0 : x (relu(-0.0) = +0.0)")],
         "sqrt": [("sqrt.rn.f32     %f1, %f0;", "f1 = sqrt(x), correctly rounded; NaN for x < 0")],
         "exp": [(f"mul.rn.f32      %f1, %f0, {LOG2E};", "f1 = x * log2(e)"),
                 ("ex2.approx.f32  %f1, %f1;", "f1 = 2^that = e^x (a few float32 ulp: far below a half's)")],
         **BODIES}
SUMMARIES = {"neg": "-x[i]", "abs": "|x[i]|", "relu": "max(x[i], 0)", "sqrt": "sqrt(x[i])", "exp": "e^x[i]",
             **SUMMARY}
BINARY = {"add": "a[i] + b[i]", "sub": "a[i] - b[i]", "mul": "a[i] * b[i]", "div": "a[i] / b[i]",
          "max": "max(a[i], b[i])", "min": "min(a[i], b[i])"}
# registers: f32 scratch of the bodies (f0..f11), the halves' bits, the bf16 store's u16
REGS = {"bf16": {"f32": 12, "b32": 3, "u16": 8}, "f16": {"f32": 12, "b16": 3}}


def binary(op: str, t: str) -> str:
    body = [*addresses(2, [("%rd20", "%rd11", "a[i]"), ("%rd21", "%rd12", "b[i]"), ("%rd22", "%rd10", "out[i]")]),
            *load_widened(t, "%f0", "%rd20", 0), *load_widened(t, "%f2", "%rd21", 1),
            *binary_body(op), *store_rounded(t, "%rd22", "%f1")]
    c = CTYPE[t]
    params = [("out", f"{c}* out (may alias a or b)"), ("a", f"const {c}* a"), ("b", f"const {c}* b")]
    return grid_stride(f"{op}_{t}", f"out[i] = {BINARY[op]}, in float32, rounded once", params, body, REGS[t])


def unary(op: str, t: str) -> str:
    body = [*addresses(2, [("%rd20", "%rd11", "x[i]"), ("%rd22", "%rd10", "out[i]")]),
            *load_widened(t, "%f0", "%rd20", 0), *UNARY[op], *store_rounded(t, "%rd22", "%f1")]
    c = CTYPE[t]
    params = [("out", f"{c}* out (may alias x)"), ("x", f"const {c}* x")]
    return grid_stride(f"{op}_{t}", f"out[i] = {SUMMARIES[op]}, in float32, rounded once", params, body, REGS[t])


def header(name: str, t: str, binaries, unaries) -> str:
    c = CTYPE[t]
    binary_c = (f"\n//      extern \"C\" __global__ void add_{t}({c}* out, const {c}* a, const {c}* b,\n"
                f"//                                      unsigned long long n)") if binaries else ""
    return f"""\
// {name} -- {c} kernels computing in float32 registers:
//   {' '.join(binaries) + (' (binary), ' if binaries else '')}{' '.join(unaries)} (unary)
// GENERATED by tools/gen_half_ptx.py: edit that, not this.
//
//   C: extern "C" __global__ void tanh_{t}({c}* out, const {c}* x, unsigned long long n){binary_c}
//   Contiguous operands of n elements; out may alias an input. Launch: 1-D, any
//   block up to 1024, any grid (grid-stride loop), as elementwise_f32.ptx.
//
// Numerics: each operand widened to float32 (exact), the float32 operation of
// elementwise_f32.ptx / unary_f32.ptx, one rounding to {t} at the store (nearest
// even; NaN -> the quiet NaN), as PyTorch computes {c} (in float). The math
// ops' float32 error (a few float32 ulp) is far below half a {t} ulp, so the
// results are the correctly rounded {t} ones except next to a rounding tie.
// max/min propagate NaN (numpy.maximum); relu(-0.0) = +0.0.

{VERSION}"""


MATH = list(BODIES)


def generate() -> dict:
    binaries, unaries = list(BINARY), ["neg", "relu", "exp", "abs", "sqrt", *MATH]
    bf16 = header("elementwise_bf16.ptx", "bf16", binaries, unaries) + "".join(binary(op, "bf16") for op in binaries) \
        + "".join(unary(op, "bf16") for op in unaries)
    f16 = header("unary_f16.ptx", "f16", [], MATH) + "".join(unary(op, "f16") for op in MATH)
    return {"elementwise_bf16.ptx": bf16, "unary_f16.ptx": f16}


if __name__ == "__main__":
    for name, text in generate().items():
        (PTX / name).write_text(text)
        sys.stdout.write(f"wrote ptx/{name}\n")

"""Generate ptx/cast_all.ptx: a cast kernel for every pair of lowlevel's dtypes (bool int32
int64 float16 bfloat16 float32 float64) that ptx/tensor_ops.ptx and ptx/cast_bf16.ptx do
not already have, from one template: load the element into its dtype's natural register,
convert (the rules below), store.

    python tools/gen_cast_ptx.py            # rewrites ptx/cast_all.ptx

tests/backends/test_generated_ptx.py checks the committed file is what this writes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from ptx_template import (  # noqa: E402
    DTYPES, VERSION, element_address, grid_stride, load, reg, round_f32_to_bf16, store, widen_to_f32)

PTX = pathlib.Path(__file__).resolve().parents[1] / "ptx"
ORDER = ["bool", "i32", "i64", "f16", "bf16", "f32", "f64"]
# the pairs the handwritten files have (tensor_ops.ptx, cast_bf16.ptx)
EXISTING = {("f32", "f16"), ("f16", "f32"), ("f32", "f64"), ("f64", "f32"), ("i32", "f32"), ("f32", "i32"),
            ("f32", "bf16"), ("bf16", "f32")}
PTYPE = {"i32": "s32", "i64": "s64", "f16": "f16", "f32": "f32", "f64": "f64"}
ZERO = {"f32": "0f00000000", "f64": "0d0000000000000000"}
ONE_BITS = {"i32": ("1", "0"), "i64": ("1", "0"), "f32": ("0f3F800000", "0f00000000"),
            "f64": ("0d3FF0000000000000", "0d0000000000000000"), "bf16": ("16256", "0")}


def from_bool(dst: str, d: str) -> list:
    """bool -> 1 or 0 of the target type."""
    test = ("setp.ne.u16     %p2, %rs0, 0;", "p2 = the bool is true (any nonzero byte)")
    if d == "f16":
        return [test, ("mov.b16         %h1, 0x3C00;", "h1 = 1.0 as a half"),
                ("mov.b16         %h2, 0x0000;", "h2 = 0.0 as a half"),
                (f"selp.b16        {dst}, %h1, %h2, %p2;", f"{dst} = true ? 1.0 : 0.0")]
    one, zero = ONE_BITS[d]
    ptype = "b32" if d == "bf16" else PTYPE[d]
    return [test, (f"selp.{ptype:<10} {dst}, {one}, {zero}, %p2;", f"{dst} = true ? 1 : 0")]


def to_bool(src: str, s: str, dst: str) -> list:
    """x != 0 -> 1 or 0: NaN is true and -0.0 false, as numpy's astype(bool) and PyTorch."""
    if s in ("i32", "i64"):
        test = [(f"setp.ne.{PTYPE[s]}    %p2, {src}, 0;", "p2 = (x != 0)")]
    elif s == "f64":
        test = [(f"setp.neu.f64    %p2, {src}, {ZERO['f64']};", "p2 = (x != 0), unordered: true for NaN")]
    else:
        f = src if s == "f32" else "%f1"
        test = ([] if s == "f32" else widen_to_f32(s, "%f1", src)) + [
            (f"setp.neu.f32    %p2, {f}, {ZERO['f32']};", "p2 = (x != 0), unordered: true for NaN")]
    return [*test, (f"selp.u16        {dst}, 1, 0, %p2;", f"{dst} = p2 ? 1 : 0")]


def convert(s: str, d: str, src: str, dst: str) -> list:
    """Lines turning src (s's natural register) into dst (d's)."""
    if s == "bool":
        return from_bool(dst, d)
    if d == "bool":
        return to_bool(src, s, dst)
    ints = ("i32", "i64")
    if s in ints and d in ints:        # sign-extend, or keep the low 32 bits (wraps, as numpy)
        return [(f"cvt.{PTYPE[d]}.{PTYPE[s]}     {dst}, {src};",
                 f"{dst} = x {'sign-extended' if d == 'i64' else 'modulo 2^32 (the low half)'}")]
    if s == "bf16":                    # every bfloat16 is a float32: widen, then as from float32
        return [*widen_to_f32("bf16", "%f1", src), *convert("f32", d, "%f1", dst)]
    if d == "bf16":                    # to float32 first (as the CPU backend and PyTorch do), then round
        first = [] if s == "f32" else convert(s, "f32", src, "%f2")
        return [*first, *round_f32_to_bf16(dst, src if s == "f32" else "%f2")]
    if s in ints:                      # integer -> float: nearest even
        return [(f"cvt.rn.{PTYPE[d]}.{PTYPE[s]}  {dst}, {src};", f"{dst} = x rounded to nearest even")]
    if d in ints:                      # float -> integer: toward zero (C); NaN -> 0, saturating
        return [(f"cvt.rzi.{PTYPE[d]}.{PTYPE[s]} {dst}, {src};",
                 f"{dst} = x truncated toward zero (NaN gives 0; out of range saturates)")]
    wider = {"f16": 0, "f32": 1, "f64": 2}
    if wider[d] > wider[s]:
        return [(f"cvt.{PTYPE[d]}.{PTYPE[s]}     {dst}, {src};", f"{dst} = x, exactly (widening)")]
    return [(f"cvt.rn.{PTYPE[d]}.{PTYPE[s]}  {dst}, {src};",
             f"{dst} = x rounded to nearest even, once (too large: +-inf)")]


def kernel(s: str, d: str) -> str:
    ssize, sreg, sc = DTYPES[s]
    dsize, dreg, dc = DTYPES[d]
    src, dst = reg(s, 0), reg(d, 3)
    if src == dst:                      # same register kind (never for a real pair: kept apart anyway)
        dst = reg(d, 4)
    body = [*element_address("%rd20", "%rd11", "%rd0", ssize, "x[i]"),
            *element_address("%rd21", "%rd10", "%rd0", dsize, "out[i]"),
            *load(s, src, "%rd20"),
            *convert(s, d, src, dst),
            *store(d, "%rd21", dst)]
    regs = {}
    for t, n in (("u16", 8), ("b16", 5), ("b32", 5), ("f32", 5), (sreg, 5), (dreg, 5)):
        regs[t] = max(regs.get(t, 0), n)
    params = [("out", f"{dc}* out"), ("x", f"const {sc}* x")]
    return grid_stride(f"cast_{s}_{d}", f"out[i] = ({dc}) x[i]", params, body, regs)


def generate() -> str:
    header = f"""\
// cast_all.ptx -- conversions between every pair of bool, int32, int64, float16,
// bfloat16, float32 and float64 that tensor_ops.ptx and cast_bf16.ptx do not have,
// named cast_<from>_<to> (i32 i64 f16 bf16 f32 f64 bool).
// GENERATED by tools/gen_cast_ptx.py from one template: edit that, not this.
//
//   C: extern "C" __global__ void cast_i64_f16(__half* out, const long long* x,
//                                             unsigned long long n)   // and likewise
//   out and x contiguous with n elements, not overlapping. Launch: 1-D, any block up
//   to 1024, any grid (grid-stride loop).
//
// The rules (numpy's and PyTorch's, and the CPU backend's):
//   to bool          x != 0: NaN is true, -0.0 false
//   from bool        1 or 0
//   int <-> int      widening sign-extends; int64 -> int32 keeps the low 32 bits (wraps)
//   int -> float     cvt.rn: nearest even (int64 -> float32 may round)
//   float -> int     cvt.rzi: truncation toward zero, as a C cast. Where C and numpy
//                    leave it undefined (NaN, +-inf, out of range), PTX defines it:
//                    NaN -> 0, out of range saturates to the type's min / max. (The
//                    CPU backend gives numpy's value there, often the minimum.)
//   float -> float   widening is exact; narrowing is one cvt.rn (nearest even,
//                    overflow to +-inf), float64 -> float16 included.
//   to bfloat16      through float32 (the CPU backend and PyTorch convert this way,
//                    so int64 and float64 -> bfloat16 round twice), then round to
//                    nearest even on the bits, NaN -> 0x7FC0, as cast_bf16.ptx.
//   from bfloat16    widened to float32 (exact: a shift), then as from float32.

{VERSION}"""
    return header + "".join(kernel(s, d) for s in ORDER for d in ORDER if s != d and (s, d) not in EXISTING)


PATH = PTX / "cast_all.ptx"

if __name__ == "__main__":
    PATH.write_text(generate())
    sys.stdout.write(f"wrote {PATH}\n")

"""mma.sync.aligned.m8n8k4 with .f16: four 8x8x4 products per warp, one per quad-pair
(lanes 0-3 with 16-19, 4-7 with 20-23, ...), A and B row- or column-major, C and D f16 or
f32 (or an f32 D from an f16 C, the one mixed form ptxas takes). The registers are packed here from random matrices by the PTX ISA's
formulas ("Matrix Fragments for mma.m8n8k4 with .f16 floating point type"), written out
below as the ISA gives them in terms of %laneid, and D is compared with a float64 matmul
within a bound proportionate to K. Two warps, eight matrices; outputs poisoned.
"""
import numpy as np
import pytest

from helpers.memory import download, poisoned, upload
from lowlevel import cuda

WARPS = 2
N = 32 * WARPS
EPS = {"f32": np.finfo(np.float32).eps, "f16": np.finfo(np.float16).eps}


def high(lane):
    return 0 if lane < 16 else 4


A_POS = {"row": lambda lane, i: (lane % 4 + high(lane), i),
         "col": lambda lane, i: (i % 4 + high(lane), lane % 4)}
B_POS = {"row": lambda lane, i: (lane % 4, i + high(lane)),
         "col": lambda lane, i: (i, lane % 4 + high(lane))}


def c_pos(ctype):
    if ctype == "f16":
        return lambda lane, i: (lane % 4 + high(lane), i)

    def f32(lane, i):
        x = (lane & 0b1) + (i & 0b10)
        return x + high(lane), (i & 0b100) + (lane & 0b10) + (i & 0b1)
    return f32


def computation(lane):
    """Which of the warp's four products a lane takes part in (quad-pair)."""
    return (lane % 16) // 4


def fragments(mats, pos, count):
    """Each lane's elements (N, count) of its quad-pair's matrix in `mats` (WARPS, 4, r, c)."""
    out = np.zeros((N, count))
    for t in range(N):
        w, lane = divmod(t, 32)
        for i in range(count):
            out[t, i] = mats[(w, computation(lane), *pos(lane, i))]
    return out


def to_registers(vals, kind):
    """f16 pairs (lowest element in the low half) or f32 registers."""
    if kind == "f32":
        return vals.astype(np.float32)
    h = vals.astype(np.float16).view(np.uint16).astype(np.uint32)
    return h[:, 0::2] | (h[:, 1::2] << 16)


def from_registers(regs, kind):
    if kind == "f32":
        return regs.astype(np.float64)
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=2).reshape(N, -1)
    return halves.astype(np.uint16).view(np.float16).astype(np.float64)


def kernel(instr, nc, nd, ctype, dtype):
    creg = ".f32" if ctype == "f32" else ".b32"
    dreg = ".f32" if dtype == "f32" else ".b32"
    lines = [".version 8.0", ".target sm_80", ".address_size 64",
             ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd) {",
             "  .reg .b32 %a<2>, %b<2>;", f"  .reg {creg} %c<{nc}>;", f"  .reg {dreg} %d<{nd}>;",
             "  .reg .u32 %lane;", "  .reg .u64 %p<4>, %off;", "  mov.u32 %lane, %tid.x;"]
    for j, (name, count) in enumerate((("pa", 2), ("pb", 2), ("pc", nc), ("pd", nd))):
        lines += [f"  ld.param.u64 %p{j}, [{name}];", f"  cvta.to.global.u64 %p{j}, %p{j};",
                  f"  mul.wide.u32 %off, %lane, {4 * count};", f"  add.u64 %p{j}, %p{j}, %off;"]
    lines += [f"  ld.global.b32 %a{r}, [%p0+{4 * r}];" for r in range(2)]
    lines += [f"  ld.global.b32 %b{r}, [%p1+{4 * r}];" for r in range(2)]
    lines += [f"  ld.global{creg} %c{r}, [%p2+{4 * r}];" for r in range(nc)]

    def vec(x, n):
        return "{" + ", ".join(f"%{x}{r}" for r in range(n)) + "}"
    lines.append(f"  {instr} {vec('d', nd)}, {vec('a', 2)}, {vec('b', 2)}, {vec('c', nc)};")
    lines += [f"  st.global{dreg} [%p3+{4 * r}], %d{r};" for r in range(nd)]
    return "\n".join([*lines, "  ret;", "}", ""])


CASES = [(al, bl, "f32", "f32") for al in ("row", "col") for bl in ("row", "col")] + \
        [("row", "col", "f16", "f16"), ("col", "row", "f16", "f16"),
         ("row", "row", "f32", "f16"), ("col", "col", "f32", "f16")]


@pytest.mark.parametrize("alayout, blayout, dtype, ctype", CASES,
                         ids=lambda x: x if isinstance(x, str) else None)
def test_mma_m8n8k4_f16(driver, rng, alayout, blayout, dtype, ctype):
    a = rng.standard_normal((WARPS, 4, 8, 4)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((WARPS, 4, 4, 8)).astype(np.float16).astype(np.float64)
    c = rng.standard_normal((WARPS, 4, 8, 8))
    c = c.astype(np.float16 if ctype == "f16" else np.float32).astype(np.float64)
    ra = to_registers(fragments(a, A_POS[alayout], 4), "f16")
    rb = to_registers(fragments(b, B_POS[blayout], 4), "f16")
    rc = to_registers(fragments(c, c_pos(ctype), 8), ctype)
    nd = 4 if dtype == "f16" else 8
    d_np = np.uint32 if dtype == "f16" else np.float32
    instr = f"mma.sync.aligned.m8n8k4.{alayout}.{blayout}.{dtype}.f16.f16.{ctype}"
    out = upload(poisoned((N, nd), d_np))
    cuda.Module.from_ptx(kernel(instr, rc.shape[1], nd, ctype, dtype)).get_function("k").launch(
        1, N, (upload(ra), upload(rb), upload(rc), out))
    got_elems = from_registers(download(out, (N, nd), d_np), dtype)
    got = np.full(c.shape, np.nan)
    pos = c_pos(dtype)
    for t in range(N):
        w, lane = divmod(t, 32)
        for i in range(8):
            got[(w, computation(lane), *pos(lane, i))] = got_elems[t, i]
    want = a @ b + c
    bound = 5 * EPS[dtype] * (np.abs(a) @ np.abs(b) + np.abs(c))
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


def test_mma_m8n8k4_f16_refused_forms():
    """m8n8k4 .f16 takes two A and two B registers, and four (f16) or eight (f32) for C and
    D, and no f16 D from an f32 C (ptxas: ".dtype must be '.f32' when .ctype is '.f32'"):
    the emulator refuses these at load, naming the problem."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    bad = kernel("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", 8, 8, "f32", "f32")
    bad = bad.replace("{%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7}", "{%d0, %d1, %d2, %d3}")
    with pytest.raises(PtxError, match="d takes 8 registers"):
        load_ptx(bad)
    with pytest.raises(PtxError, match="dtype and .ctype"):
        load_ptx(kernel("mma.sync.aligned.m8n8k4.col.col.f16.f16.f16.f32", 8, 4, "f32", "f16"))

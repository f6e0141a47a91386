"""mma.sync for every shape and type the PTX ISA lists up to sm_90 (m8n8k4 .f16: test_mma_m8n8k4.py): a
handwritten PTX kernel loads each lane's a, b and c registers from memory, runs one mma and
stores d. The registers are packed here, in numpy, from random matrices by the ISA's own
formulas ("Matrix Fragments for mma.mMnNkK", written out below per shape as the ISA gives
them, independent of the emulator's generic layout), and D is unpacked the same way and
compared with a float64 / int64 matmul: floats within a bound proportionate to K (the
tensor core's accumulation keeps fewer bits), integers and bits exactly. Two warps with
matrices of their own; outputs poisoned.
"""
import numpy as np
import pytest

from helpers.mma_matrices import BITS, dims, random_matrix
from helpers.memory import download, poisoned, upload
from helpers.ptxas import ptxas_refusal
from lowlevel import cuda

WARPS = 2
N = 32 * WARPS


# --- the ISA's layouts, per shape: (row, col) of element i of a lane with groupID g and
# threadID_in_group t ------------------------------------------------------------------

def c_m16n8(g, t, i):
    return (g if i < 2 else g + 8), 2 * t + (i & 1)


def c_m8n8(g, t, i):
    return g, 2 * t + i


LAYOUTS = {   # (shape, family) -> (A position, B position, C position)
    ("m16n8k8", "f16"): (lambda g, t, i: ((g if i < 2 else g + 8), 2 * t + (i & 1)),
                         lambda g, t, i: (2 * t + i, g), c_m16n8),
    ("m16n8k16", "f16"): (lambda g, t, i: ((g if i in (0, 1, 4, 5) else g + 8), 2 * t + (i & 1) + (8 if i >= 4 else 0)),
                          lambda g, t, i: (2 * t + (i & 1) + (8 if i >= 2 else 0), g), c_m16n8),
    ("m16n8k4", "tf32"): (lambda g, t, i: ((g if i == 0 else g + 8), t),
                          lambda g, t, i: (t, g), c_m16n8),
    ("m16n8k8", "tf32"): (lambda g, t, i: ((g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)),
                          lambda g, t, i: ((t if i == 0 else t + 4), g), c_m16n8),
    ("m8n8k4", "f64"): (lambda g, t, i: (g, t), lambda g, t, i: (t, g), c_m8n8),
    ("m16n8k16", "f64"): (lambda g, t, i: ((g if i % 2 == 0 else g + 8), (2 * i + t if i % 2 == 0 else 2 * i - 2 + t)),
                          lambda g, t, i: (t + 4 * i, g), c_m16n8),
    ("m8n8k16", "i8"): (lambda g, t, i: (g, 4 * t + i), lambda g, t, i: (4 * t + i, g), c_m8n8),
    ("m16n8k16", "i8"): (lambda g, t, i: ((g if i < 4 else g + 8), 4 * t + (i & 3)),
                         lambda g, t, i: (4 * t + i, g), c_m16n8),
    ("m16n8k32", "i8"): (lambda g, t, i: ((g if i < 4 or 8 <= i < 12 else g + 8), 4 * t + (i & 3) + (16 if i >= 8 else 0)),
                         lambda g, t, i: (4 * t + (i & 3) + (16 if i >= 4 else 0), g), c_m16n8),
    ("m8n8k32", "i4"): (lambda g, t, i: (g, 8 * t + i), lambda g, t, i: (8 * t + i, g), c_m8n8),
    ("m16n8k32", "i4"): (lambda g, t, i: ((g if i < 8 else g + 8), 8 * t + (i & 7)),
                         lambda g, t, i: (8 * t + i, g), c_m16n8),
    ("m16n8k64", "i4"): (lambda g, t, i: ((g if i < 8 or 16 <= i < 24 else g + 8), 8 * t + (i & 7) + (32 if i >= 16 else 0)),
                         lambda g, t, i: (8 * t + (i & 7) + (32 if i >= 8 else 0), g), c_m16n8),
    ("m8n8k128", "b1"): (lambda g, t, i: (g, 32 * t + i), lambda g, t, i: (32 * t + i, g), c_m8n8),
    ("m16n8k128", "b1"): (lambda g, t, i: ((g if i < 32 else g + 8), 32 * t + (i & 31)),
                          lambda g, t, i: (32 * t + i, g), c_m16n8),
    ("m16n8k256", "b1"): (lambda g, t, i: ((g if i < 32 or 64 <= i < 96 else g + 8), 32 * t + (i & 31) + (128 if i >= 64 else 0)),
                          lambda g, t, i: (32 * t + (i & 31) + (128 if i >= 32 else 0), g), c_m16n8),
}
# the ISA gives bf16 the f16 layouts, and f64 the tf32 ones for m16n8k4 and m16n8k8
for _shape in ("m16n8k8", "m16n8k16"):
    LAYOUTS[(_shape, "bf16")] = LAYOUTS[(_shape, "f16")]
for _shape in ("m16n8k4", "m16n8k8"):
    LAYOUTS[(_shape, "f64")] = LAYOUTS[(_shape, "tf32")]
# and the 8-bit floats the 8-bit integers' (m16n8k16 and m16n8k32)
for _shape in ("m16n8k16", "m16n8k32"):
    LAYOUTS[(_shape, "f8")] = LAYOUTS[(_shape, "i8")]

FAMILY = {"s8": "i8", "u8": "i8", "s4": "i4", "u4": "i4", "e4m3": "f8", "e5m2": "f8"}


# --- matrices, and their bits ------------------------------------------------------------

def pack(bits, kind, pos, count):
    """The registers of every lane: (N, registers) uint32 (uint64 for f64), element i of a
    lane at `pos(g, t, i)` of its warp's matrix, lowest bits first."""
    width = BITS[kind]
    per = max(1, 32 // width)
    out = np.zeros((N, count // per), np.uint64)
    for lane in range(N):
        w, g, t = lane // 32, (lane % 32) // 4, lane % 4
        for i in range(count):
            r, c = pos(g, t, i)
            out[lane, i // per] |= np.uint64(int(bits[w, r, c]) << (width * (i % per)))
    return out if width == 64 else out.astype(np.uint32)


def unpack(regs, pos, shape, count, dtype):
    """The per-warp matrices of accumulator registers (N, count) (f16 pairs unpacked)."""
    out = np.full((WARPS, *shape), np.nan)
    for lane in range(N):
        w, g, t = lane // 32, (lane % 32) // 4, lane % 4
        for i in range(count):
            out[(w, *pos(g, t, i))] = regs[lane, i]
    return out


# --- the kernel ------------------------------------------------------------------------

REG = {"f32": (".f32", "f32", 4), "f16": (".b32", "b32", 4), "f64": (".f64", "f64", 8), "s32": (".s32", "s32", 4)}


def mma_ptx(instr, na, nb, nc, ab_f64, ctype, target, version="8.0"):
    ab_reg, ab_ld, ab_size = (".f64", "f64", 8) if ab_f64 else (".b32", "b32", 4)
    c_reg, c_ld, c_size = REG[ctype]
    lines = [f".version {version}", f".target {target}", ".address_size 64",
             ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd) {",
             f"  .reg {ab_reg} %a<{na}>;", f"  .reg {ab_reg} %b<{nb}>;",
             f"  .reg {c_reg} %c<{nc}>;", f"  .reg {c_reg} %d<{nc}>;",
             "  .reg .u32 %lane;", "  .reg .u64 %p<4>, %off;", "  mov.u32 %lane, %tid.x;"]
    for j, (name, count, size) in enumerate((("pa", na, ab_size), ("pb", nb, ab_size),
                                             ("pc", nc, c_size), ("pd", nc, c_size))):
        lines += [f"  ld.param.u64 %p{j}, [{name}];", f"  cvta.to.global.u64 %p{j}, %p{j};",
                  f"  mul.wide.u32 %off, %lane, {count * size};", f"  add.u64 %p{j}, %p{j}, %off;"]
    lines += [f"  ld.global.{ab_ld} %a{r}, [%p0+{r * ab_size}];" for r in range(na)]
    lines += [f"  ld.global.{ab_ld} %b{r}, [%p1+{r * ab_size}];" for r in range(nb)]
    lines += [f"  ld.global.{c_ld} %c{r}, [%p2+{r * c_size}];" for r in range(nc)]

    def vec(x, n):
        return "{" + ", ".join(f"%{x}{r}" for r in range(n)) + "}"
    lines.append(f"  {instr} {vec('d', nc)}, {vec('a', na)}, {vec('b', nb)}, {vec('c', nc)};")
    lines += [f"  st.global.{c_ld} [%p3+{r * c_size}], %d{r};" for r in range(nc)]
    return "\n".join([*lines, "  ret;", "}", ""])


CASES = [  # shape, dtype, atype, btype, ctype, extra modifiers
    ("m16n8k8", "f32", "f16", "f16", "f32", ""), ("m16n8k16", "f32", "f16", "f16", "f32", ""),
    ("m16n8k8", "f16", "f16", "f16", "f16", ""), ("m16n8k16", "f16", "f16", "f16", "f16", ""),
    ("m16n8k8", "f32", "bf16", "bf16", "f32", ""), ("m16n8k16", "f32", "bf16", "bf16", "f32", ""),
    ("m16n8k4", "f32", "tf32", "tf32", "f32", ""), ("m16n8k8", "f32", "tf32", "tf32", "f32", ""),
    ("m8n8k4", "f64", "f64", "f64", "f64", ""), ("m8n8k4", "f64", "f64", "f64", "f64", ".rn"),
    ("m16n8k4", "f64", "f64", "f64", "f64", ""), ("m16n8k8", "f64", "f64", "f64", "f64", ""),
    ("m16n8k16", "f64", "f64", "f64", "f64", ""),
    ("m8n8k16", "s32", "s8", "s8", "s32", ""), ("m8n8k16", "s32", "u8", "s8", "s32", ""),
    ("m16n8k16", "s32", "s8", "u8", "s32", ""), ("m16n8k32", "s32", "u8", "u8", "s32", ""),
    ("m16n8k32", "s32", "s8", "s8", "s32", ".satfinite"),
    ("m8n8k32", "s32", "s4", "s4", "s32", ""), ("m16n8k32", "s32", "u4", "s4", "s32", ""),
    ("m16n8k64", "s32", "s4", "u4", "s32", ".satfinite"),
    ("m8n8k128", "s32", "b1", "b1", "s32", ".xor.popc"), ("m16n8k128", "s32", "b1", "b1", "s32", ".and.popc"),
    ("m16n8k256", "s32", "b1", "b1", "s32", ".xor.popc"), ("m16n8k256", "s32", "b1", "b1", "s32", ".and.popc"),
    ("m16n8k32", "f32", "e4m3", "e4m3", "f32", ""), ("m16n8k32", "f32", "e5m2", "e4m3", "f32", ""),
    ("m16n8k32", "f16", "e4m3", "e5m2", "f16", ""), ("m16n8k16", "f32", "e5m2", "e5m2", "f32", ""),
    ("m16n8k16", "f16", "e4m3", "e4m3", "f16", ""),
]
SM90 = {("m16n8k4", "f64"), ("m16n8k8", "f64"), ("m16n8k16", "f64")}
EPS = {"f32": np.finfo(np.float32).eps, "f16": np.finfo(np.float16).eps, "f64": np.finfo(np.float64).eps}


def accumulator_input(rng, ctype, shape, k, saturate):
    if ctype == "s32":
        if saturate:           # near the int32 limits, so that the sums leave its range
            return rng.choice([-2**31 + 5, 2**31 - 5], shape).astype(np.int64)
        return rng.integers(-2**20, 2**20, shape).astype(np.int64)
    v = rng.standard_normal(shape)
    return v.astype(np.float16).astype(np.float64) if ctype == "f16" else \
        v.astype(np.float32).astype(np.float64) if ctype == "f32" else v


def accumulator_registers(c, ctype, pos, count):
    regs = np.zeros((N, count))
    for lane in range(N):
        w, g, t = lane // 32, (lane % 32) // 4, lane % 4
        for i in range(count):
            regs[lane, i] = c[(w, *pos(g, t, i))]
    if ctype == "f16":
        h = regs.astype(np.float16).view(np.uint16).astype(np.uint32)
        return h[:, 0::2] | (h[:, 1::2] << 16)
    return regs.astype({"f32": np.float32, "f64": np.float64, "s32": np.int32}[ctype])


def reference(a, b, c, ctype, mods):
    if ".xor" in mods:
        return c + a @ (1 - b) + (1 - a) @ b
    d = a @ b + c
    if ".satfinite" in mods:
        d = np.clip(d, -2**31, 2**31 - 1)
    return d


@pytest.mark.parametrize("case", CASES, ids=lambda c: "".join(f".{x}" for x in c[:5]) + c[5])
def test_mma_shape(driver, rng, case):
    shape, dtype, atype, btype, ctype, mods = case
    family = FAMILY.get(atype, atype)
    target = "sm_90" if (shape, family) in SM90 else "sm_89" if family == "f8" else "sm_80"
    if target == "sm_90" and driver.runs_sass and cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("f64 m16n8 shapes need an sm_90 GPU")
    if target == "sm_89" and driver.runs_sass and cuda.GPU(0).compute_capability < (8, 9):
        pytest.skip("the 8-bit floats need an sm_89 GPU")
    pa, pb, pc = LAYOUTS[(shape, family)]
    m, n, k = dims(shape)
    a, abits = random_matrix(rng, atype, (WARPS, m, k))
    b, bbits = random_matrix(rng, btype, (WARPS, k, n))
    ca, cb, cc = m * k // 32, k * n // 32, m * n // 32          # elements per lane
    ra, rb = pack(abits, atype, pa, ca), pack(bbits, btype, pb, cb)
    c = accumulator_input(rng, ctype, (WARPS, m, n), k, ".satfinite" in mods)
    rc = accumulator_registers(c, ctype, pc, cc)
    instr = f"mma.sync.aligned.{shape}.row.col{mods if '.sat' in mods or '.rn' in mods else ''}" \
            f".{dtype}.{atype}.{btype}.{ctype}{mods if '.popc' in mods else ''}"
    ptx = mma_ptx(instr, ra.shape[1], rb.shape[1], rc.shape[1], atype == "f64", ctype, target,
                  "8.7" if family == "f8" else "8.0")     # f8's f16 C and m16n8k16: PTX 8.7
    out = upload(poisoned(rc.shape, rc.dtype))
    cuda.Module.from_ptx(ptx).get_function("k").launch(1, N, (upload(ra), upload(rb), upload(rc), out))
    got_regs = download(out, rc.shape, rc.dtype)
    if ctype == "f16":
        got_regs = np.stack([got_regs & 0xFFFF, got_regs >> 16], axis=2).reshape(N, -1)
        got_regs = got_regs.astype(np.uint16).view(np.float16)
    got = unpack(got_regs.astype(np.float64), pc, (m, n), cc, rc.dtype)
    want = reference(a, b, c, ctype, mods)
    if ctype == "s32":
        np.testing.assert_array_equal(got, want)
        return
    bound = (k + 1) * EPS[ctype] * (np.abs(a) @ np.abs(b) + np.abs(c))
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), np.abs(got - want).max()


def test_f64_m16n8_needs_sm_90(driver):
    """The f64 m16n8 shapes are sm_90's: PTX for sm_80 that uses one does not load, on
    either driver (ptxas: "requires .target sm_90 or higher")."""
    ptx = mma_ptx("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", 4, 2, 4, True, "f64", "sm_80")
    with pytest.raises(cuda.CudaError) as e:
        cuda.Module.from_ptx(ptx)
    assert e.value.name == "CUDA_ERROR_INVALID_PTX"


@pytest.mark.parametrize("instr, counts, f64, ctype, match", [
    ("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32", (4, 2, 4), False, "f32", "layout"),
    ("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64", (4, 2, 4), True, "f64", "requires sm_90"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16", (4, 2, 2), False, "f16", "dtype and .ctype"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", (4, 2, 4), False, "f32", "tf32"),
    ("mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32", (2, 1, 4), False, "s32", "popc"),
    ("mma.sync.aligned.m8n8k4.row.col.rz.f64.f64.f64.f64", (1, 1, 2), True, "f64", "rz"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", (4, 2, 4), False, "f32", "sm_89"),
])
def test_mma_refused_by_name(instr, counts, f64, ctype, match):
    """What the emulator does not run is refused at load, naming it: .rz/.rm/.rp on f64,
    and forms ptxas does not take (a .col A for m16n8k16; C and D of different types but
    m8n8k4's .f32.f16.f16.f16; the 8-bit floats for sm_80)."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    with pytest.raises(PtxError, match=match):
        load_ptx(mma_ptx(instr, *counts, f64, ctype, "sm_80"))


@pytest.mark.parametrize("instr, counts, ctype, version, match", [
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", (4, 2, 4), "f32", "8.3", "8.4"),
    ("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16", (4, 2, 2), "f16", "8.6", "8.7"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.e5m2.e4m3.f32", (2, 1, 4), "f32", "8.6", "8.7"),
    ("mma.sync.aligned.m16n8k32.row.col.satfinite.f32.e4m3.e4m3.f32", (4, 2, 4), "f32", "8.7", "satfinite"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.s8.f32", (4, 2, 4), "f32", "8.7", "e4m3.s8"),
    ("mma.sync.aligned.m16n8k8.row.col.f32.e4m3.e4m3.f32", (1, 1, 4), "f32", "8.7", "e4m3"),
])
def test_mma_f8_refused_as_ptxas_refuses(instr, counts, ctype, version, match):
    """The 8-bit float forms ptxas -arch=sm_90 refuses (checked by hand with ptxas 13.0):
    older PTX versions, .satfinite, a mix with integers, shapes other than m16n8k16/k32."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    ptx = mma_ptx(instr, *counts, False, ctype, "sm_90", version)
    with pytest.raises(PtxError, match=match):
        load_ptx(ptx)
    assert ptxas_refusal(ptx) != "", "ptxas assembles it"

"""The scalar video instructions (vadd vsub vabsdiff vmin vmax vshl vshr vset) with their
byte/half-word selectors, .sat, secondary operations and destination merges, and the SIMD
compares vset2/vset4 (default selectors), against a reference written in Python integers
from the PTX ISA's pseudo-code. Random operands, random c, poisoned output; every kernel
assembled by ptxas for sm_90 first."""
import numpy as np
import pytest
from helpers.b32_kernel import KERNEL, SM90, run_b32
from helpers.emu_engine import Buf, launch
from helpers.ptxas import assemble_sm90

from lowlevel.emu.engine.decode import load_ptx

N = 256
PARTS = {None: (0, 32), "b0": (0, 8), "b1": (8, 8), "b2": (16, 8), "b3": (24, 8),
         "h0": (0, 16), "h1": (16, 16)}


def select(x, sel, signed):
    shift, width = PARTS[sel]
    v = (x >> shift) & ((1 << width) - 1)
    return v - (1 << width) if signed and v >> (width - 1) else v


def reference(op, dt, at, bt, sat, op2, mode, asel, bsel, dsel, a, b, c):
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        ta, tb = select(x, asel, at == "s32"), select(y, bsel, bt == "s32")
        if op in ("vshl", "vshr"):
            tb = min(tb, 32) if mode == "clamp" else tb % 32
        t = {"vadd": lambda: ta + tb, "vsub": lambda: ta - tb, "vabsdiff": lambda: abs(ta - tb),
             "vmin": lambda: min(ta, tb), "vmax": lambda: max(ta, tb),
             "vshl": lambda: ta << tb, "vshr": lambda: ta >> tb,
             "eq": lambda: int(ta == tb), "ne": lambda: int(ta != tb), "lt": lambda: int(ta < tb),
             "le": lambda: int(ta <= tb), "gt": lambda: int(ta > tb), "ge": lambda: int(ta >= tb)}[op]()
        signed = dt == "s32"
        if sat:
            width = PARTS[dsel][1]
            lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            t = min(max(t, lo), hi)
        if dsel:
            shift, width = PARTS[dsel]
            mask = ((1 << width) - 1) << shift
            out.append(((t << shift) & mask) | (z & ~mask & 0xFFFFFFFF))
            continue
        if op2:
            cv = select(z, None, signed)
            t = {"add": t + cv, "min": min(t, cv), "max": max(t, cv)}[op2]
        out.append(t & 0xFFFFFFFF)
    return np.array(out, np.uint32)


def cases():
    rng = np.random.default_rng(7)             # a fixed draw of forms; operands are random per run
    out = []
    for op in ("vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vset"):
        for variant in ("plain", "op2", "merge"):
            dt, at, bt = (str(rng.choice(["u32", "s32"])) for _ in range(3))
            if op in ("vshl", "vshr"):
                bt = "u32"
            asel, bsel = (None if rng.random() < 0.3 else str(rng.choice(list(PARTS)[1:])) for _ in range(2))
            sat = op != "vset" and bool(rng.random() < 0.6)
            op2 = str(rng.choice(["add", "min", "max"])) if variant == "op2" else None
            dsel = str(rng.choice(list(PARTS)[1:])) if variant == "merge" else None
            mode = str(rng.choice(["clamp", "wrap"])) if op in ("vshl", "vshr") else None
            cmp = str(rng.choice(["eq", "ne", "lt", "le", "gt", "ge"])) if op == "vset" else None
            out.append((op, dt, at, bt, sat, op2, mode, cmp, asel, bsel, dsel))
    return out


def instruction(op, dt, at, bt, sat, op2, mode, cmp, asel, bsel, dsel):
    types = f".{at}.{bt}.{cmp}" if op == "vset" else f".{dt}.{at}.{bt}"
    mods = types + (".sat" if sat else "") + (f".{mode}" if mode else "") + (f".{op2}" if op2 else "")
    d = "%r5" + (f".{dsel}" if dsel else "")
    a, b = "%r2" + (f".{asel}" if asel else ""), "%r3" + (f".{bsel}" if bsel else "")
    c = ", %r4" if op2 or dsel else ""
    return f"{op}{mods} {d}, {a}, {b}{c};"


@pytest.mark.parametrize("form", cases(), ids=lambda f: instruction(*f).split(" ")[0] + str(f[8:]))
def test_scalar_video_against_the_isa(mem, rng, form):
    op, dt, at, bt, sat, op2, mode, cmp, asel, bsel, dsel = form
    a = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    if op in ("vshl", "vshr"):
        b[: N // 2] = rng.integers(0, 40, N // 2)      # shift counts around 32 in every part
        b[: N // 2] *= np.uint32(0x01010101)
    if op == "vset":
        b[: N // 4] = a[: N // 4]                      # equal operands for the eq/le/ge cases
    c = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    got = run_b32(mem, KERNEL.replace("INSTRUCTION", instruction(*form)), a, b, c)
    vop = cmp if op == "vset" else op
    ref = reference(vop, "u32" if op == "vset" else dt, at, bt, sat, op2, mode, asel, bsel, dsel, a, b, c)
    np.testing.assert_array_equal(got, ref, err_msg=instruction(*form))


def test_scalar_video_on_immediates(mem):
    # every operand uniform: the results are single values, as the other helpers give
    text = SM90 + """
.visible .entry u(.param .u64 d_p)
{
  .reg .b32 %r<6>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [d_p];
  mov.u32 %r4, 0x11223344;
  vshl.u32.u32.u32.sat.clamp %r5, 3, 33;
  vadd.s32.s32.s32.sat %r1.h1, -5, 7, %r4;
  vset.u32.u32.lt.add %r2, 1, 2, 10;
  st.global.v4.u32 [%rd1], {%r5, %r1, %r2, %r4};
  ret;
}
"""
    assemble_sm90(text)
    out = Buf(mem, n=4 * 32, dtype=np.uint32)
    try:
        launch(load_ptx(text), "u", 1, 32, out, mem=mem)
        got = out.read()
    finally:
        out.free()
    # 3 << 32 saturates; 2 merged into the high half of c; (1 < 2) + 10
    np.testing.assert_array_equal(got[:4], [0xFFFFFFFF, 0x00023344, 11, 0x11223344])


def lanes_of(x, lanes, signed):
    width = 32 // lanes
    vals = [(x >> (width * i)) & ((1 << width) - 1) for i in range(lanes)]
    return [v - (1 << width) if signed and v >> (width - 1) else v for v in vals]


@pytest.mark.parametrize("lanes, at, bt, cmp, add", [
    (2, "u32", "u32", "lt", False), (2, "s32", "u32", "ge", True), (2, "s32", "s32", "eq", False),
    (4, "u32", "s32", "ne", True), (4, "s32", "s32", "le", False), (4, "u32", "u32", "gt", True)])
def test_vset2_vset4_against_the_isa(mem, rng, lanes, at, bt, cmp, add):
    a = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    b[: N // 4] = a[: N // 4] ^ np.uint32(0xFF00FF00)     # some lanes equal
    c = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    ins = f"vset{lanes}.{at}.{bt}.{cmp}{'.add' if add else ''} %r5, %r2, %r3, %r4;"
    got = run_b32(mem, KERNEL.replace("INSTRUCTION", ins), a, b, c)
    compare = {"eq": int.__eq__, "ne": int.__ne__, "lt": int.__lt__, "le": int.__le__,
               "gt": int.__gt__, "ge": int.__ge__}[cmp]
    ref = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        t = [int(compare(p, q)) for p, q in zip(lanes_of(x, lanes, at == "s32"), lanes_of(y, lanes, bt == "s32"))]
        ref.append((z + sum(t)) & 0xFFFFFFFF if add else sum(v << (32 // lanes * i) for i, v in enumerate(t)))
    np.testing.assert_array_equal(got, np.array(ref, np.uint32), err_msg=ins)

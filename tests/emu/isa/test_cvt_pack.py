"""cvt.pack.sat (sm_72+) against a numpy reference written from the PTX ISA's pseudo-code:
random s32 operands (many outside every narrow range), random c, poisoned output,
each kernel assembled by ptxas for sm_90 first."""
import numpy as np
import pytest
from helpers.b32_kernel import KERNEL, run_b32


def reference(t, a, b, c):
    width, signed = int(t[1:]), t[0] == "s"
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        sx = min(max(x, lo), hi) & ((1 << width) - 1)
        sy = min(max(y, lo), hi) & ((1 << width) - 1)
        word = sx << width | sy
        if width < 16:
            word |= z << 2 * width
        out.append(word & 0xFFFFFFFF)
    return np.array(out, np.uint32)


def operands(rng, n):
    """s32 values: small ones (inside the narrow ranges), edges, and any."""
    small = rng.integers(-300, 300, n // 2)
    edges = np.array([0, 1, -1, 2, -2, 3, 7, 8, -8, -9, 15, 16, 127, 128, -128, -129, 255, 256,
                      32767, 32768, -32768, -32769, 65535, 65536, 2**31 - 1, -2**31])
    rest = rng.integers(-2**31, 2**31, n - n // 2 - edges.size)
    return rng.permutation(np.concatenate([small, edges, rest])).astype(np.int32)


@pytest.mark.parametrize("t", ["u16", "s16", "u8", "s8", "u4", "s4", "u2", "s2"])
def test_cvt_pack_sat_against_the_isa(mem, rng, t):
    n = 256
    a, b = operands(rng, n), operands(rng, n)
    c = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    ins = (f"cvt.pack.sat.{t}.s32 %r5, %r2, %r3;" if t in ("u16", "s16")
           else f"cvt.pack.sat.{t}.s32.b32 %r5, %r2, %r3, %r4;")
    np.testing.assert_array_equal(run_b32(mem, KERNEL.replace("INSTRUCTION", ins), a, b, c), reference(t, a, b, c))


def test_four_bytes_packed_in_two_steps_keep_their_order(mem, rng):
    # what CUTLASS and TensorRT do: pack (v3, v2), then (v1, v0) with it as c: bytes v0..v3
    v = rng.integers(-1000, 1000, (4, 64)).astype(np.int32)
    text = KERNEL.replace("INSTRUCTION", "cvt.pack.sat.s8.s32.b32 %r5, %r2, %r3, 0;\n"
                          "  cvt.pack.sat.s8.s32.b32 %r5, %r4, %r1, %r5;").replace(
        "mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd5, %r1, 4;",
        "mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd5, %r1, 4;\n  add.u64 %rd9, %rd4, %rd5;\n"
        "  ld.global.u32 %r1, [%rd9];")
    got = run_b32(mem, text, v[3], v[2], v[1], d=v[0].copy())     # v0 comes in through the output
    np.testing.assert_array_equal(got.view(np.int8).reshape(64, 4), np.clip(v.T, -128, 127).astype(np.int8))

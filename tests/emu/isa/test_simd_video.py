"""The CUDA SIMD intrinsics (__vadd4, __vabsdiffu4, __vsadu4, __vmaxs2, __vcmpgts4 ...) as
NVRTC compiles them for sm_80 (video instructions vabsdiff4/vabsdiff2.add among plain
integer code) and sm_90 (add/min/max.{s,u}16x2), plus bmsk as the PTX ISA defines it.

References: numpy over the byte / half-word lanes, from the CUDA Math API's definition
of each intrinsic (and the ISA's pseudo-code for bmsk); inputs random, outputs poisoned.
"""
import numpy as np
import pytest

from helpers.cuda_c import load_compiled, nvrtc_ptx
from helpers.memory import download, poisoned, upload
from lowlevel import cuda


def lanes(x, n, signed):
    w = 32 // n
    v = np.stack([(x.astype(np.int64) >> (w * i)) & ((1 << w) - 1) for i in range(n)])
    return np.where(v >= 1 << (w - 1), v - (1 << w), v) if signed else v


def pack(v, n):
    w = 32 // n
    return sum(((v[i] & ((1 << w) - 1)) << (w * i)) for i in range(n)).astype(np.uint32)


def sat(v, n, signed):
    w = 32 // n
    return np.clip(v, -(1 << (w - 1)), (1 << (w - 1)) - 1) if signed else np.clip(v, 0, (1 << w) - 1)


def lanewise(n, signed, f):
    return lambda a, b: pack(f(lanes(a, n, signed), lanes(b, n, signed)), n)


def absdiff_sum(n, signed):
    return lambda a, b: np.abs(lanes(a, n, signed) - lanes(b, n, signed)).sum(0).astype(np.uint32)


def compare(n, signed, f, true):
    return lambda a, b: pack(np.where(f(lanes(a, n, signed), lanes(b, n, signed)), true, 0), n)


REFERENCES = {
    "__vadd4": lanewise(4, False, np.add), "__vadd2": lanewise(2, False, np.add),
    "__vsub4": lanewise(4, False, np.subtract), "__vsub2": lanewise(2, False, np.subtract),
    "__vabsdiffu4": lanewise(4, False, lambda x, y: np.abs(x - y)),
    "__vabsdiffs4": lanewise(4, True, lambda x, y: np.abs(x - y)),
    "__vabsdiffu2": lanewise(2, False, lambda x, y: np.abs(x - y)),
    "__vabsdiffs2": lanewise(2, True, lambda x, y: np.abs(x - y)),
    "__vsadu4": absdiff_sum(4, False), "__vsadu2": absdiff_sum(2, False),
    "__vsads4": absdiff_sum(4, True), "__vsads2": absdiff_sum(2, True),
    "__vmaxu4": lanewise(4, False, np.maximum), "__vmaxs4": lanewise(4, True, np.maximum),
    "__vminu4": lanewise(4, False, np.minimum), "__vmins4": lanewise(4, True, np.minimum),
    "__vmaxs2": lanewise(2, True, np.maximum), "__vmins2": lanewise(2, True, np.minimum),
    "__vmaxu2": lanewise(2, False, np.maximum), "__vminu2": lanewise(2, False, np.minimum),
    "__vavgu4": lanewise(4, False, lambda x, y: (x + y + 1) >> 1),
    "__vavgu2": lanewise(2, False, lambda x, y: (x + y + 1) >> 1),
    "__vhaddu4": lanewise(4, False, lambda x, y: (x + y) >> 1),
    "__vhaddu2": lanewise(2, False, lambda x, y: (x + y) >> 1),
    "__vaddss4": lanewise(4, True, lambda x, y: sat(x + y, 4, True)),
    "__vaddss2": lanewise(2, True, lambda x, y: sat(x + y, 2, True)),
    "__vaddus4": lanewise(4, False, lambda x, y: sat(x + y, 4, False)),
    "__vaddus2": lanewise(2, False, lambda x, y: sat(x + y, 2, False)),
    "__vsubss4": lanewise(4, True, lambda x, y: sat(x - y, 4, True)),
    "__vsubus4": lanewise(4, False, lambda x, y: sat(x - y, 4, False)),
    "__vcmpeq4": compare(4, False, np.equal, 0xFF), "__vcmpgeu4": compare(4, False, np.greater_equal, 0xFF),
    "__vcmpgts4": compare(4, True, np.greater, 0xFF), "__vcmpeq2": compare(2, False, np.equal, 0xFFFF),
    "__vcmpltu2": compare(2, False, np.less, 0xFFFF), "__vseteq4": compare(4, False, np.equal, 1),
    "__vsetgeu4": compare(4, False, np.greater_equal, 1), "__vsetgts2": compare(2, True, np.greater, 1),
}

SOURCE = "\n".join(
    f'extern "C" __global__ void k{name}(const unsigned* a, const unsigned* b, unsigned* o)'
    f" {{ int t = threadIdx.x; o[t] = {name}(a[t], b[t]); }}" for name in REFERENCES)


def simd_inputs(rng, n):
    """Random words, with lanes that repeat across a and b (equal lanes, 0 and 0xFF...)."""
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b[::4] = a[::4] ^ np.uint32(0xFF00)
    a[1::8], b[2::8] = 0xFFFFFFFF, 0x80008080
    return a, b


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_simd_intrinsics(driver, rng, arch):
    ptx = nvrtc_ptx(SOURCE, arch=arch)
    assert "vabsdiff4" in ptx and ("add.s16x2" in ptx) == (arch == "compute_90")
    if arch == "compute_90" and driver.runs_sass and cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("sm_90 PTX needs an sm_90 GPU")
    mod = load_compiled(ptx)
    n = 256
    a, b = simd_inputs(rng, n)
    da, db, out = upload(a), upload(b), cuda.mem_alloc(4 * n)
    for name, ref in REFERENCES.items():
        cuda.memcpy_htod(out, poisoned(n, np.uint32))
        mod.get_function(f"k{name}").launch(1, n, (da, db, out))
        np.testing.assert_array_equal(download(out, n, np.uint32), ref(a, b), err_msg=name)
    for buf in (da, db, out):
        buf.free()


SCALAR_SOURCE = "\n".join(
    f'extern "C" __global__ void s{name}(const unsigned* a, unsigned b, unsigned* o)'
    f" {{ int t = threadIdx.x; o[t] = {name}(a[t], b); }}" for name in REFERENCES)


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_simd_intrinsics_with_a_uniform_operand(driver, rng, arch):
    """b a kernel argument, the same in every thread: the video forms and sm_90's packed
    half-word ones broadcast it against the per-thread a (they once failed: 'operands
    could not be broadcast together with shapes (4,256) (4,)')."""
    ptx = nvrtc_ptx(SCALAR_SOURCE, arch=arch)
    if arch == "compute_90" and driver.runs_sass and cuda.GPU(0).compute_capability < (9, 0):
        pytest.skip("sm_90 PTX needs an sm_90 GPU")
    mod = load_compiled(ptx)
    n = 256
    a, _ = simd_inputs(rng, n)
    da, out = upload(a), cuda.mem_alloc(4 * n)
    for name, ref in REFERENCES.items():
        b = int(rng.integers(0, 2**32))
        cuda.memcpy_htod(out, poisoned(n, np.uint32))
        mod.get_function(f"s{name}").launch(1, n, (da, b, out))
        np.testing.assert_array_equal(download(out, n, np.uint32), ref(a, np.full(n, b, np.uint32)),
                                      err_msg=f"{name} b={b:#x}")
    for buf in (da, out):
        buf.free()

BMSK = """.version 7.6
.target sm_80
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pw)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [pc];
  ld.param.u64 %rd4, [pw];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd1, %rd5;
  add.s64 %rd7, %rd2, %rd5;
  ld.global.u32 %r2, [%rd6];
  ld.global.u32 %r3, [%rd7];
  bmsk.clamp.b32 %r4, %r2, %r3;
  bmsk.wrap.b32 %r5, %r2, %r3;
  add.s64 %rd8, %rd3, %rd5;
  add.s64 %rd9, %rd4, %rd5;
  st.global.u32 [%rd8], %r4;
  st.global.u32 [%rd9], %r5;
  ret;
}
"""


def bmsk_reference(a, b, wrap):
    """Bits [start, start + width) of a 32-bit word, by Python ints: .wrap takes a and b
    mod 32 (width 0: no bits); .clamp: a start past 31 gives 0, a width past 31 or an end
    past bit 31 stops at bit 31."""
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        start, width = (x % 32, y % 32) if wrap else (x, y)
        if start >= 32:
            out.append(0)
            continue
        end = 32 if (not wrap and width >= 32) else min(start + width, 32)
        out.append(((1 << end) - 1) ^ ((1 << start) - 1))
    return np.array(out, np.uint32)


def test_bmsk(driver, rng):
    n = 128
    a = rng.integers(0, 40, n).astype(np.uint32)
    b = rng.integers(0, 40, n).astype(np.uint32)
    a[:4], b[:4] = [0, 31, 32, 2**31], [32, 1, 0, 5]
    bufs = [upload(a), upload(b), upload(poisoned(n, np.uint32)), upload(poisoned(n, np.uint32))]
    cuda.Module.from_ptx(BMSK).get_function("k").launch(1, n, tuple(bufs))
    np.testing.assert_array_equal(download(bufs[2], n, np.uint32), bmsk_reference(a, b, False))
    np.testing.assert_array_equal(download(bufs[3], n, np.uint32), bmsk_reference(a, b, True))
    for buf in bufs:
        buf.free()


# --- every video form, handwritten: .dtype.atype.btype, .sat, .add --------------------------
VIDEO_FORMS = ["vadd4.s32.s32.s32.sat", "vsub4.u32.u32.u32.sat", "vavrg4.s32.s32.u32",
               "vabsdiff4.u32.s32.s32", "vmin4.s32.u32.s32", "vmax4.u32.u32.u32.add",
               "vadd2.u32.u32.u32.sat", "vsub2.s32.s32.s32.sat", "vavrg2.u32.u32.u32",
               "vabsdiff2.s32.s32.s32.add", "vmin2.u32.s32.u32", "vmax2.s32.s32.s32"]


def video_ptx(form):
    return f"""{BMSK.split('.visible')[0]}.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{{
  .reg .b32 %r<6>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [pc];
  ld.param.u64 %rd4, [pd];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd1, %rd5;
  add.s64 %rd7, %rd2, %rd5;
  add.s64 %rd8, %rd3, %rd5;
  ld.global.u32 %r2, [%rd6];
  ld.global.u32 %r3, [%rd7];
  ld.global.u32 %r4, [%rd8];
  {form} %r5, %r2, %r3, %r4;
  add.s64 %rd9, %rd4, %rd5;
  st.global.u32 [%rd9], %r5;
  ret;
}}
"""


def video_reference(form, a, b, c):
    """The PTX ISA's vop2/vop4 pseudo-code, in Python ints lane by lane."""
    parts = form.split(".")
    op, n = parts[0][:-1], int(parts[0][-1])
    sd, sa, sb = (p == "s32" for p in parts[1:4])
    w = 32 // n

    def lane(x, i, signed):
        v = (x >> (w * i)) & ((1 << w) - 1)
        return v - (1 << w) if signed and v >> (w - 1) else v

    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        ts = []
        for i in range(n):
            p, q = lane(x, i, sa), lane(y, i, sb)
            t = {"vadd": p + q, "vsub": p - q, "vabsdiff": abs(p - q), "vmin": min(p, q),
                 "vmax": max(p, q), "vavrg": (p + q + 1) >> 1 if p + q >= 0 else (p + q) >> 1}[op]
            if "sat" in parts:
                lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if sd else (0, (1 << w) - 1)
                t = max(lo, min(hi, t))
            ts.append(t)
        if "add" in parts:
            out.append((z + sum(ts)) % 2**32)
        else:
            out.append(sum((t % (1 << w)) << (w * i) for i, t in enumerate(ts)))
    return np.array(out, np.uint32)


@pytest.mark.parametrize("form", VIDEO_FORMS)
def test_video_instruction_forms(driver, rng, form):
    n = 96
    a, b = simd_inputs(rng, n)
    c = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bufs = [upload(a), upload(b), upload(c), upload(poisoned(n, np.uint32))]
    cuda.Module.from_ptx(video_ptx(form)).get_function("k").launch(1, n, tuple(bufs))
    np.testing.assert_array_equal(download(bufs[3], n, np.uint32), video_reference(form, a, b, c))
    for buf in bufs:
        buf.free()


def test_video_lane_selectors_are_refused_by_name():
    """Operand lane selectors (`a.b0123`) and destination masks are not implemented: the
    load names the instruction and its line rather than running something else."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    ptx = video_ptx("vadd4.u32.u32.u32").replace("%r5, %r2, %r3, %r4", "%r5, %r2.b0123, %r3, %r4")
    with pytest.raises(PtxError, match="vadd4"):
        load_ptx(ptx)

"""Conformance: the CUDA math API's SIMD intrinsics (__vadd2 ... __vsubus4, every one that
crt/device_functions.h declares) over 8,000 threads, each against a bit-exact integer numpy
reference written from the CUDA documentation's semantics: per half-word (…2) or byte (…4)
lanes; `ss`/`us` saturate to the signed/unsigned lane range, the others wrap; __vcmp* give
an all-ones lane mask, __vset* 1 per true lane; __vsad* the sum of the lanes' |a - b|;
__vavgs the signed average rounded half up for a non-negative sum, down for a negative
one (the PTX vavrg's rounding), __vavgu (a + b + 1) >> 1, __vhaddu (a + b) >> 1.

Each binary intrinsic is launched three ways: a and b per-thread arrays; a an array and b a
kernel argument; a a kernel argument and b an array (the unary ones: an array, then a
kernel argument). The outputs are poisoned (0xFF bytes) before each launch.
"""
import numpy as np
import pytest
from conformance_support import download, poisoned_device, upload

N = 8000
UNARY = ("vabs", "vabsss", "vneg", "vnegss")
BINARY = ("vabsdiffs", "vabsdiffu", "vadd", "vaddss", "vaddus", "vavgs", "vavgu", "vhaddu",
          "vmaxs", "vmaxu", "vmins", "vminu", "vsads", "vsadu", "vsub", "vsubss", "vsubus",
          *(f"v{kind}{cmp}" for kind in ("cmp", "set")
            for cmp in ("eq", "ne", "ges", "geu", "gts", "gtu", "les", "leu", "lts", "ltu")))
NAMES = sorted(f"{base}{lanes}" for base in (*UNARY, *BINARY) for lanes in (2, 4))


def _source() -> str:
    head = 'extern "C" __global__ void'
    index = "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n)"
    lines = []
    for name in NAMES:
        if name[:-1] in UNARY:
            lines.append(f"{head} v_{name}(const unsigned* a, unsigned* d, int n) "
                         f"{{ {index} d[i] = __{name}(a[i]); }}")
            lines.append(f"{head} s_{name}(unsigned a, unsigned* d, int n) "
                         f"{{ {index} d[i] = __{name}(a); }}")
            continue
        lines.append(f"{head} vv_{name}(const unsigned* a, const unsigned* b, unsigned* d, int n) "
                     f"{{ {index} d[i] = __{name}(a[i], b[i]); }}")
        lines.append(f"{head} vs_{name}(const unsigned* a, unsigned b, unsigned* d, int n) "
                     f"{{ {index} d[i] = __{name}(a[i], b); }}")
        lines.append(f"{head} sv_{name}(unsigned a, const unsigned* b, unsigned* d, int n) "
                     f"{{ {index} d[i] = __{name}(a, b[i]); }}")
    return "\n".join(lines) + "\n"


SOURCE = _source()


# ---- the reference ----------------------------------------------------------------------------
def _lanes(x, lanes: int, signed: bool) -> list:
    """The lanes of uint32 array x, low lane first, as int64 (sign-extended if `signed`)."""
    x = np.asarray(x, np.uint32).astype(np.int64)
    width = 32 // lanes
    out = []
    for k in range(lanes):
        v = (x >> (width * k)) & ((1 << width) - 1)
        out.append(np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v)
    return out


def _merge(parts, lanes: int) -> np.ndarray:
    width = 32 // lanes
    d = np.zeros(np.shape(parts[0]), np.int64)
    for k, v in enumerate(parts):
        d |= (np.asarray(v, np.int64) & ((1 << width) - 1)) << (width * k)
    return d.astype(np.uint32)


def _clip(v, lanes: int, signed: bool):
    width = 32 // lanes
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    return np.clip(v, lo, hi)


COMPARES = {"eq": np.equal, "ne": np.not_equal, "ge": np.greater_equal, "gt": np.greater,
            "le": np.less_equal, "lt": np.less}


def reference(name: str, a, b=None) -> np.ndarray:
    base, lanes = name[:-1], int(name[-1])
    width = 32 // lanes
    if base in UNARY:
        va = _lanes(a, lanes, True)
        r = [np.abs(v) if base.startswith("vabs") else -v for v in va]
        return _merge([_clip(v, lanes, True) for v in r] if base.endswith("ss") else r, lanes)
    if base.startswith(("vcmp", "vset")):
        cmp, tail = base[4:6], base[6:]
        signed = tail == "s"
        hits = [COMPARES[cmp](x, y) for x, y in zip(_lanes(a, lanes, signed), _lanes(b, lanes, signed))]
        one = (1 << width) - 1 if base.startswith("vcmp") else 1
        return _merge([h.astype(np.int64) * one for h in hits], lanes)
    signed = base.endswith(("s", "ss")) and not base.endswith("us")
    if base in ("vadd", "vsub"):
        signed = False
    va, vb = _lanes(a, lanes, signed), _lanes(b, lanes, signed)
    op = base.rstrip("su") if base not in ("vabsdiffs", "vabsdiffu", "vsads", "vsadu") else base[:-1]
    if op == "vsad":
        return sum(np.abs(x - y) for x, y in zip(va, vb)).astype(np.uint32)
    r = {"vadd": lambda x, y: x + y, "vsub": lambda x, y: x - y,
         "vabsdiff": lambda x, y: np.abs(x - y), "vmax": np.maximum, "vmin": np.minimum,
         "vhadd": lambda x, y: (x + y) >> 1,
         "vavg": (lambda x, y: np.where(x + y >= 0, (x + y + 1) >> 1, (x + y) >> 1))}[op]
    parts = [r(x, y) for x, y in zip(va, vb)]
    if base.endswith(("ss", "us")):
        parts = [_clip(v, lanes, base.endswith("ss")) for v in parts]
    return _merge(parts, lanes)


def _interesting(rng, n: int) -> np.ndarray:
    """Random words, a third of them built from lane edge values (0, 1, 0x7f.., 0x80.., all
    ones) so saturation and sign boundaries are hit."""
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x81], np.uint32)
    picked = rng.choice(edges, (n, 4))
    built = picked[:, 0] | picked[:, 1] << 8 | picked[:, 2] << 16 | picked[:, 3] << 24
    pick = rng.random(n) < 1 / 3
    x[pick] = built[pick].astype(np.uint32)
    same = rng.random(n) < 0.1                     # some lanes equal the other operand's
    return x, same


def _run(fn, args, n=N) -> np.ndarray:
    out = poisoned_device(n, np.uint32)
    fn.launch((n + 255) // 256, 256, (*args, out, n))
    return download(out, n, np.uint32)


@pytest.mark.parametrize("lanes", (2, 4))
def test_simd_intrinsics_bit_exact(driver, build, rng, lanes):
    mod = build.load(SOURCE, "simd_intrinsics")
    failures = []
    for name in (nm for nm in NAMES if nm.endswith(str(lanes))):
        a, _ = _interesting(rng, N)
        b, same = _interesting(rng, N)
        b[same] = a[same]
        sa, sb = (int(_interesting(rng, 1)[0][0]) for _ in range(2))
        runs = ({"v": ((upload(a),), (a,)), "s": ((sa,), (np.full(N, sa, np.uint32),))}
                if name[:-1] in UNARY else
                {"vv": ((upload(a), upload(b)), (a, b)),
                 "vs": ((upload(a), sb), (a, np.full(N, sb, np.uint32))),
                 "sv": ((sa, upload(b)), (np.full(N, sa, np.uint32), b))})
        for form, (args, host) in runs.items():
            got = _run(mod.get_function(f"{form}_{name}"), args)
            want = reference(name, *host)
            bad = np.flatnonzero(got != want)
            if bad.size:
                k = bad[0]
                failures.append(f"__{name} [{form}]: {bad.size} of {N} wrong, first at {k}: "
                                f"a={host[0][k]:#010x} b={host[-1][k]:#010x} got {got[k]:#010x} "
                                f"want {want[k]:#010x}")
    assert not failures, "\n".join(failures)


def test_reference_spot_checks():
    """The reference itself on hand-worked lanes (so a test against it means something)."""
    u = np.uint32
    assert reference("vaddss2", u(0x7FFF8000), u(0x00010001 * 0xFFFF))[()] == 0x7FFE8000
    assert reference("vaddus4", u(0xFF01FF00), u(0x01010203))[()] == 0xFF02FF03
    assert reference("vsubus2", u(0x00050010), u(0x00100005))[()] == 0x0000000B
    assert reference("vabsss2", u(0x80000001))[()] == 0x7FFF0001
    assert reference("vabs2", u(0x80000001))[()] == 0x80000001
    assert reference("vnegss4", u(0x80017F00))[()] == 0x7FFF8100
    assert reference("vcmpgeu4", u(0x01020304), u(0x02020202))[()] == 0x00FFFFFF
    assert reference("vsetlts2", u(0xFFFF0001), u(0x00000002))[()] == 0x00010001
    assert reference("vsads4", u(0x7F80FF00), u(0x807F0001))[()] == 255 + 255 + 1 + 1
    assert reference("vsadu4", u(0x7F80FF00), u(0x807F0001))[()] == 1 + 1 + 255 + 1
    assert reference("vavgu2", u(0x00010003), u(0x00020004))[()] == 0x00020004
    assert reference("vavgs2", u(0xFFFF0001), u(0xFFFE0002))[()] == 0xFFFE0002
    assert reference("vhaddu4", u(0xFF010203), u(0xFF010102))[()] == 0xFF010102

"""Edge cases of the emulated GPU's PTX front end and engine: warp instructions with
per-lane member masks, huge register declarations, broken fatbins, deeply nested
immediates, non-UTF-8 PTX, and loads wider than their kernel parameter. Rounding modes
and all-immediate operands: test_engine_edge_cases_numerics.py.

References are independent: numpy over the lanes of each member mask, what ptxas accepts
or refuses for the front end. Inputs are random where they can be (the seed is printed on
failure), outputs poisoned.
"""
import ctypes
import struct

import numpy as np
import pytest

from helpers.memory import poisoned
from helpers.cuda_c import load_compiled, nvcc_ptx
from helpers.emu_engine import Buf, launch
from lowlevel import cuda
from lowlevel.emu.engine.decode import load_ptx

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HEADER90 = ".version 8.0\n.target sm_90\n.address_size 64\n"
WARP = 32


# --- 1. warp instructions honour each lane's member mask --------------------------------------

GROUP_OPS = [  # (instruction, output register); %v value, %m member mask, %pp predicate
    ("redux.sync.add.u32 %o0, %v, %m;", "add"), ("redux.sync.min.u32 %o1, %v, %m;", "umin"),
    ("redux.sync.max.s32 %o2, %v, %m;", "smax"), ("redux.sync.and.b32 %o3, %v, %m;", "and"),
    ("redux.sync.or.b32 %o4, %v, %m;", "or"), ("redux.sync.xor.b32 %o5, %v, %m;", "xor"),
    ("match.any.sync.b32 %o6, %v, %m;", "match.any"),
    ("match.all.sync.b32 %o7|%q1, %v, %m;\n  selp.u32 %o8, 1, 0, %q1;", "match.all"),
    ("vote.sync.ballot.b32 %o9, %pp, %m;", "ballot"),
    ("vote.sync.all.pred %q1, %pp, %m;\n  selp.u32 %o10, 1, 0, %q1;", "all"),
    ("vote.sync.any.pred %q1, %pp, %m;\n  selp.u32 %o11, 1, 0, %q1;", "any"),
    ("vote.sync.uni.pred %q1, %pp, %m;\n  selp.u32 %o12, 1, 0, %q1;", "uni"),
    ("shfl.sync.idx.b32 %o13, %v, %src, 31, %m;", "shfl"),
    ("bar.warp.sync %m;\n  activemask.b32 %o14;", "activemask"),
]
N_OUT = 15
GROUP_KERNEL = HEADER90 + f"""
.visible .entry w(.param .u64 pv, .param .u64 pm, .param .u64 pf, .param .u64 pout)
{{
  .reg .pred %q<3>, %pp;
  .reg .b32 %t<6>, %v, %m, %f, %src, %o<{N_OUT}>;
  .reg .b64 %rd<4>;
  mov.u32 %t0, %tid.x;
  mov.u32 %t1, %ctaid.x;
  mov.u32 %t2, %ntid.x;
  mad.lo.u32 %t3, %t1, %t2, %t0;
  mul.wide.u32 %rd1, %t3, 4;
  ld.param.u64 %rd2, [pv];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %v, [%rd2];
  ld.param.u64 %rd2, [pm];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %m, [%rd2];
  ld.param.u64 %rd2, [pf];
  add.s64 %rd2, %rd2, %rd1;
  ld.global.u32 %f, [%rd2];
  and.b32 %t4, %f, 1;
  setp.ne.u32 %q2, %t4, 0;
  @%q2 ret;                              // these lanes exit (they may still be named)
  and.b32 %t4, %f, 2;
  setp.ne.u32 %pp, %t4, 0;
  shr.u32 %src, %f, 8;
  {chr(10).join("  " + ins for ins, _ in GROUP_OPS)}
  mul.wide.u32 %rd1, %t3, {4 * N_OUT};
  ld.param.u64 %rd3, [pout];
  add.s64 %rd3, %rd3, %rd1;
  {chr(10).join(f"  st.global.u32 [%rd3+{4 * i}], %o{i};" for i in range(N_OUT))}
  ret;
}}
"""


def group_reference(vals, masks, flags, block, lane_t):
    """What each output of GROUP_KERNEL is for thread lane_t (global index), by the PTX
    ISA: over the non-exited lanes of its own member mask."""
    tid = lane_t % block
    base = lane_t - tid % WARP                                   # lane 0 of the warp
    warp = [base + j for j in range(WARP) if tid - tid % WARP + j < block]
    live = [t for t in warp if not flags[t] & 1]
    members = [t for t in live if masks[lane_t] >> (t - base) & 1]
    v = [int(vals[t]) for t in members]
    s32 = [x - (1 << 32) if x >> 31 else x for x in v]
    same = [t for t in members if vals[t] == vals[lane_t]]
    pred = [t for t in members if flags[t] & 2]
    src = base + (int(flags[lane_t]) >> 8 & 31)
    def bits(ts):
        return sum(1 << (t - base) for t in ts)

    out = [sum(v) & 0xFFFFFFFF, min(v), max(s32) & 0xFFFFFFFF, np.bitwise_and.reduce(v),
           np.bitwise_or.reduce(v), np.bitwise_xor.reduce(v), bits(same),
           bits(members) if len(same) == len(members) else 0, int(len(same) == len(members)),
           bits(pred), int(len(pred) == len(members)), int(bool(pred)),
           int(len(pred) in (0, len(members))),
           # a source lane outside the mask (or exited) is undefined: the emulator gives
           # the reading lane's own value
           int(vals[src]) if src in members else int(vals[lane_t]), bits(live)]
    return [int(x) for x in out]


@pytest.mark.parametrize("block", [64, 80])
def test_warp_instructions_with_a_member_mask_per_group_of_lanes(mem, rng, block):
    """Lanes of a warp split into groups, each running the warp instructions with its own
    member mask (CUB's logical warps do this): each lane gets the result over its group."""
    grid = 2
    n = grid * block
    vals = rng.integers(0, 8, n).astype(np.uint32) * np.uint32(0x2492_4925)   # some repeat
    flags = (rng.random(n) < 0.2).astype(np.uint32) | ((rng.random(n) < 0.5) * 2).astype(np.uint32)
    flags |= (rng.integers(0, WARP, n).astype(np.uint32) << 8)
    masks = np.zeros(n, np.uint32)
    for cta in range(grid):
        for w0 in range(0, block, WARP):
            group = rng.integers(0, rng.integers(1, 5), WARP)         # padding lanes too
            for j in range(min(WARP, block - w0)):
                masks[cta * block + w0 + j] = sum(1 << k for k in range(WARP) if group[k] == group[j])
    out = Buf(mem, n=(n, N_OUT), dtype=np.uint32)
    bufs = [Buf(mem, vals), Buf(mem, masks), Buf(mem, flags)]
    try:
        launch(load_ptx(GROUP_KERNEL), "w", grid, block, *bufs, out, mem=mem)
        got = out.read()
    finally:
        for b in bufs + [out]:
            b.free()
    for t in range(n):
        if flags[t] & 1:
            assert (got[t] == 0xDEADBEEF).all()                      # exited: nothing stored
            continue
        want = group_reference(vals, masks, flags, block, t)
        for i, (_, name) in enumerate(GROUP_OPS):
            assert got[t, i] == want[i], (name, t, hex(int(masks[t])), hex(int(got[t, i])), hex(want[i]))
        assert got[t, 7:9].tolist() == want[7:9], ("match.all", t)


CUB_WARP_REDUCE = """
#include <cub/warp/warp_reduce.cuh>
template <int W, class T, class Op>
__device__ void reduce_into(const T* x, T* out, Op op) {
    using WR = cub::WarpReduce<T, W>;
    __shared__ typename WR::TempStorage tmp[32 / W];
    int t = threadIdx.x;
    out[t] = WR(tmp[(t % 32) / W]).Reduce(x[t], op);
}
extern "C" __global__ void max16(const int* x, int* out) { reduce_into<16>(x, out, cuda::maximum<>{}); }
extern "C" __global__ void min8(const unsigned* x, unsigned* out) { reduce_into<8>(x, out, cuda::minimum<>{}); }
extern "C" __global__ void sum4(const int* x, int* out) { reduce_into<4>(x, out, cuda::std::plus<>{}); }
extern "C" __global__ void xor16(const unsigned* x, unsigned* out) { reduce_into<16>(x, out, cuda::std::bit_xor<>{}); }
"""


def test_cub_logical_warp_reduce(driver, rng):
    """CUB's WarpReduce<T, 16/8/4> on sm_80 is redux.sync (or shfl) with the member mask
    of its logical warp, 0xFFFF << (lane & 16) and so on: each logical warp reduces alone."""
    ptx = nvcc_ptx(CUB_WARP_REDUCE, arch="sm_80")
    assert "redux.sync.max.s32" in ptx
    mod = load_compiled(ptx)
    n = 64
    cases = {"max16": (np.int32, 16, np.max, False), "min8": (np.uint32, 8, np.min, False),
             "sum4": (np.int32, 4, lambda a, axis: a.sum(axis, dtype=np.int32), False),
             "xor16": (np.uint32, 16, np.bitwise_xor.reduce, True)}
    for name, (dt, width, ref, lane0_only) in cases.items():
        x = rng.integers(-2 ** 31 if dt is np.int32 else 0, 2 ** 31, n).astype(dt)
        dx, dout = cuda.mem_alloc(x.nbytes), cuda.mem_alloc(x.nbytes)
        cuda.memcpy_htod(dx, x)
        cuda.memcpy_htod(dout, poisoned(n, dt))
        mod.get_function(name).launch(1, n, (dx, dout))
        got = np.empty_like(x)
        cuda.memcpy_dtoh(got, dout)
        want = np.repeat(ref(x.reshape(-1, width), axis=1), width)
        keep = np.arange(n) % width == 0 if lane0_only else np.ones(n, bool)   # CUB: lane 0 only
        np.testing.assert_array_equal(got[keep], want[keep], err_msg=name)
        dx.free()
        dout.free()


# --- 4. huge register declarations --------------------------------------------------------------

def huge_registers_ptx(count):
    return HEADER90 + f""".visible .entry k(.param .u64 out, .param .u64 x)
{{
  .reg .b64 %rd<{count}>;
  .reg .b32 %r<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd{count - 1}, [x];
  {{                                     // a nested scope shadowing %r1
    .reg .b32 %r1;
    mov.u32 %r1, 7;
  }}
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd1, %rd1, %rd2;
  add.s64 %rd{count // 2}, %rd{count - 1}, %rd2;
  st.global.u64 [%rd1], %rd{count // 2};
  ret;
}}
"""


def test_a_huge_register_range_costs_nothing_until_used(driver, rng):
    """ptxas accepts `.reg .b64 %rd<100000000>;` (any count below 2^32): it must load at
    once, in little memory (it got the process killed), and run."""
    import time
    import tracemalloc
    x = int(rng.integers(0, 1 << 40))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        mod = cuda.Module.from_ptx(huge_registers_ptx(100_000_000))
        f = mod.get_function("k")
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if driver.kind == "emu":
        assert elapsed < 5 and peak < 64 << 20, (elapsed, peak)
    out = cuda.mem_alloc(8 * 64)
    cuda.memcpy_htod(out, poisoned(64, np.uint64))
    f.launch(1, 64, (out, x))
    got = np.empty(64, np.uint64)
    cuda.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, x + 8 * np.arange(64, dtype=np.uint64))
    out.free()


def test_a_register_count_of_2_to_the_32_is_refused_as_ptxas_does(driver):
    """ptxas: 'Constant overflow' for %rd<4294967296>; the driver's JIT refuses it."""
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(huge_registers_ptx(1 << 32))
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"


def test_without_an_assembler_the_emulators_own_checks_refuse_a_register_count_of_2_to_the_32(
        monkeypatch):
    from lowlevel.emu.driver import assembler
    monkeypatch.setenv(assembler.ENV, "0")
    cuda.use_driver("emu")
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(huge_registers_ptx(1 << 32))
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "line 6" in str(info.value) and "%rd<4294967296>" in str(info.value)


# --- 5. broken fatbins ----------------------------------------------------------------------------

FATBIN_MAGIC = 0xBA55ED50
SMALL_PTX = HEADER90 + ".visible .entry k()\n{\n  ret;\n}\n"


def fatbin(*entries) -> bytes:
    """A fatbin as nvcc lays it out: header, then (kind, arch, payload, flags, raw size)
    entries with 72-byte headers."""
    body = b""
    for kind, arch, payload, flags, raw in entries:
        head = bytearray(72)
        struct.pack_into("<HHIQ", head, 0, kind, 0x101, 72, len(payload))
        struct.pack_into("<I", head, 28, arch)
        struct.pack_into("<Q", head, 40, flags)
        struct.pack_into("<Q", head, 64, raw)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


def good_fatbin() -> bytes:
    ptx = SMALL_PTX.encode() + b"\0"
    return fatbin((2, 90, b"\x7fELF" + bytes(60), 0, 0), (1, 80, ptx, 0, 0))


def load_refused(data: bytes) -> str:
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_fatbin(data)
    return info.value.name


def test_a_fatbin_magic_followed_by_garbage_is_an_invalid_image(driver, rng):
    for n in (0, 4, 12, 60, 500):
        garbage = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert load_refused(struct.pack("<I", FATBIN_MAGIC) + garbage) == "CUDA_ERROR_INVALID_IMAGE"
    cuda.Module.from_fatbin(good_fatbin()).get_function("k")          # the reference loads


def test_fatbin_reader_fuzz(driver, rng):
    """Truncated fatbins, entry sizes and header sizes (the offset of each payload) that do
    not add up, and flipped bytes: an error naming the image (or the PTX, or the GPU),
    never CUDA_ERROR_UNKNOWN; the reader never reads past what the header claims."""
    import lowlevel.capi.images as images
    emu_codes = {"CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_NO_BINARY_FOR_GPU"}
    good = good_fatbin()
    cases = []
    second = 16 + 72 + 64                             # the PTX entry's header
    for cut in sorted(set(rng.integers(16, len(good), 12).tolist()) | {16, 17, 16 + 71, second, len(good) - 1}):
        short = bytearray(good[:cut])                 # the header tells the truth: entries cut
        struct.pack_into("<Q", short, 8, cut - 16)
        # cut between entries: a valid fatbin without PTX (no image for the emulated GPU)
        whole = {"CUDA_ERROR_NO_BINARY_FOR_GPU"} if cut in (16, second) else {"CUDA_ERROR_INVALID_IMAGE"}
        cases.append((f"truncated at {cut}", bytes(short), whole))
    for at, fmt, value in [(16 + 8, "<Q", 1 << 40), (16 + 8, "<Q", 65), (second + 8, "<Q", 10 ** 6),
                           (16 + 4, "<I", 0), (16 + 4, "<I", 8), (second + 4, "<I", 1 << 20),
                           (second + 4, "<I", 70), (8, "<Q", 1 << 60), (4, "<H", 2), (6, "<H", 64)]:
        bad = bytearray(good)
        struct.pack_into(fmt, bad, at, value)
        cases.append((f"{fmt} {value} at {at}", bytes(bad), {"CUDA_ERROR_INVALID_IMAGE"}))
    for _ in range(40):                               # flipped bytes after the fatbin header
        bad = bytearray(good)
        for i in rng.integers(16, len(good), int(rng.integers(1, 4))):
            bad[i] ^= int(rng.integers(1, 256))
        cases.append(("flipped", bytes(bad), emu_codes))
    for what, data, codes in cases:
        if len(data) >= 16 and struct.unpack_from("<Q", data, 8)[0] + 16 > len(data):
            with pytest.raises(images.ImageError) as info:          # only as bytes: a
                images.ptx_from_fatbin(data, 90)                  # driver reads past them
            assert info.value.code_name == "CUDA_ERROR_INVALID_IMAGE", what
            continue
        try:
            cuda.Module.from_fatbin(data)
        except cuda.CudaError as e:
            assert e.name in codes, (what, e.name, str(e))


def test_a_zstd_entry_that_does_not_decompress_is_an_invalid_image(driver):
    zstandard = pytest.importorskip("zstandard")
    ptx = SMALL_PTX.encode() + b"\0"
    packed = zstandard.ZstdCompressor().compress(ptx)
    ok = fatbin((1, 80, packed, 0x8000, len(ptx)))
    cuda.Module.from_fatbin(ok).get_function("k")
    broken = fatbin((1, 80, packed[:len(packed) // 2] + bytes(8), 0x8000, len(ptx)))
    assert load_refused(broken) == "CUDA_ERROR_INVALID_IMAGE"


# --- 6. the PTX front end: nested parentheses, bytes that are not UTF-8, wide ld.param ---------

STORE_R1 = HEADER90 + """.visible .entry k(.param .u64 out)
{{
  .reg .u32 %r1;
  .reg .u64 %rd1;
  ld.param.u64 %rd1, [out];   // {comment}
  {code}
  st.global.u32 [%rd1], %r1;
  ret;
}}
"""


def run_store_r1(ptx) -> int:
    f = cuda.Module.from_ptx(ptx).get_function("k")
    out = cuda.mem_alloc(4)
    cuda.memcpy_htod(out, poisoned(1, np.uint32))
    f.launch(1, 1, (out,))
    got = np.empty(1, np.uint32)
    cuda.memcpy_dtoh(got, out)
    out.free()
    return int(got[0])


def test_an_immediate_in_thousands_of_parentheses_is_invalid_ptx_naming_the_line(driver):
    """ptxas folds `((((1))))` however deep; the emulator takes no constant expressions
    (it recursed until RecursionError, CUDA_ERROR_UNKNOWN): refused by line."""
    depth = 5000
    ptx = STORE_R1.format(comment="", code=f"mov.u32 %r1, {'(' * depth}1{')' * depth};")
    if driver.kind != "emu":
        assert run_store_r1(ptx) == 1
        return
    with pytest.raises(cuda.CudaError) as info:
        cuda.Module.from_ptx(ptx)
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"
    assert "line 9" in info.value.log and "nested" in info.value.log


def test_bytes_that_are_not_utf8_load_inside_comments_only(driver, rng):
    """ptxas takes any bytes in a comment and refuses non-ASCII anywhere else (a string
    literal too): 'Unexpected non-ASCII character'."""
    v = int(rng.integers(0, 1 << 31))
    code = f"mov.u32 %r1, {v};"
    ptx = STORE_R1.format(comment="COMMENT", code=code).encode()
    comment = ptx.replace(b"COMMENT", b"caf\xe9 \xc3\x28 \xff")
    block = comment.replace(b"//", b"/* \x80\x80 */ //")
    assert run_store_r1(comment) == v and run_store_r1(block) == v
    for bad, line in ((comment.replace(b"%r1, ", b"%r1, \xe9"), 9),
                      (comment.replace(b".address_size 64", b'.address_size 64\n.file 1 "caf\xe9.cu"'), 4),
                      (comment.replace(b"ret;", "ret; é".encode()), 11)):
        with pytest.raises(cuda.CudaError) as info:
            cuda.Module.from_ptx(bad)
        assert info.value.name == "CUDA_ERROR_INVALID_PTX"
        if driver.kind == "emu":
            assert f"line {line}" in info.value.log and "non-ASCII" in info.value.log


WIDE_PARAM_PTX = HEADER90 + """.visible .entry k(.param .u64 out, .param .u16 a, .param .u32 b, .param .u16 c)
{
  .reg .b16 %h1;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [a];              // a, two bytes of padding, b
  st.global.u64 [%rd1], %rd2;
  ld.param.v2.u32 {%r1, %r2}, [a];
  st.global.v2.u32 [%rd1+8], {%r1, %r2};
  ld.param.u16 %h1, [b+2];             // the high half of b
  cvt.u32.u16 %r3, %h1;
  st.global.u32 [%rd1+16], %r3;
  ld.param.u64 %rd3, [c];              // c, then past the end of the parameters
  st.global.u64 [%rd1+24], %rd3;
  ret;
}
"""


def test_ld_param_wider_than_its_parameter_reads_the_bytes_that_follow(driver, rng):
    """ptxas takes ld.param.u64 from a .u16 parameter ('potential out of bound access',
    an info): the load reads the parameter buffer as it is, padding and the next
    parameter included."""
    f = cuda.Module.from_ptx(WIDE_PARAM_PTX).get_function("k")
    out = cuda.mem_alloc(32)
    cuda.memcpy_htod(out, poisoned(4, np.uint64))
    raw = bytearray(rng.integers(0, 256, 18, dtype=np.uint8).tobytes())   # padding random too
    struct.pack_into("<Q", raw, 0, out.ptr)
    buf = ctypes.create_string_buffer(bytes(raw), len(raw))
    size = ctypes.c_size_t(len(raw))
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)
    driver.cuLaunchKernel(f.handle, 1, 1, 1, 1, 1, 1, 0, 0, None, extra)
    got = np.empty(4, np.uint64)
    cuda.memcpy_dtoh(got, out)
    out.free()
    word = int.from_bytes(raw[8:16], "little")
    assert int(got[0]) == word and int(got[1]) == word
    assert int(got[2]) & 0xFFFFFFFF == int.from_bytes(raw[14:16], "little")
    assert int(got[3]) & 0xFFFF == int.from_bytes(raw[16:18], "little")
    if driver.kind == "emu":                 # past the buffer: undefined, 0xFF here
        assert int(got[3]) >> 16 == (1 << 48) - 1

"""ld/st.shared [reg + offset]: the engine's fast path (a bitwise OR over the address
register proves every lane aligned, it or the largest value proves them inside the window:
engine/spaces.py) gives the same words as the exact path, and every access it cannot prove
good still faults, naming the lane.

The kernel scatters each thread's word into its CTA's tile at a host-chosen address,
waits at a barrier, and gathers `vec` words from another host-chosen address; the
reference is numpy on the same addresses.
"""
import numpy as np
import pytest

from helpers.emu_engine import HEADER, Buf, launch
from lowlevel.emu.engine.decode import load_ptx
from lowlevel.emu.engine.faults import KernelFault
from lowlevel.emu.engine.spaces import SpacesMixin

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BLOCK, GRID = 128, 3


def kernel(tile_bytes, width, st_off, ld_off, vec):
    """tile[st_reg + st_off] = src[i]; bar.sync; out[i] = tile[ld_reg + ld_off] (vec words),
    st_reg and ld_reg `width`-bit registers loaded from the host's arrays."""
    widen = "" if width == 32 else "cvt.u64.u32 %rd8, %r6;\n    cvt.u64.u32 %rd9, %r7;"
    st_reg, ld_reg = ("%r6", "%r7") if width == 32 else ("%rd8", "%rd9")
    dst = "%r8" if vec == 1 else "{" + ", ".join(f"%r{8 + i}" for i in range(vec)) + "}"
    vmod = "" if vec == 1 else f".v{vec}"
    stores = "\n    ".join(f"st.global.u32 [%rd7+{4 * i}], %r{8 + i};" for i in range(vec))
    return load_ptx(HEADER + f"""
.visible .entry k(.param .u64 src, .param .u64 st_addr, .param .u64 ld_addr, .param .u64 out)
{{
    .shared .align 16 .b8 tile[{tile_bytes}];
    .reg .b32 %r<16>;
    .reg .b64 %rd<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.u32 %r4, %r2, %r3, %r1;          // i = global thread index
    mul.wide.u32 %rd1, %r4, 4;
    ld.param.u64 %rd2, [src];
    add.u64 %rd3, %rd2, %rd1;
    ld.global.u32 %r5, [%rd3];              // my word
    ld.param.u64 %rd4, [st_addr];
    add.u64 %rd4, %rd4, %rd1;
    ld.global.u32 %r6, [%rd4];              // where it goes, less st_off
    ld.param.u64 %rd5, [ld_addr];
    add.u64 %rd5, %rd5, %rd1;
    ld.global.u32 %r7, [%rd5];              // where I read, less ld_off
    {widen}
    st.shared.u32 [{st_reg}+{st_off}], %r5;
    bar.sync 0;
    ld.shared{vmod}.u32 {dst}, [{ld_reg}+{ld_off}];
    mul.wide.u32 %rd6, %r4, {4 * vec};
    ld.param.u64 %rd7, [out];
    add.u64 %rd7, %rd7, %rd6;
    {stores}
    ret;
}}""")


def addresses(rng, tile_bytes, st_off, ld_off, vec):
    """Effective byte addresses per thread: for the stores, distinct words of the tile at
    or above st_off (each CTA its own); for the loads, random vec-aligned ones at or above
    ld_off."""
    words = tile_bytes // 4
    first = -(-st_off // 4)
    st = np.stack([rng.permutation(words - first)[:BLOCK] + first for _ in range(GRID)]) * 4
    lo = -(-ld_off // (4 * vec))
    ld = rng.integers(lo, words // vec, (GRID, BLOCK)) * 4 * vec
    return st, ld


def run(mem, mod, src, st_reg, ld_reg, vec):
    out = Buf(mem, n=GRID * BLOCK * vec, dtype=np.uint32)
    bufs = [Buf(mem, src), Buf(mem, st_reg.astype(np.uint32).ravel()),
            Buf(mem, ld_reg.astype(np.uint32).ravel())]
    launch(mod, "k", GRID, BLOCK, *bufs, out, mem=mem)
    return out.read().reshape(GRID, BLOCK, vec)


def reference(src, st, ld, tile_bytes, vec):
    tiles = np.full((GRID, tile_bytes // 4), 0xFFFFFFFF, np.uint32)     # fresh shared memory: 0xFF bytes
    for b in range(GRID):
        tiles[b, st[b] // 4] = src.reshape(GRID, BLOCK)[b]
    idx = ld[..., None] // 4 + np.arange(vec)
    return np.take_along_axis(tiles[:, None, :], idx, axis=2)


# (vec, st_off, ld_off): offsets that are multiples of the access size (the fast path), and
# ones that are not (the registers misaligned, the sums aligned: the exact path decides)
CASES = [(1, 0, 0), (1, 12, 600), (2, 8, 16), (4, 48, 32), (2, 4, 4), (4, 0, 8)]


@pytest.mark.parametrize("tile_bytes", [1024, 768])
@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("vec,st_off,ld_off", CASES)
def test_same_words_as_the_exact_path(mem, rng, monkeypatch, tile_bytes, width, vec, st_off, ld_off):
    mod = kernel(tile_bytes, width, st_off, ld_off, vec)
    st, ld = addresses(rng, tile_bytes, st_off, ld_off, vec)
    src = rng.integers(0, 2 ** 32, GRID * BLOCK, dtype=np.uint64).astype(np.uint32)
    want = reference(src, st, ld, tile_bytes, vec)
    exact = []
    for name in ("load_space", "store_space"):
        real = getattr(SpacesMixin, name)
        monkeypatch.setattr(SpacesMixin, name, lambda self, space, *a, real=real:
                            exact.append(space) or real(self, space, *a))
    np.testing.assert_array_equal(run(mem, mod, src, st - st_off, ld - ld_off, vec), want)
    fast = ld_off % (4 * vec) == 0 and st_off % 4 == 0
    assert ("shared" in exact) != fast, exact
    monkeypatch.setattr(SpacesMixin, "shared_words", lambda *a: None)     # the exact path only
    np.testing.assert_array_equal(run(mem, mod, src, st - st_off, ld - ld_off, vec), want)


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("vec", [1, 4])
@pytest.mark.parametrize("extra,code", [
    (None, "CUDA_ERROR_ILLEGAL_ADDRESS"),          # the first address past the window
    (1 << 20, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (2, "CUDA_ERROR_MISALIGNED_ADDRESS")])
def test_a_bad_load_lane_faults_by_name(mem, rng, width, vec, extra, code):
    """One lane's load address made bad, the others good: the launch faults naming it."""
    off = 16
    st, ld = addresses(rng, 1024, 0, off, vec)
    reg = ld - off
    b, t = int(rng.integers(GRID)), int(rng.integers(BLOCK))
    reg[b, t] = 1024 - off if extra is None else reg[b, t] + extra
    with pytest.raises(KernelFault) as e:
        run(mem, kernel(1024, width, 0, off, vec), np.arange(GRID * BLOCK, dtype=np.uint32), st, reg, vec)
    assert e.value.code_name == code
    assert f"block ({b},0,0) thread ({t},0,0)" in e.value.message
    assert "shared load" in e.value.message


def test_a_64_bit_register_past_4_gib_faults(mem, rng):
    """A 64-bit address register whose high word is set (the low word a good offset)."""
    mod = load_ptx(HEADER + """
.visible .entry k(.param .u64 ld_addr, .param .u64 out)
{
    .shared .align 16 .b8 tile[1024];
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd1, %r1, 8;
    ld.param.u64 %rd2, [ld_addr];
    add.u64 %rd2, %rd2, %rd1;
    ld.global.u64 %rd3, [%rd2];
    ld.shared.u32 %r2, [%rd3+4];
    ld.param.u64 %rd4, [out];
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd4, %rd4, %rd1;
    st.global.u32 [%rd4], %r2;
    ret;
}""")
    reg = rng.integers(0, 255, BLOCK).astype(np.uint64) * 4
    t = int(rng.integers(BLOCK))
    reg[t] += np.uint64(1 << 40)
    out = Buf(mem, n=BLOCK, dtype=np.uint32)
    with pytest.raises(KernelFault) as e:
        launch(mod, "k", 1, BLOCK, Buf(mem, reg), out, mem=mem)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert f"thread ({t},0,0)" in e.value.message and "shared load" in e.value.message


def test_a_bad_store_lane_faults_by_name(mem, rng):
    mod = kernel(1024, 32, 8, 0, 1)
    st, ld = addresses(rng, 1024, 8, 0, 1)
    st[1, 5] = 1024                            # one word past the window
    with pytest.raises(KernelFault) as e:
        run(mem, mod, np.arange(GRID * BLOCK, dtype=np.uint32), st - 8, ld, 1)
    assert e.value.code_name == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert "block (1,0,0) thread (5,0,0)" in e.value.message and "shared store" in e.value.message


def test_one_register_at_several_offsets_sizes_and_values(mem, rng):
    """What the engine learns of an address register serves the block's later accesses
    through it: at other offsets, at another size, and not once the register changed."""
    mod = load_ptx(HEADER + """
.visible .entry k(.param .u64 src, .param .u64 ld_addr, .param .u64 out)
{
    .shared .align 16 .b8 tile[1024];
    .reg .b16 %h<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<10>;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd1, %r1, 4;
    ld.param.u64 %rd2, [src];
    add.u64 %rd3, %rd2, %rd1;
    ld.global.u32 %r5, [%rd3];
    ld.global.u32 %r6, [%rd3+512];
    shl.b32 %r2, %r1, 2;
    st.shared.u32 [%r2], %r5;               // words 0..127
    st.shared.u32 [%r2+512], %r6;           // words 128..255
    bar.sync 0;
    ld.param.u64 %rd5, [ld_addr];
    add.u64 %rd5, %rd5, %rd1;
    ld.global.u32 %r7, [%rd5];              // a word address below 512
    bar.sync 0;
    ld.shared.u32 %r8, [%r7];
    ld.shared.u16 %h1, [%r7+2];             // the high half of word r7
    ld.shared.u32 %r9, [%r7+256];
    add.u32 %r7, %r7, 4;                    // a new value: learnt afresh
    ld.shared.u32 %r10, [%r7+256];
    mov.u32 %r11, %r7;                      // the same value under another name
    ld.shared.u32 %r12, [%r11+8];
    cvt.u32.u16 %r13, %h1;
    mul.wide.u32 %rd6, %r1, 20;
    ld.param.u64 %rd7, [out];
    add.u64 %rd7, %rd7, %rd6;
    st.global.u32 [%rd7], %r8;
    st.global.u32 [%rd7+4], %r9;
    st.global.u32 [%rd7+8], %r13;
    st.global.u32 [%rd7+12], %r10;
    st.global.u32 [%rd7+16], %r12;
    ret;
}""")
    words = rng.integers(0, 2 ** 32, 256, dtype=np.uint64).astype(np.uint32)
    at = rng.integers(0, 120, BLOCK) * 4
    out = Buf(mem, n=(BLOCK, 5), dtype=np.uint32)
    launch(mod, "k", 1, BLOCK, Buf(mem, words), Buf(mem, at.astype(np.uint32)), out, mem=mem)
    w = at // 4
    want = np.stack([words[w], words[w + 64], words[w] >> 16, words[w + 65], words[w + 3]], axis=1)
    np.testing.assert_array_equal(out.read(), want)

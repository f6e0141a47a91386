"""TMA (cp.async.bulk.tensor) driven by a __grid_constant__ tensor map: 2-D loads whose shared
memory, copied out byte for byte by the kernel, equals the swizzle the PTX ISA describes
(recomputed here from its words, not from the emulator's swizzle.py), for each swizzle mode;
the fill at the tensor's edges (zeros, NaN); a store and a reduction back; a multicast to the
two CTAs of a cluster; tensormap.replace of the global address; a 3-D load with an element
stride; a misaligned destination; and the parser's tensor address.

Kernels are handwritten PTX for sm_90a, assembled by ptxas first; inputs are random, outputs
poisoned; references are numpy slicing.
"""
import numpy as np
import pytest
from helpers.memory import device_poisoned, download, upload
from helpers.ptxas import ptxas_refusal

from lowlevel import cuda

HEAD = """.version 8.0
.target sm_90a
.address_size 64
"""
# One CTA loads the box at (c0, c1[, c2]) into `tile` (thread 0 issues, all wait), then its 128
# threads copy the tile's raw bytes to out, a word each per step.
LOAD = HEAD + r"""
.visible .entry load(.param .align 64 .b8 tmap[128], .param .u64 out_p, .param .s32 c0, .param .s32 c1,
                     .param .s32 c2)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];                 // where the raw tile goes
    ld.param.s32 %r1, [c0];                     // box coordinates, innermost first
    ld.param.s32 %r2, [c1];
    ld.param.s32 %r10, [c2];
    mov.b64 %rd2, tmap;                         // the map's address in the parameter space...
    cvta.param.u64 %rd3, %rd2;                  // ...as a generic address
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    add.u32 %r4, %r4, SHIFT;                    // (a misaligned destination when SHIFT != 0)
    mov.u32 %r5, bar;
    setp.eq.u32 %p1, %r3, 0;                    // thread 0 sets up and issues
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.proxy.async.shared::cta;              // the barrier visible to the async proxy
    bar.sync 0;
    @%p1 prefetch.tensormap [%rd3];              // the map into the cache (changes nothing)
    @%p1 cp.async.bulk.prefetch.tensor.DIMS.L2.global.tile [%rd3, COORDS];   // the box into L2
    createpolicy.fractional.L2::evict_last.b64 %rd6, 1.0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.DIMS.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%r4], [%rd3, COORDS], [%r5], %rd6;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;   // phase 0 over: the box has landed
    @!%p2 bra WAIT;
COPY_OUT
}
"""
# The 128 threads copy WORDS words of shared memory at %r4 to global memory at %rd1.
COPY_OUT = r"""
    mov.u32 %r6, %r3;                           // word i = tid, tid + 128, ...
COPY:
    setp.ge.u32 %p3, %r6, WORDS;
    @%p3 bra DONE;
    shl.b32 %r7, %r6, 2;
    add.u32 %r8, %r4, %r7;
    ld.shared.u32 %r9, [%r8];                   // the tile's raw (swizzled) word
    mul.wide.u32 %rd4, %r6, 4;
    add.u64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r9;
    add.u32 %r6, %r6, 128;
    bra COPY;
DONE:
    ret;"""
LOAD_2D = LOAD.replace("DIMS", "2d").replace("COORDS", "{%r1, %r2}").replace("COPY_OUT", COPY_OUT)
LOAD_3D = LOAD.replace("DIMS", "3d").replace("COORDS", "{%r1, %r2, %r10}").replace("COPY_OUT", COPY_OUT)


def _kernel(text: str, name: str, **subs):
    for key, value in subs.items():
        text = text.replace(key, str(value))
    log = ptxas_refusal(text, "sm_90a")
    if log is None:
        pytest.skip("no standalone ptxas to check the PTX with: pip install nvidia-cuda-nvcc")
    assert log == "", f"ptxas -arch=sm_90a refuses the kernel:\n{log}"
    return cuda.Module.from_ptx(text).get_function(name)


def isa_swizzle(nbytes: int, span: int) -> np.ndarray:
    """Where byte o of a box lands, from the PTX ISA's words: within each 128-byte row of shared
    memory, the 16-byte chunk's index inside its span (32, 64 or 128 bytes) is XORed with the
    row's number modulo the chunks per span (the pattern repeats every 2, 4 or 8 rows)."""
    o = np.arange(nbytes)
    if span == 0:
        return o
    chunks = span // 16
    row, chunk_in_span = o // 128, (o % span) // 16
    return o - chunk_in_span * 16 + ((chunk_in_span ^ (row % chunks)) * 16)


def _load(x, box, coords, swizzle=None, fill="zero", shift=0):
    """Run LOAD_2D on x (2-D) with a map of `box` (rows, cols); the raw tile's bytes."""
    nbytes = box[0] * box[1] * x.itemsize
    tmap = cuda.TensorMap.tiled(upload(x), x.dtype, x.shape, box, swizzle=swizzle, oob_fill=fill)
    out = device_poisoned(nbytes)
    k = _kernel(LOAD_2D, "load", BYTES=nbytes, WORDS=nbytes // 4, SHIFT=shift)
    k.launch(1, 128, (tmap, out, np.int32(coords[0]), np.int32(coords[1]), np.int32(0)))
    return download(out, (nbytes,), np.uint8)


@pytest.mark.parametrize("span", [0, 32, 64, 128])
def test_2d_load_lands_in_the_isa_swizzle(driver, rng, span):
    cols = {0: 24, 32: 8, 64: 16, 128: 32}[span]        # box rows of at most the span's bytes
    x = rng.integers(0, 2**32, (40, 72), dtype=np.uint32)
    r, c = int(rng.integers(0, 40 - 16)), int(rng.integers(0, 72 - cols))
    got = _load(x, (16, cols), (c, r), swizzle=span or None)
    box = x[r:r + 16, c:c + cols].view(np.uint8).reshape(-1)
    want = np.empty_like(box)
    want[isa_swizzle(box.size, span)] = box
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fill", ["zero", "nan"])
def test_out_of_bounds_elements_are_filled(driver, rng, fill):
    x = rng.standard_normal((20, 36)).astype(np.float32)
    coords = (int(rng.integers(-7, 0)), int(rng.integers(14, 19)))     # left of and below the edge
    got = _load(x, (8, 16), coords, fill=fill).view(np.float32).reshape(8, 16)
    padded = np.full((20 + 2 * 8, 36 + 2 * 16), 0.0 if fill == "zero" else np.nan, np.float32)
    padded[8:28, 16:52] = x
    want = padded[8 + coords[1]:16 + coords[1], 16 + coords[0]:32 + coords[0]]
    np.testing.assert_array_equal(got, want)       # NaN equals NaN here


def test_misaligned_destination_faults(driver, rng):
    x = rng.integers(0, 2**32, (16, 32), dtype=np.uint32)
    with pytest.raises(cuda.CudaError) as e:
        _load(x, (8, 32), (0, 0), swizzle=128, shift=128)
        cuda.synchronize()
    assert e.value.name == "CUDA_ERROR_MISALIGNED_ADDRESS" and "1024-byte aligned" in str(e.value.details)
    cuda.reset_device()


def test_parser_reads_the_tensor_address_and_names_unknown_forms():
    from lowlevel.emu.ptx.errors import PtxError
    from lowlevel.emu.engine.decode import load_ptx
    text = LOAD_2D.replace("BYTES", "256").replace("WORDS", "64").replace("SHIFT", "0")
    load_ptx(text)                                  # [%rd3, {%r1, %r2}] parses and decodes
    bad = text.replace(".tile.mbarrier", ".tile::gather4.mbarrier")      # sm_100's: not emulated
    with pytest.raises(PtxError, match=r"instruction 'cp\.async\.bulk\.tensor\.2d.*gather4"):
        load_ptx(bad)


def test_3d_load_with_an_element_stride(driver, rng):
    x = rng.integers(0, 2**32, (5, 24, 32), dtype=np.uint32)
    buf = upload(x)
    # box (2, 8, 8) with element stride 2 along the middle dimension: 2 x 4 x 8 elements
    tmap = cuda.TensorMap.tiled(buf, np.uint32, x.shape, (2, 8, 8), element_strides=(1, 2, 1))
    c = (int(rng.integers(0, 24)), int(rng.integers(0, 16)), int(rng.integers(0, 3)))
    nbytes = 2 * 4 * 8 * 4
    out = device_poisoned(nbytes)
    k = _kernel(LOAD_3D, "load", BYTES=nbytes, WORDS=nbytes // 4, SHIFT=0)
    k.launch(1, 128, (tmap, out, *(np.int32(v) for v in c)))
    got = download(out, (2, 4, 8), np.uint32)
    np.testing.assert_array_equal(got, x[c[2]:c[2] + 2, c[1]:c[1] + 8:2, c[0]:c[0] + 8])


# Load a box of `src` at (a0, a1), then thread 0 writes it back into `dst` at (b0, b1) with a
# TMA store (or reduction) in a bulk group, and waits for the group.
STORE = HEAD + r"""
.visible .entry store(.param .align 64 .b8 src[128], .param .align 64 .b8 dst[128], .param .s32 a0,
                      .param .s32 a1, .param .s32 b0, .param .s32 b1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 8 .b64 bar;
    ld.param.s32 %r1, [a0];
    ld.param.s32 %r2, [a1];
    ld.param.s32 %r6, [b0];
    ld.param.s32 %r7, [b1];
    mov.b64 %rd2, src;
    cvta.param.u64 %rd3, %rd2;                  // the source map's generic address
    mov.b64 %rd4, dst;
    cvta.param.u64 %rd5, %rd4;                  // the destination map's
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r5, bar;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], [%rd3, {%r1, %r2}], [%r5];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
    @%p1 OPERATION [%rd5, {%r6, %r7}], [%r4];   // shared -> global, in a bulk group
    @%p1 cp.async.bulk.commit_group;            // close the group...
    @%p1 cp.async.bulk.wait_group.read 0;       // ...and wait until its source is read
    @%p1 cp.async.bulk.wait_group 0;            // ...and written
    ret;
}
"""
OPERATIONS = {"store": "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
              "add": "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_store_and_reduce_back_clipped_at_the_edge(driver, rng, operation):
    x = rng.standard_normal((24, 40)).astype(np.float32)
    y = rng.standard_normal((20, 36)).astype(np.float32)
    bx, by = upload(x), upload(y)
    box = (8, 16)                                   # 64-byte rows: the 64B swizzle both ways
    src = cuda.TensorMap.tiled(bx, np.float32, x.shape, box, swizzle=64)
    dst = cuda.TensorMap.tiled(by, np.float32, y.shape, box, swizzle=64)
    a = (int(rng.integers(0, 40 - 16)), int(rng.integers(0, 24 - 8)))
    b = (int(rng.integers(28, 36)), int(rng.integers(-5, 0)))       # hangs over two edges
    k = _kernel(STORE, "store", BYTES=8 * 16 * 4, OPERATION=OPERATIONS[operation])
    k.launch(1, 128, (src, dst, *(np.int32(v) for v in (*a, *b))))
    got = download(by, y.shape, np.float32)
    want = y.copy()
    tile = x[a[1]:a[1] + 8, a[0]:a[0] + 16]
    r0, c0 = max(b[1], 0), b[0]
    part = tile[r0 - b[1]:, :36 - c0]
    want[r0:r0 + part.shape[0], c0:c0 + part.shape[1]] = part if operation == "store" else \
        want[r0:r0 + part.shape[0], c0:c0 + part.shape[1]] + part
    np.testing.assert_array_equal(got, want)


# Clusters of 2: rank 0 multicasts one box into both CTAs (ctaMask 0b11); each CTA counts the
# bytes on its own barrier, waits, and copies its tile out to out + rank * BYTES.
MULTICAST = HEAD + r"""
.visible .entry mcast(.param .align 64 .b8 tmap[128], .param .u64 out_p, .param .s32 c0, .param .s32 c1)
{
    .reg .pred %p<5>;
    .reg .b32 %r<14>;
    .reg .b64 %rd<8>;
    .reg .b16 %rs<2>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];
    ld.param.s32 %r1, [c0];
    ld.param.s32 %r2, [c1];
    mov.b64 %rd2, tmap;
    cvta.param.u64 %rd3, %rd2;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r5, bar;
    mov.u32 %r11, %cluster_ctarank;
    mul.wide.u32 %rd6, %r11, BYTES;
    add.u64 %rd1, %rd1, %rd6;                   // this CTA's part of out
    setp.eq.u32 %p1, %r3, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.mbarrier_init.release.cluster;        // both barriers set up before either is used
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    setp.eq.u32 %p4, %r11, 0;
    and.pred %p4, %p4, %p1;                     // rank 0's thread 0 issues for both
    mov.u16 %rs1, 3;                            // ctaMask: ranks 0 and 1
    @%p4 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%r4], [%rd3, {%r1, %r2}], [%r5], %rs1;
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
    mov.u32 %r6, %r3;
COPY:
    setp.ge.u32 %p3, %r6, WORDS;
    @%p3 bra DONE;
    shl.b32 %r7, %r6, 2;
    add.u32 %r8, %r4, %r7;
    ld.shared.u32 %r9, [%r8];
    mul.wide.u32 %rd4, %r6, 4;
    add.u64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5], %r9;
    add.u32 %r6, %r6, 128;
    bra COPY;
DONE:
    barrier.cluster.arrive.release.aligned;     // no CTA exits while a copy may still land in it
    barrier.cluster.wait.acquire.aligned;
    ret;
}
"""


def test_multicast_to_both_ctas_of_a_cluster(driver, rng):
    x = rng.integers(0, 2**32, (32, 64), dtype=np.uint32)
    buf = upload(x)
    tmap = cuda.TensorMap.tiled(buf, np.uint32, x.shape, (8, 32), swizzle=128)
    c = (int(rng.integers(0, 32)), int(rng.integers(0, 24)))
    nbytes = 8 * 32 * 4
    out = device_poisoned(2 * nbytes)
    k = _kernel(MULTICAST, "mcast", BYTES=nbytes, WORDS=nbytes // 4)
    k.launch(2, 128, (tmap, out, np.int32(c[0]), np.int32(c[1])), cluster=(2, 1, 1))
    got = download(out, (2, nbytes), np.uint8)
    box = x[c[1]:c[1] + 8, c[0]:c[0] + 32].view(np.uint8).reshape(-1)
    want = np.empty_like(box)
    want[isa_swizzle(box.size, 128)] = box
    np.testing.assert_array_equal(got, np.stack([want, want]))


# Triton's way: copy the __grid_constant__ map to shared memory, point it at other memory with
# tensormap.replace, publish it to global memory with tensormap.cp_fenceproxy, acquire it, and
# load through it.
REPLACE = HEAD.replace("8.0", "8.3") + r"""
.visible .entry replace(.param .align 64 .b8 tmap[128], .param .u64 new_p, .param .u64 gmap_p,
                        .param .u64 out_p, .param .s32 c0, .param .s32 c1)
{
    .reg .pred %p<5>;
    .reg .b32 %r<14>;
    .reg .b64 %rd<12>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 128 .b8 smap[128];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];
    ld.param.u64 %rd7, [new_p];                 // the other tensor's address
    ld.param.u64 %rd8, [gmap_p];                // 128 bytes of global memory for the edited map
    ld.param.s32 %r1, [c0];
    ld.param.s32 %r2, [c1];
    mov.b64 %rd2, tmap;
    cvta.param.u64 %rd3, %rd2;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r5, bar;
    mov.u32 %r12, smap;
    setp.lt.u32 %p4, %r3, 16;                   // threads 0..15 copy a word of the map each
    mul.wide.u32 %rd9, %r3, 8;
    add.u64 %rd10, %rd3, %rd9;
    @%p4 ld.u64 %rd11, [%rd10];
    shl.b32 %r13, %r3, 3;
    add.u32 %r13, %r12, %r13;
    @%p4 st.shared.u64 [%r13], %rd11;
    bar.sync 0;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r12], %rd7;
    bar.sync 0;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd8], [%r12], 128;
    fence.proxy.tensormap::generic.acquire.gpu [%rd8], 128;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], [%rd8, {%r1, %r2}], [%r5];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
COPY_OUT
}
""".replace("COPY_OUT", COPY_OUT)


def test_tensormap_replace_of_the_global_address(driver, rng):
    x = rng.integers(0, 2**32, (16, 32), dtype=np.uint32)
    y = rng.integers(0, 2**32, (16, 32), dtype=np.uint32)
    bx, by = upload(x), upload(y)
    tmap = cuda.TensorMap.tiled(bx, np.uint32, x.shape, (8, 8))
    gmap = device_poisoned(128)
    nbytes = 8 * 8 * 4
    out = device_poisoned(nbytes)
    c = (int(rng.integers(0, 24)), int(rng.integers(0, 8)))
    k = _kernel(REPLACE, "replace", BYTES=nbytes, WORDS=nbytes // 4)
    k.launch(1, 128, (tmap, by, gmap, out, np.int32(c[0]), np.int32(c[1])))
    got = download(out, (8, 8), np.uint32)
    np.testing.assert_array_equal(got, y[c[1]:c[1] + 8, c[0]:c[0] + 8])


@pytest.mark.parametrize("case", ["parameter name as the map", "tensormap.replace on sm_90",
                                  "a .shared::cta destination before PTX 8.6"])
def test_what_ptxas_refuses_is_refused(case):
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    if case.startswith("a .shared::cta"):
        text = LOAD_2D.replace("shared::cluster.global.tile", "shared::cta.global.tile")
        text = text.replace("BYTES", "256").replace("WORDS", "64").replace("SHIFT", "0")
        words = "requires PTX ISA .version 8.6"
    elif case == "parameter name as the map":
        text = LOAD_2D.replace("[%rd3, {%r1, %r2}], [%r5]", "[tmap, {%r1, %r2}], [%r5]")
        text = text.replace("BYTES", "256").replace("WORDS", "64").replace("SHIFT", "0")
        words = "state space mismatch"
    else:
        text = REPLACE.replace("sm_90a", "sm_90").replace("BYTES", "256").replace("WORDS", "64")
        words = "tensormap requires .target sm_90a"
    log = ptxas_refusal(text, "sm_90a" if ".target sm_90a" in text else "sm_90")
    assert log != "", "ptxas takes it"          # (None: no ptxas here to ask)
    assert log is None or any(w in log for w in ("State space mismatch", "not supported on .target 'sm_90'",
                                                  "requires PTX ISA .version 8.6")), log
    with pytest.raises(PtxError, match=words):
        load_ptx(text)


# An im2col load of an NHWC tensor: 32 pixels of 8 channels, walking the output positions of a
# 3x3 convolution with padding 1 (pixel box corners -1, -1) from (w, h, n), at filter tap (ow, oh).
IM2COL = HEAD + r"""
.visible .entry im2col(.param .align 64 .b8 tmap[128], .param .u64 out_p, .param .s32 c, .param .s32 w,
                       .param .s32 h, .param .s32 n, .param .u16 ow, .param .u16 oh)
{
    .reg .pred %p<4>;
    .reg .b32 %r<14>;
    .reg .b64 %rd<8>;
    .reg .b16 %rs<3>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];
    ld.param.s32 %r1, [c];                      // first channel
    ld.param.s32 %r2, [w];                      // the first pixel: W, H, N
    ld.param.s32 %r10, [h];
    ld.param.s32 %r11, [n];
    ld.param.u16 %rs1, [ow];                    // the filter tap, W and H
    ld.param.u16 %rs2, [oh];
    mov.b64 %rd2, tmap;
    cvta.param.u64 %rd3, %rd2;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r5, bar;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%r4], [%rd3, {%r1, %r2, %r10, %r11}], [%r5], {%rs1, %rs2};
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
COPY_OUT
}
""".replace("COPY_OUT", COPY_OUT)


def test_im2col_load_walks_the_pixel_box(driver, rng):
    x = rng.standard_normal((2, 6, 10, 16)).astype(np.float32)      # N, H, W, C
    buf = upload(x)
    tmap = cuda.TensorMap.im2col(buf, np.float32, x.shape, lower=(-1, -1), upper=(-1, -1), channels=8,
                                 pixels=32)
    c, w, h, n = 8, int(rng.integers(-1, 9)), int(rng.integers(-1, 5)), 0
    ow, oh = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    nbytes = 32 * 8 * 4
    out = device_poisoned(nbytes)
    k = _kernel(IM2COL, "im2col", BYTES=nbytes, WORDS=nbytes // 4)
    k.launch(1, 128, (tmap, out, np.int32(c), np.int32(w), np.int32(h), np.int32(n), np.uint16(ow),
                      np.uint16(oh)))
    got = download(out, (32, 8), np.float32)
    # the output positions of the convolution, 10 x 6 per image, numbered from (w, h, n)
    want = np.zeros((32, 8), np.float32)
    first = n * 60 + (h + 1) * 10 + (w + 1)
    for k_ in range(32):
        at = first + k_
        img, y, xw = at // 60, (at % 60) // 10 - 1 + oh, at % 10 - 1 + ow
        if img < 2 and 0 <= y < 6 and 0 <= xw < 10:
            want[k_] = x[img, y, xw, c:c + 8]
    np.testing.assert_array_equal(got, want)


# Triton's device-side descriptor: a map built from 128 zero bytes in shared memory by
# tensormap.replace of every field, published to global memory, then used for a load.
BUILD = HEAD.replace("8.0", "8.3") + r"""
.visible .entry build(.param .u64 x_p, .param .u32 rows, .param .u32 cols, .param .u64 gmap_p,
                      .param .u64 out_p, .param .s32 c0, .param .s32 c1)
{
    .reg .pred %p<5>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 128 .b8 smap[128];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];
    ld.param.u64 %rd7, [x_p];                   // the tensor: rows x cols float32, row-major
    ld.param.u32 %r12, [rows];
    ld.param.u32 %r13, [cols];
    ld.param.u64 %rd8, [gmap_p];
    ld.param.s32 %r1, [c0];
    ld.param.s32 %r2, [c1];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, tile;
    mov.u32 %r5, bar;
    mov.u32 %r10, smap;
    setp.lt.u32 %p4, %r3, 16;                   // 16 threads zero the map's 16 words
    shl.b32 %r11, %r3, 3;
    add.u32 %r11, %r10, %r11;
    mov.b64 %rd9, 0;
    @%p4 st.shared.u64 [%r11], %rd9;
    bar.sync 0;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r10], %rd7;
    @%p1 tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r10], 1;          // rank 2
    @%p1 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r10], 0, 32;   // 32 floats: 128 bytes
    @%p1 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r10], 1, 16;
    @%p1 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r10], 0, %r13;
    @%p1 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r10], 1, %r12;
    mul.wide.u32 %rd10, %r13, 4;
    @%p1 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r10], 0, %rd10;   // row bytes
    @%p1 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r10], 0, 1;
    @%p1 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r10], 1, 1;
    @%p1 tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r10], 7;      // .f32 in the ISA's table
    @%p1 tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%r10], 0;
    @%p1 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r10], 3;  // 128B
    @%p1 tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%r10], 1;     // NaN outside
    bar.sync 0;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd8], [%r10], 128;
    fence.proxy.tensormap::generic.acquire.gpu [%rd8], 128;
    @%p1 mbarrier.init.shared::cta.b64 [%r5], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], [%rd8, {%r1, %r2}], [%r5];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
    @!%p2 bra WAIT;
COPY_OUT
}
""".replace("COPY_OUT", COPY_OUT)


def test_a_map_built_on_the_device_field_by_field(driver, rng):
    x = rng.standard_normal((20, 48)).astype(np.float32)
    bx = upload(x)
    gmap = device_poisoned(128)
    nbytes = 16 * 32 * 4
    out = device_poisoned(nbytes)
    c = (int(rng.integers(20, 40)), int(rng.integers(-6, 10)))          # overhangs an edge or two
    k = _kernel(BUILD, "build", BYTES=nbytes, WORDS=nbytes // 4)
    k.launch(1, 128, (bx, 20, 48, gmap, out, np.int32(c[0]), np.int32(c[1])))
    raw = download(out, (nbytes,), np.uint8)
    padded = np.full((20 + 32, 48 + 64), np.nan, np.float32)
    padded[16:36, 32:80] = x
    want = padded[16 + c[1]:32 + c[1], 32 + c[0]:64 + c[0]]
    got = raw[isa_swizzle(nbytes, 128)].view(np.float32).reshape(16, 32)    # unswizzled
    np.testing.assert_array_equal(got, want)        # NaN (any NaN) where the box leaves the tensor


REDUCTIONS = {"min": (np.int32, np.minimum), "max": (np.uint32, np.maximum), "xor": (np.uint32, np.bitwise_xor),
              "inc": (np.uint32, lambda old, b: np.where(old >= b, 0, old + 1).astype(np.uint32)),
              "dec": (np.uint32, lambda old, b: np.where((old == 0) | (old > b), b, old - 1).astype(np.uint32))}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_integer_reductions(driver, rng, op):
    dtype, combine = REDUCTIONS[op]
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (16, 32), dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, (16, 32), dtype=dtype, endpoint=True)
    if op in ("inc", "dec"):                        # small values, so that both branches happen
        x, y = (rng.integers(0, 8, (16, 32)).astype(dtype) for _ in range(2))
    bx, by = upload(x), upload(y)
    src = cuda.TensorMap.tiled(bx, dtype, x.shape, (8, 16))
    dst = cuda.TensorMap.tiled(by, dtype, y.shape, (8, 16))
    operation = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"
    k = _kernel(STORE, "store", BYTES=8 * 16 * 4, OPERATION=operation)
    k.launch(1, 128, (src, dst, *(np.int32(v) for v in (16, 4, 8, 2))))
    want = y.copy()
    want[2:10, 8:24] = combine(y[2:10, 8:24], x[4:12, 16:32])
    np.testing.assert_array_equal(download(by, y.shape, dtype), want)

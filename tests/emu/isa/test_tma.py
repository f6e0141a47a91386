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
# One CTA loads the box at (c0, c1) into `tile` (thread 0 issues, all wait), then its 128
# threads copy the tile's raw bytes to out, a word each per step.
LOAD_2D = HEAD + r"""
.visible .entry load2d(.param .align 64 .b8 tmap[128], .param .u64 out_p, .param .s32 c0, .param .s32 c1)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 tile[BYTES];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out_p];                 // where the raw tile goes
    ld.param.s32 %r1, [c0];                     // box coordinates, innermost first
    ld.param.s32 %r2, [c1];
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
    @%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], BYTES;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], [%rd3, {%r1, %r2}], [%r5];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;   // phase 0 over: the box has landed
    @!%p2 bra WAIT;
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
    ret;
}
"""


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
    k = _kernel(LOAD_2D, "load2d", BYTES=nbytes, WORDS=nbytes // 4, SHIFT=shift)
    k.launch(1, 128, (tmap, out, np.int32(coords[0]), np.int32(coords[1])))
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
    bad = text.replace(".tile.mbarrier", ".im2col.mbarrier")
    with pytest.raises(PtxError, match=r"cp\.async\.bulk\.tensor\.2d.*im2col"):
        load_ptx(bad)

"""mma.sp: D = A B + C with a structured-sparse A, every shape and type of the PTX ISA up to
sm_90 ("Matrix multiply-accumulate operation using mma.sp instruction with sparse matrix A"):
its forms, its metadata and its arithmetic (matrix.py's emit_mma_sp writes the instruction).

    mma.sp{::ordered_metadata}.sync.aligned.SHAPE.row.col{.satfinite}.DTYPE.ATYPE.BTYPE.CTYPE d, a, b, c, e, f;

    A/B type     shapes                 C/D            metadata threads (selector f)
    f16          m16n8k16, m16n8k32     f16 or f32     1 (0..3), 2 (0..1)
    bf16         m16n8k16, m16n8k32     f32            1 (0..3), 2 (0..1)
    tf32         m16n8k8, m16n8k16      f32            1 (0..3), 2 (0..1)
    s8/u8        m16n8k32, m16n8k64     s32 (.satfinite) 2 (0..1), 4 (0)
    s4/u4        m16n8k64, m16n8k128    s32 (.satfinite) 2 (0..1), 4 (0)
    e4m3/e5m2    m16n8k64               f32            4 (0)

sm_80 and PTX 7.1 (the 8-bit floats: sm_89, PTX 8.4; ::ordered_metadata: PTX 8.5).

A (M x K) keeps half of each row: in every chunk of 4 "units" two, where a unit is a 16-bit
element (f16, bf16; a tf32 element is two units, so a chunk of two tf32 elements keeps
one), an 8-bit element, or a pair of 4-bit elements. The a registers hold the kept values,
the M x K/2 "compressed" A, in the layout of a dense mma of K/2 of the same type. The
metadata e gives, for each chunk, the two kept units' indices (2 bits each, the first in
the lower bits): 4 bits a chunk, 16 bits (4 chunks) a row. In each quad (lanes 4g..4g+3)
the selected thread(s) give rows g (bits 0-15) and g+8 (bits 16-31): with one thread per
quad (selector f = its threadID_in_group) all of each row; with two (threads 2f and 2f+1)
the first the first 4 chunks of the rows, the second the next 4; with four (f = 0), thread
j chunks 4j..4j+3 (the pair case is what XLA's and Triton's sparse dot lowering reads; the
ISA's text says which threads, its figures which bits). Other threads' e is not read. The
PTX ISA ("Sparse matrix storage") leaves a pair of equal indices undefined, and with
::ordered_metadata any pair that is not increasing; tf32 takes only 0b0100 and 0b1110
(element 0 or 1): a launch with another pair fails, naming the lane, the row and the
chunk, rather than compute something a GPU might not.

Arithmetic as mma_shapes.py's: the products of the kept elements (only those: a zero that
was never stored does not make 0 x inf a NaN) summed exactly in float64 / int64 with C,
rounded once to the C/D type.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from . import mma_shapes
from .warpmask import converged
from .registry import provide

# (shape, family) -> how many threads of a quad give metadata
FORMS = {("m16n8k16", "f16"): 1, ("m16n8k32", "f16"): 2, ("m16n8k16", "bf16"): 1, ("m16n8k32", "bf16"): 2,
         ("m16n8k8", "tf32"): 1, ("m16n8k16", "tf32"): 2, ("m16n8k32", "i8"): 2, ("m16n8k64", "i8"): 4,
         ("m16n8k64", "i4"): 2, ("m16n8k128", "i4"): 4, ("m16n8k64", "f8"): 4}
ACCUMULATORS = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f8": ("f32",),
                "i8": ("s32",), "i4": ("s32",)}
REG_TYPE = {"f32": "f32", "s32": "s32", "f16": "u32"}


# --- the metadata and the positions of the kept elements --------------------------------


def chunk_indices(meta, warps: int, chunks: int, threads: int, selector: int):
    """The two unit indices (warps, 16, chunks) of every chunk, and the lanes they came from."""
    words = np.broadcast_to(np.asarray(meta, np.uint32), (warps * 32,)).reshape(warps, 32)
    r, c = np.arange(16)[:, None], np.arange(chunks)[None, :]
    lane = 4 * (r % 8) + selector * threads + c // 4
    shift = (16 * (r // 8) + 4 * (c % 4)).astype(np.uint32)
    w = words[:, lane]
    return (w >> shift) & np.uint32(3), (w >> (shift + np.uint32(2))) & np.uint32(3), lane


def _check_pairs(i0, i1, lanes, family: str, ordered: bool, text: str) -> None:
    """The PTX ISA leaves other index pairs undefined: fail the launch rather than invent."""
    if family == "tf32":
        bad = (i0 % 2 != 0) | (i1 != i0 + 1)
        want = "0b0100 or 0b1110"
    elif ordered:
        bad, want = i0 >= i1, "two increasing indices (::ordered_metadata)"
    else:
        bad, want = i0 == i1, "two different indices"
    if bad.any():
        w, r, c = (int(x[0]) for x in np.nonzero(bad))
        nibble = int(i0[w, r, c] | (i1[w, r, c] << 2))
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"mma.sp: the metadata of row {r}, chunk {c} (lane {int(lanes[r, c])} of warp "
                          f"{w}) is {nibble:#06b}, not {want}; the PTX ISA leaves the result "
                          f"undefined ({text})")


def kept_columns(i0, i1, family: str, half: int):
    """The column in A of each compressed element q < K/2: (warps, 16, K/2)."""
    q = np.arange(half)
    if family == "tf32":                    # one element of two per chunk
        return 2 * q + (i0[:, :, q] // 2).astype(np.int64)
    unit = q // 2 if family == "i4" else q  # 4-bit elements go in pairs
    chunk = unit // 2
    pos = np.where(unit % 2 == 0, i0[:, :, chunk], i1[:, :, chunk]).astype(np.int64)
    col = 4 * chunk + pos
    return 2 * col + q % 2 if family == "i4" else col


def mma_sp(C, shape, kinds, a_regs, b_regs, c_regs, meta, selector, opts, text):
    """D = A B + C for every warp; the registers of d."""
    converged(C, "mma.sp", text)
    m, nn, k = mma_shapes.dims(shape)
    atype, btype, ctype = kinds
    family = mma_shapes.FAMILY[atype]
    warps = C.n // 32
    dtype = mma_shapes.exact_dtype(ctype)
    unit_bits = 16 if family in ("f16", "bf16", "tf32") else 8
    chunks = k * (32 // mma_shapes.PER_REG[atype]) // unit_bits // 4
    i0, i1, lanes = chunk_indices(meta, warps, chunks, FORMS[(shape, family)], selector)
    _check_pairs(i0, i1, lanes, family, opts["ordered"], text)
    Ac = mma_shapes.a_matrix(a_regs, atype, C.n, m, k // 2, dtype)
    B = mma_shapes.b_matrix(b_regs, btype, C.n, k, nn, dtype)
    Cm = mma_shapes.c_matrix(c_regs, ctype, C.n, m, nn, dtype)
    cols = kept_columns(i0, i1, family, k // 2)
    Bk = B[np.arange(warps)[:, None, None], cols]              # (warps, 16, K/2, n)
    with np.errstate(all="ignore"):
        D = np.einsum("wrq,wrqn->wrn", Ac, Bk) + Cm
    D = mma_shapes.round_to(D, ctype, bool(opts.get("satfinite")))
    return mma_shapes.d_registers(D, ctype, C.n, m, nn)


provide(_mma_sp=mma_sp)

"""mma.sync.aligned.m8n8k4.ALAYOUT.BLAYOUT.DTYPE.f16.f16.CTYPE: four products per warp.

The only mma shape whose fragments are not spread over the whole warp: each "quad-pair"
(lanes 0-3 with 16-19, 4-7 with 20-23, 8-11 with 24-27, 12-15 with 28-31) computes an
8x8 D = A (8x4) B (4x8) + C of its own. A and B are two .f16x2 registers (a0..a3), C and
D four .f16x2 registers (c0..c7) or eight .f32 registers, A and B in either layout. With
hi = 1 for the lanes 16-31 (the high group) and t = lane % 4, the PTX ISA ("Matrix
Fragments for mma.m8n8k4 with .f16 floating point type") places element i at:

    A .row: (t + 4hi, i)        A .col: (i + 4hi, t)
    B .row: (t, i + 4hi)        B .col: (i, t + 4hi)
    C/D .f16: (t + 4hi, i)
    C/D .f32: ((lane & 1) + (i & 2) + 4hi, (i & 4) + (lane & 2) + (i & 1))

The arithmetic is that of the other float shapes (mma_shapes.py): products exact, summed
with C in float64, rounded once to .dtype.
"""
from __future__ import annotations

import functools

import numpy as np

from . import mma_shapes

WARP = 32
GROUP = 8                               # the lanes of one quad-pair


@functools.cache
def lane_order() -> np.ndarray:
    """The warp's lanes, quad-pair by quad-pair: position 8q + p holds the lane of quad-pair
    q whose place in it is p (0-3 the low group, 4-7 the high one)."""
    q, p = np.arange(WARP) // GROUP, np.arange(WARP) % GROUP
    return (p % 4) + 4 * q + 16 * (p // 4)


def _places():
    p = np.arange(GROUP)[:, None]
    return p % 4, p // 4                  # t, hi of each place in a quad-pair


@functools.cache
def layout(which: str, order: str, ctype: str = "f16"):
    """(row, col) of element i of each of a quad-pair's eight places, as (8, count) arrays."""
    t, hi = _places()
    if which in ("a", "b"):
        i = np.arange(4)[None, :]
        rows, cols = {("a", "row"): (t + 4 * hi, i), ("a", "col"): (i + 4 * hi, t),
                      ("b", "row"): (t, i + 4 * hi), ("b", "col"): (i, t + 4 * hi)}[(which, order)]
    elif ctype == "f16":
        i = np.arange(8)[None, :]
        rows, cols = t + 4 * hi, i
    else:
        i = np.arange(8)[None, :]
        rows, cols = (t & 1) + (i & 2) + 4 * hi, (i & 4) + (t & 2) + (i & 1)
    shape = (GROUP, i.shape[1])
    return np.broadcast_to(rows, shape), np.broadcast_to(cols, shape)


@functools.cache
def _flat(which: str, order: str, ctype: str, ncols: int):
    """Row-major index of each fragment slot (place * count + i) of a quad-pair's matrix,
    and its inverse (the slot of each matrix element)."""
    rows, cols = layout(which, order, ctype)
    flat = (rows * ncols + cols).reshape(-1)
    if np.unique(flat).size != flat.size:
        raise AssertionError(f"m8n8k4 {which}.{order}: a fragment holds an element twice")
    return flat, np.argsort(flat)


def _matrices(vals, which, order, ctype, shape):
    """Per-quad-pair matrices (warps * 4, rows, cols) from per-lane elements (n, count)."""
    n = vals.shape[0]
    by_group = vals.reshape(n // WARP, WARP, -1)[:, lane_order(), :]
    by_group = by_group.reshape(n // GROUP, -1)
    _, slot = _flat(which, order, ctype, shape[1])
    return np.take(by_group, slot, axis=1).reshape(-1, *shape)


def mma(n: int, layouts, kinds, a_regs, b_regs, c_regs):
    """D = A B + C for every quad-pair of `n` threads; d's registers (one array each):
    float32 values, or uint32 pairs of f16 for .dtype .f16."""
    alayout, blayout = layouts
    dtype, ctype = kinds
    A = _matrices(mma_shapes.elements(a_regs, "f16", n), "a", alayout, ctype, (8, 4))
    B = _matrices(mma_shapes.elements(b_regs, "f16", n), "b", blayout, ctype, (4, 8))
    C = _matrices(mma_shapes.accumulator(c_regs, ctype, n), "c", "", ctype, (8, 8))
    with np.errstate(all="ignore"):
        D = (A @ B + C).astype(np.float16 if dtype == "f16" else np.float32)
    flat, _ = _flat("c", "", dtype, 8)
    per_place = np.take(D.reshape(D.shape[0], -1), flat, axis=1)           # (groups, 8 * count)
    per_place = per_place.reshape(n // WARP, WARP, -1)
    vals = np.empty_like(per_place)
    vals[:, lane_order(), :] = per_place
    vals = vals.reshape(n, -1)
    if dtype == "f16":
        bits = vals.view(np.uint16).astype(np.uint32)
        return [bits[:, 2 * r] | (bits[:, 2 * r + 1] << 16) for r in range(4)]
    return [np.ascontiguousarray(vals[:, i]) for i in range(8)]

"""The shapes and types of wgmma.mma_async, its register fragments, and its arithmetic.

    shape       A/B types                       D type          N
    m64nNk16    .f16                            .f16 or .f32    8, 16, ... 256
    m64nNk16    .bf16                           .f32            8, 16, ... 256
    m64nNk8     .tf32                           .f32            8, 16, ... 256
    m64nNk32    .e4m3/.e5m2 (mixed)             .f16 or .f32    8, 16, ... 256
    m64nNk32    .s8/.u8 (mixed: PTX 8.4)        .s32            8 16 24 32 48 64 ... 256
    m64nNk256   .b1 (.and.popc)                 .s32            8 16 24 32 48 64 ... 256

(PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions: wgmma",
the table of shapes and types of wgmma.mma_async; the N lists are what ptxas 13 accepts.)
A row of A or B is 32 bytes in every form: K elements of 16, 32, 8 or 1 bits.

Fragments (PTX ISA, "Register Fragments" of wgmma, the figures for matrix A and for the
accumulator D). Warp w of the warpgroup (warp index % 4) holds rows 16w .. 16w+15 of the
64-row A and D; inside its 16 rows a warp's fragment is mma.sync's m16n8 fragment (see
mma_shapes.py, groupID g = lane/4, t = lane%4):

    A (4 registers): the m16n8kK A fragment of its type: A[16w + g + 8*(r%2)][e*t + j + 4e*(r//2)]
    D (N/2 .f32/.s32 registers, N/4 registers of .f16 pairs): register group j (4 registers,
      .f16: 2) is the m16n8 accumulator of columns 8j .. 8j+7:
      d[4j + i] = D[16w + g + 8*(i//2)][8j + 2t + i%2]

Arithmetic is mma's (mma_shapes.multiply): exact products summed in float64 (int64),
rounded once to the D type; .satfinite clamps the s32 sums; imm-scale-a/b = -1 negates A/B;
scale-d false adds nothing of D (D = A*B).
"""
from __future__ import annotations

import numpy as np

from . import mma_shapes

WARPGROUP = 128
ROWS = 64                                   # M of every wgmma shape
AB_TYPES = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "b1")
# A/B type -> (K, the D types it takes, family)
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}
D_TYPES = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "e4m3": ("f16", "f32"),
           "e5m2": ("f16", "f32"), "s8": ("s32",), "u8": ("s32",), "b1": ("s32",)}
FAMILY = {"f16": "half", "bf16": "half", "tf32": "tf32", "e4m3": "f8", "e5m2": "f8",
          "s8": "int", "u8": "int", "b1": "b1"}
N_FLOAT = tuple(range(8, 257, 8))
N_INTEGER = (8, 16, 24, 32) + tuple(range(48, 257, 16))
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}
A_REGISTERS = 4


def shape_of(name: str) -> tuple[int, int, int] | None:
    """(64, N, K) of 'm64nNkK', or None when it is not of that form."""
    if not name.startswith("m64n") or "k" not in name:
        return None
    try:
        m, n, k = mma_shapes.dims(name)
    except ValueError:
        return None
    return m, n, k


def valid_ns(atype: str) -> tuple[int, ...]:
    return N_INTEGER if FAMILY[atype] in ("int", "b1") else N_FLOAT


def d_register_count(n: int, dtype: str) -> int:
    return n // 4 if dtype == "f16" else n // 2


def _per_block(dtype: str) -> int:
    """Registers of d per 8 columns."""
    return 2 if dtype == "f16" else 4


def exact(ctype: str):
    return mma_shapes.exact_dtype(ctype)


def a_from_registers(regs, atype: str, k: int, ctype: str):
    """Every warpgroup's 64 x K A (groups, 64, K) from the A fragments of its 128 lanes
    (each register an array over the warpgroups' lanes, in lane order)."""
    n = regs[0].shape[0]
    warps = mma_shapes.a_matrix(regs, atype, n, 16, k, exact(ctype))   # (4 * groups, 16, K)
    return warps.reshape(n // WARPGROUP, ROWS, k)


def d_matrix(regs, ctype: str, n_cols: int):
    """Every warpgroup's 64 x N accumulator (groups, 64, N) from its d registers."""
    lanes = regs[0].shape[0]
    per = _per_block(ctype)
    blocks = [mma_shapes.c_matrix(regs[per * j:per * (j + 1)], ctype, lanes, 16, 8, exact(ctype))
              for j in range(n_cols // 8)]
    return np.concatenate(blocks, axis=2).reshape(lanes // WARPGROUP, ROWS, n_cols)


def d_registers(D, ctype: str):
    """The d registers (one array over the warpgroups' lanes each) holding D (groups, 64, N)
    of the D type (float32, float16 or int32)."""
    groups, _, n_cols = D.shape
    warps = D.reshape(groups * 4, 16, n_cols)
    lanes = groups * WARPGROUP
    out = []
    for j in range(n_cols // 8):
        out += mma_shapes.d_registers(np.ascontiguousarray(warps[:, :, 8 * j:8 * j + 8]), ctype,
                                      lanes, 16, 8)
    return out


def multiply_accumulate(A, B, Cm, kinds, scale_d, scale_a: int, scale_b: int, satfinite: bool):
    """D = (scale_a A)(scale_b B) + (scale_d ? C : 0) for every warpgroup; `scale_d` is a bool
    per warpgroup. A (groups, 64, K), B (groups, K, N), C (groups, 64, N), exact values."""
    if scale_a < 0:
        A = -A
    if scale_b < 0:
        B = -B
    Cm = np.where(np.asarray(scale_d, bool)[:, None, None], Cm, 0).astype(Cm.dtype)
    opts = {"satfinite": satfinite, "bitop": "and" if kinds[0] == "b1" else None}
    return mma_shapes.multiply(A, B, Cm, kinds, opts)

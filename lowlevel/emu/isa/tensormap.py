"""The tensor map (CUtensorMap): the emulated GPU's 128-byte encoding of a TMA descriptor.

On a GPU the 128 bytes are opaque; the driver (cuTensorMapEncodeTiled/Im2col,
emu/driver/tensormaps.py) writes them, TMA instructions (tma.py) read them, and
`tensormap.replace` (tensormap_ops.py) edits fields in place, in global or shared memory.
All three use this one encoding, little-endian, byte offsets:

      0  u64     global address
      8  u64[5]  globalDim, dimension 0 (innermost) first
     48  u64[4]  globalStrides in bytes of dimensions 1..4 (dimension 0 is the element)
     80  u16[5]  boxDim (tile mode; im2col keeps channelsPerPixel in [0])
     90  u8[5]   elementStrides
     95  u8      rank - 1                (what tensormap.replace.rank writes)
     96  u8      element type, numbered as tensormap.replace.elemtype numbers them
                 (the PTX ISA's table, not CUtensorMapDataType's order)
     97  u8      interleave (0 none, 1 16B, 2 32B)
     98  u8      swizzle (0 none, 1 32B, 2 64B, 3 128B)
     99  u8      fill (0 zeros, 1 NaN: NAN_REQUEST_ZERO_FMA)
    100  u8      L2 promotion (0..3)
    101  u8      mode (0 tile, 1 im2col)
    102  i16[3]  im2col pixel box lower corner (W, H, D)
    108  i16[3]  im2col pixel box upper corner (W, H, D)
    114  u16     im2col channelsPerPixel
    116  u16     im2col pixelsPerColumn
    118..127     zero

A map that Triton builds on the device starts as 128 zero bytes and gets every field by
tensormap.replace, so zeros are a legal starting point: nothing here is a tag or a checksum.
Whether a map makes sense is checked when a TMA instruction uses it (`decode`), where a GPU
would misbehave: the emulator faults instead.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

MAP_BYTES = 128
MAP_ALIGN = 64                          # cuTensorMapEncode*: the map's address, 64-aligned

# field -> (byte offset, bytes per entry, entries): where tensormap.replace writes
FIELDS = {
    "global_address": (0, 8, 1), "global_dim": (8, 8, 5), "global_stride": (48, 8, 4),
    "box_dim": (80, 2, 5), "element_stride": (90, 1, 5), "rank": (95, 1, 1),
    "elemtype": (96, 1, 1), "interleave_layout": (97, 1, 1), "swizzle_mode": (98, 1, 1),
    "fill_mode": (99, 1, 1), "l2_promotion": (100, 1, 1), "mode": (101, 1, 1),
}
_LAYOUT = struct.Struct("<Q5Q4Q5H5BBBBBBBB3h3hHH10x")
assert _LAYOUT.size == MAP_BYTES

# The PTX ISA's element types (tensormap.replace.elemtype): number -> (name, bytes, kind)
ELEMENT_TYPES = {
    0: ("u8", 1, "u"), 1: ("u16", 2, "u"), 2: ("u32", 4, "u"), 3: ("s32", 4, "s"),
    4: ("u64", 8, "u"), 5: ("s64", 8, "s"), 6: ("f16", 2, "f"), 7: ("f32", 4, "f"),
    8: ("f32.ftz", 4, "f"), 9: ("f64", 8, "f"), 10: ("bf16", 2, "f"), 11: ("tf32", 4, "f"),
    12: ("tf32.ftz", 4, "f"),
}
# CUtensorMapDataType (cuda.h) -> the ISA's number; the packed 4/6-bit types are not emulated
FROM_DRIVER_TYPE = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 9, 9: 10, 10: 8, 11: 11, 12: 12}
SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
TILE, IM2COL = 0, 1


@dataclass
class TensorMap:
    """A decoded map; dims, strides, box and element strides have `rank` entries
    (strides: the byte stride of every dimension, strides[0] being the element size)."""
    address: int
    rank: int
    dims: tuple
    strides: tuple
    box: tuple
    element_strides: tuple
    elemtype: int
    interleave: int
    swizzle: int
    fill_nan: bool
    l2: int
    mode: int
    lower: tuple = (0, 0, 0)
    upper: tuple = (0, 0, 0)
    channels: int = 0
    pixels: int = 0

    @property
    def elem_bytes(self) -> int:
        return ELEMENT_TYPES[self.elemtype][1]

    @property
    def elem_name(self) -> str:
        return ELEMENT_TYPES[self.elemtype][0]


def encode(m: TensorMap) -> bytes:
    """The 128 bytes of a map the driver has validated."""
    pad = 5 - m.rank
    dims = list(m.dims) + [0] * pad
    strides = list(m.strides[1:]) + [0] * (4 - (m.rank - 1))
    box = list(m.box) + [0] * pad
    estr = list(m.element_strides) + [0] * pad
    return _LAYOUT.pack(m.address, *dims, *strides, *box, *estr, m.rank - 1, m.elemtype,
                        m.interleave, m.swizzle, int(m.fill_nan), m.l2, m.mode, *m.lower,
                        *m.upper, m.channels, m.pixels)


def decode(raw: bytes) -> TensorMap:
    """The map in `raw`; ValueError saying what is wrong where a GPU's TMA unit would
    misbehave (a rank, type, box or stride that no driver call would have encoded)."""
    f = _LAYOUT.unpack(bytes(raw))
    address, dims, strides, box, estr = f[0], f[1:6], f[6:10], f[10:15], f[15:20]
    rank = f[20] + 1
    elemtype, interleave, swizzle, fill, l2, mode = f[21:27]
    lower, upper, channels, pixels = f[27:30], f[30:33], f[33], f[34]
    if not 1 <= rank <= 5:
        raise ValueError(f"rank {rank} (1..5)")
    if elemtype not in ELEMENT_TYPES:
        raise ValueError(f"element type {elemtype} (0..12 are emulated)")
    if interleave > 2 or swizzle > 3 or fill > 1 or mode > 1:
        raise ValueError(f"interleave {interleave}, swizzle {swizzle}, fill {fill} or mode {mode} "
                         f"out of range")
    size = ELEMENT_TYPES[elemtype][1]
    m = TensorMap(address, rank, tuple(dims[:rank]), (size, *strides[:rank - 1]), tuple(box[:rank]),
                  tuple(estr[:rank]), elemtype, interleave, swizzle, bool(fill), l2, mode,
                  tuple(lower), tuple(upper), channels, pixels)
    _check_decoded(m)
    return m


def _check_decoded(m: TensorMap) -> None:
    for i in range(m.rank):
        if not 1 <= m.dims[i] <= 1 << 32:
            raise ValueError(f"globalDim[{i}] = {m.dims[i]} (1..2^32)")
        if m.mode == TILE and not 1 <= m.box[i] <= 256:
            raise ValueError(f"boxDim[{i}] = {m.box[i]} (1..256)")
        if not 1 <= m.element_strides[i] <= 8:
            raise ValueError(f"elementStrides[{i}] = {m.element_strides[i]} (1..8)")
    for i in range(1, m.rank):
        if m.strides[i] % 16 or m.strides[i] >= 1 << 40:
            raise ValueError(f"globalStrides[{i - 1}] = {m.strides[i]} (a multiple of 16 below 2^40)")
    if m.address % 16:
        raise ValueError(f"global address {m.address:#x} (16-byte aligned)")
    if m.mode == IM2COL and not (3 <= m.rank and 1 <= m.channels <= 256 and 1 <= m.pixels <= 1024):
        raise ValueError(f"im2col map of rank {m.rank}, {m.channels} channels per pixel, "
                         f"{m.pixels} pixels per column")
    inner = (m.channels if m.mode == IM2COL else m.box[0]) * m.elem_bytes
    if m.interleave == 0 and m.swizzle and inner > SWIZZLE_SPAN[m.swizzle]:
        raise ValueError(f"inner box of {inner} bytes wider than the {SWIZZLE_SPAN[m.swizzle]}-byte "
                         f"swizzle span")


def replace(raw: bytearray, field: str, ordinal: int, value: int) -> None:
    """tensormap.replace's edit of `raw` (the 128 bytes): field entry `ordinal` := value,
    truncated to the field's width as the instruction's store would be."""
    offset, width, count = FIELDS[field]
    if not 0 <= ordinal < count:
        raise ValueError(f"{field} ordinal {ordinal} (0..{count - 1})")
    at = offset + ordinal * width
    raw[at:at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


__all__ = ["MAP_BYTES", "MAP_ALIGN", "FIELDS", "ELEMENT_TYPES", "FROM_DRIVER_TYPE", "SWIZZLE_SPAN",
           "TILE", "IM2COL", "TensorMap", "encode", "decode", "replace"]

"""cp.reduce.async.bulk.tensor's arithmetic: old global elements combined with the box's.

The ISA lists, by reduction, the element types it takes (the tensor map's type):
    add      u32 s32 u64 f32 f16 bf16        min, max  u32 s32 u64 s64 f16 bf16
    inc, dec u32                              and, or, xor  32- and 64-bit integers
inc: old >= b ? 0 : old + 1;  dec: old == 0 or old > b ? b : old - 1 (b: the box's element).
Floating-point results round to nearest even (bf16 computed in float32, then rounded to bf16:
a double rounding where the exact sum needs more than float32's bits); another
type faults (CUDA_ERROR_LAUNCH_FAILED) rather than inventing a result.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault

_TYPES = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "s64": np.int64, "f32": np.float32,
          "f16": np.float16}
_ALLOWED = {"add": {"u32", "s32", "u64", "f32", "f16", "bf16"},
            "min": {"u32", "s32", "u64", "s64", "f16", "bf16"},
            "max": {"u32", "s32", "u64", "s64", "f16", "bf16"},
            "inc": {"u32"}, "dec": {"u32"},
            "and": {"u32", "s32", "u64", "s64"}, "or": {"u32", "s32", "u64", "s64"},
            "xor": {"u32", "s32", "u64", "s64"}}


def _bf16_to_f32(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _f32_to_bf16(x):
    u = x.astype(np.float32).view(np.uint32)
    nan = np.isnan(x)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.where(nan, np.uint32(0x7FC0), rounded).astype(np.uint16)


def _combine(op: str, a, b):
    if op == "add":
        return a + b
    if op in ("min", "max"):
        return (np.fmin if op == "min" else np.fmax)(a, b) if a.dtype.kind == "f" else \
            (np.minimum if op == "min" else np.maximum)(a, b)
    if op == "inc":
        return np.where(a >= b, 0, a + 1).astype(a.dtype)
    if op == "dec":
        return np.where((a == 0) | (a > b), b, a - 1).astype(a.dtype)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](a, b)


def reduce_elements(m, op: str, old_bytes, box_bytes, lane: int, C, iid: int):
    """The bytes of old (op) box, element by element, for the map `m`'s element type."""
    name = m.elem_name
    if name not in _ALLOWED[op]:
        ins = C.ck.instructions[iid]
        raise KernelFault("CUDA_ERROR_LAUNCH_FAILED",
                          f"{C.name}: cp.reduce.async.bulk.tensor .{op} on a tensor of .{name} (the ISA "
                          f"does not define it) by {C.who_batch(lane)}, PTX line {ins.line}: {ins.text}")
    old = np.ascontiguousarray(old_bytes).reshape(-1)
    box = np.ascontiguousarray(box_bytes).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "bf16":
            out = _f32_to_bf16(_combine(op, _bf16_to_f32(old.view(np.uint16)), _bf16_to_f32(box.view(np.uint16))))
        else:
            t = _TYPES[name]
            out = _combine(op, old.view(t), box.view(t)).astype(t)
    return out.view(np.uint8).reshape(old_bytes.shape)

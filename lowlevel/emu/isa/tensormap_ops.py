"""tensormap.replace and tensormap.cp_fenceproxy: editing tensor maps on the device (sm_90a).

    tensormap.replace.tile.FIELD{.global|.shared::cta}.b1024.{b32|b64}  [map], new_val;
        FIELD: global_address (.b64), rank, elemtype, interleave_layout, swizzle_mode, fill_mode
    tensormap.replace.tile.FIELD{.global|.shared::cta}.b1024.{b32|b64}  [map], ord, new_val;
        FIELD: box_dim, global_dim, element_stride (.b32), global_stride (.b64); ord an immediate
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.{cta|cluster|gpu|sys}
        .sync.aligned  [dst], [src], 128;

A replace writes one field of the 128-byte map (isa/tensormap.py's encoding: the field's
bytes, its value truncated to them) at [map] (64-byte aligned), in global or shared memory
or at a generic address. The values are the ISA's: rank is the rank minus one; elemtype,
interleave_layout, swizzle_mode and fill_mode are the ISA's numbers; the others are counts
of elements (bytes for global_stride, of dimension ord + 1). A value the ISA leaves
undefined is written as given; the TMA instruction that uses the map faults on it.
cp_fenceproxy copies the 128 bytes from shared to global memory; every access here is
already ordered, so its fence (like fence.proxy.tensormap::generic, convert.py's) does nothing
else. Both need .target sm_90a and PTX ISA 8.3 (ptxas's rules).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Imm, Instruction
from .addressing import address
from .operands import Mods, needs_target, unsupported
from .registry import family, provide
from .tensormap import FIELDS, MAP_ALIGN, MAP_BYTES

_U64 = np.uint64
_ORDINAL_FIELDS = {"box_dim", "global_dim", "element_stride", "global_stride"}
_WIDE_FIELDS = {"global_address", "global_stride"}         # .b64 new_val
_REPLACEABLE = set(FIELDS) - {"l2_promotion", "mode"}
_ISA_NAMES = {"interleave_layout", "swizzle_mode", "fill_mode", "elemtype", "rank", "global_address",
              "box_dim", "global_dim", "global_stride", "element_stride"}
_SCOPES = {"cta", "cluster", "gpu", "sys"}


def _needs_sm90a(ins: Instruction, g) -> None:
    if g.ck.kernel.target != "sm_90a":
        raise PtxError(ins.line, f"{ins.opcode} requires .target sm_90a: {ins.text}")
    needs_target(g, ins, 90, 83, f"{ins.opcode}.{ins.mods[0] if ins.mods else ''}")


def emit_tensormap(g, ins: Instruction) -> None:
    m = Mods(ins)
    _needs_sm90a(ins, g)
    if m.take("replace"):
        _emit_replace(g, ins, m)
    elif m.take("cp_fenceproxy"):
        _emit_cp_fenceproxy(g, ins, m)
    else:
        raise unsupported(ins, "tensormap form")


def _emit_replace(g, ins, m) -> None:
    if m.take("tile") is None:
        raise unsupported(ins, "tensormap.replace mode (only .tile)")
    field = m.take(*_ISA_NAMES)
    if field is None or field not in _REPLACEABLE:
        raise unsupported(ins, "tensormap.replace field")
    space = m.take("global", "shared::cta")
    if m.take("b1024") is None:
        raise PtxError(ins.line, f"tensormap.replace takes .b1024: {ins.text}")
    want = "b64" if field in _WIDE_FIELDS else "b32"
    if m.take(want) is None:
        raise PtxError(ins.line, f"tensormap.replace.tile.{field} takes a .{want} value: {ins.text}")
    m.done()
    ops = list(ins.operands)
    ordinal = 0
    if field in _ORDINAL_FIELDS:
        if len(ops) != 3 or not isinstance(ops[1], Imm) or ops[1].is_float:
            raise PtxError(ins.line, f"tensormap.replace.tile.{field} takes [addr], ord (an immediate), "
                                     f"new_val: {ins.text}")
        ordinal = int(ops.pop(1).value)
        if not 0 <= ordinal < FIELDS[field][2]:
            raise PtxError(ins.line, f"tensormap.replace.tile.{field}: ord {ordinal} is outside "
                                     f"0..{FIELDS[field][2] - 1}: {ins.text}")
    if len(ops) != 2 or not isinstance(ops[0], Addr):
        raise PtxError(ins.line, f"tensormap.replace takes [addr], new_val: {ins.text}")
    space = {"global": "global", "shared::cta": "shared", None: "generic"}[space]
    offset, width, _ = FIELDS[field]
    a = address(g, ins, ops[0], space)
    value = g.read(ins, ops[1], want)
    guard = g.guard(ins)
    g.emit(f"_tensormap_replace(C, {space!r}, {a}, {offset + ordinal * width}, {width}, {value}, "
           f"{g.ns['_register_instruction'](ins)}, {guard if guard is not None else 'None'})")


def _emit_cp_fenceproxy(g, ins, m) -> None:
    for part in ("global", "shared::cta", "tensormap::generic", "release", "sync", "aligned"):
        if m.take(part) is None:
            raise PtxError(ins.line, f"tensormap.cp_fenceproxy needs .{part}: {ins.text}")
    if m.take(*_SCOPES) is None:
        raise PtxError(ins.line, f"tensormap.cp_fenceproxy needs a scope: {ins.text}")
    m.done()
    ops = list(ins.operands)
    if len(ops) != 3 or not all(isinstance(x, Addr) for x in ops[:2]) or \
            not (isinstance(ops[2], Imm) and ops[2].value == MAP_BYTES):
        raise PtxError(ins.line, f"tensormap.cp_fenceproxy takes [dst], [src], 128: {ins.text}")
    dst, src = address(g, ins, ops[0], "global"), address(g, ins, ops[1], "shared")
    guard = g.guard(ins)
    g.emit(f"_tensormap_copy(C, {dst}, {src}, {g.ns['_register_instruction'](ins)}, "
           f"{guard if guard is not None else 'None'})")


# --- runtime ---------------------------------------------------------------------------

def _check_aligned(C, addr, iid, guard, what) -> None:
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    a = np.broadcast_to(np.asarray(addr, _U64), (C.n,))
    a = a if active is None else a[active]
    bad = (a % _U64(MAP_ALIGN)) != 0
    if bad.any():
        j = int(np.argmax(bad))
        ins = C.ck.instructions[iid]
        lane = int(C.batch_lanes(active, None)[j])
        raise KernelFault("CUDA_ERROR_MISALIGNED_ADDRESS",
                          f"{C.name}: {what} at {int(a[j]):#x}, not {MAP_ALIGN}-byte aligned, by "
                          f"{C.who_batch(lane)}, PTX line {ins.line}: {ins.text}")


def tensormap_replace(C, space, addr, offset, width, value, iid, guard) -> None:
    _check_aligned(C, addr, iid, guard, "tensormap.replace of a tensor map")
    mask = (1 << (8 * width)) - 1
    v = np.asarray(value).astype(_U64) & _U64(mask)
    where = np.asarray(addr, _U64) + _U64(offset)
    C.store_space(space, where, width, 1, v.astype({1: np.uint8, 2: np.uint16, 8: _U64}[width]), iid, guard)


def tensormap_copy(C, dst, src, iid, guard) -> None:
    _check_aligned(C, dst, iid, guard, "tensormap.cp_fenceproxy destination")
    _check_aligned(C, src, iid, guard, "tensormap.cp_fenceproxy source")
    for half in (0, 64):
        words = C.load_space("shared", np.asarray(src, _U64) + _U64(half), 8, 8, iid, guard)
        C.store_space("global", np.asarray(dst, _U64) + _U64(half), 8, 8, list(words.T), iid, guard)


provide(_tensormap_replace=tensormap_replace, _tensormap_copy=tensormap_copy)
# TYPED: the time model counts it as one integer operation (its .b32/.b64 type)
FAMILY = family("tensormap_ops", __name__)
FAMILY.declare("tensormap", emit=emit_tensormap)

__all__ = ["emit_tensormap", "tensormap_replace", "tensormap_copy"]

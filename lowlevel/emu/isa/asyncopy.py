"""Asynchronous copies from global to shared memory (sm_80 `cp.async`, `__pipeline_memcpy_async`).

    cp.async.ca.shared{::cta}.global{.L2::cache_hint}{.L2::64B|128B|256B}
                                      [dst], [src], cp-size{, src-size | ignore-src}{, policy};
    cp.async.cg.shared{::cta}.global...  [dst], [src], 16{, src-size | ignore-src}{, policy};
    cp.async.commit_group;  cp.async.wait_group N;  cp.async.wait_all;

The copy is performed when the instruction issues: cp-size (4, 8 or 16; .cg: 16) bytes
land in shared memory at dst, of which the first src-size (an immediate or a .u32
register; all of them when absent) come from global memory at src and the rest are zeros;
an ignore-src predicate that is true copies zeros only. Completing earlier than
commit/wait require is a valid execution of the PTX memory model, so commit_group,
wait_group and wait_all are no-ops.

Checks, as for a global load and a shared store: src and dst aligned to cp-size
(CUDA_ERROR_MISALIGNED_ADDRESS), the src-size bytes read inside one allocation and the
cp-size bytes written inside the CTA's shared window (CUDA_ERROR_ILLEGAL_ADDRESS); a lane
that reads no bytes (src-size 0, or ignore-src) does not touch global memory and is not
checked there. Faults name the kernel, block, thread, PTX line and address.

cp.async.mbarrier.arrive{.noinc}: mbarrier.py (the copies are complete, so it arrives at once).
Refused at load: cp.async.bulk (TMA), anything else.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from . import mbarrier
from .operands import Mods, operands, unsupported
from .registry import provide, register
from ..engine.memory import BASE, AccessFault
from ..ptx.ir import Addr, Imm, Instruction, Reg
from .memops import address, operands_less_policy, take_space

_U64 = np.uint64


def emit_cp(g, ins: Instruction) -> None:
    m = Mods(ins)
    if m.take("async") is None:
        raise unsupported(ins)
    if m.take("commit_group"):
        m.done()
        operands(ins, 0)
        g.guard(ins)
        return
    if m.take("wait_group"):
        m.done()
        (n,) = operands(ins, 1)
        if not isinstance(n, Imm) or n.is_float or n.value < 0:
            raise PtxError(ins.line, f"cp.async.wait_group takes an integer constant: {ins.text}")
        g.guard(ins)
        return
    if m.take("wait_all"):
        m.done()
        operands(ins, 0)
        g.guard(ins)
        return
    if m.take("mbarrier"):
        if m.take("arrive") is None:
            raise unsupported(ins, "cp.async.mbarrier form")
        mbarrier.emit_cp_async_arrive(g, ins, m)
        return
    for x in ins.mods:
        if x == "bulk" or x.startswith("bulk"):
            raise unsupported(ins, f".{x} copies")
    cache = m.take("ca", "cg")
    if cache is None:
        raise unsupported(ins, "form (expected .ca or .cg, or commit_group / wait_group / "
                               "wait_all)")
    dst_space = take_space(ins, m, "shared")
    src_space = m.take("global")
    for x in list(m.left):                        # the policy operand: operands_less_policy
        if x in ("L2::cache_hint", "L2::64B", "L2::128B", "L2::256B"):
            m.left.remove(x)
    m.done()
    if dst_space is None or src_space is None:
        raise PtxError(ins.line, f"cp.async copies .global to .shared: {ins.text}")
    ops = operands_less_policy(g, ins, 3)
    if len(ops) not in (3, 4):
        raise PtxError(ins.line, f"cp.async takes [dst], [src], cp-size and an optional "
                                 f"src-size or ignore-src: {ins.text}")
    dst, src, size = ops[:3]
    if not isinstance(dst, Addr) or not isinstance(src, Addr):
        raise PtxError(ins.line, f"cp.async needs [dst] and [src] addresses: {ins.text}")
    if not isinstance(size, Imm) or size.is_float or size.value not in (4, 8, 16):
        raise PtxError(ins.line, f"cp.async cp-size must be 4, 8 or 16: {ins.text}")
    cp = int(size.value)
    if cache == "cg" and cp != 16:
        raise PtxError(ins.line, f"cp.async.cg copies 16 bytes: {ins.text}")
    src_size = ignore = "None"
    if len(ops) == 4:
        extra = ops[3]
        if isinstance(extra, Imm):
            if extra.is_float or not 0 <= extra.value <= cp:
                raise PtxError(ins.line, f"cp.async src-size must be 0..{cp}: {ins.text}")
            if extra.value != cp:
                src_size = g.const(np.int64(extra.value))
        elif isinstance(extra, Reg) and g.ck.kernel.registers.get(extra.name) == "pred":
            ignore = g.read(ins, extra, "pred")
        elif isinstance(extra, Reg):
            src_size = g.read(ins, extra, "u32")
        else:
            raise PtxError(ins.line, f"bad src-size / ignore-src operand {extra}: {ins.text}")
    guard = g.guard(ins)
    g.ck.uses_shared = True
    d = address(g, ins, dst, "shared")
    s = address(g, ins, src, "global")
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_cp_async(C, {d}, {s}, {cp}, {src_size}, {ignore}, {iid}, "
           f"{guard if guard is not None else 'None'})")


def cp_async(C, dst, src, cp: int, src_size, ignore, iid: int, guard) -> None:
    """The copy of the current lanes that are active (and whose guard holds)."""
    active, any_active = C.active_with(guard)
    if not any_active:
        return
    n = C.n

    def lanes_of(x, dtype):
        x = np.broadcast_to(np.asarray(x, dtype), (n,))
        return x if active is None else x[active]

    d = lanes_of(dst, np.uint64)
    s = lanes_of(src, np.uint64)
    j = np.arange(cp)
    mem = C.memory
    if src_size is None and ignore is None:
        off = C.global_index(s, cp, 1, iid, "load", active, None, "global")
        data = mem.u8[off[:, None] + j]
    else:
        if ignore is not None:
            k = np.where(lanes_of(ignore, bool), 0, cp)
        else:
            k = np.minimum(lanes_of(src_size, np.int64), cp)
        data = np.zeros((d.size, cp), np.uint8)
        reading = k > 0
        if reading.any():
            _check_source(C, s, k, cp, reading, iid, active)
            base = (s[reading] - _U64(BASE)).astype(np.int64)
            take = j[None, :] < k[reading][:, None]
            rows = data[reading]
            rows[take] = mem.u8[(base[:, None] + j)[take]]
            data[reading] = rows
    C.require_space("shared")
    idx = C.window_index("shared", d, cp, 1, iid, "store", active, None)
    idx = idx[:, None] + j
    if C.observers:
        C.notify("shared_access", True, idx, 1, C.batch_lanes(active, None), iid)
    C.smem[idx] = data


def _check_source(C, s, k, cp, reading, iid, active) -> None:
    """Alignment of src to cp-size, and its first k bytes inside one allocation. The
    arena's allocations start 512-aligned, so a cp-aligned span whose first and last
    bytes lie in allocations lies in one."""
    bad = reading & ((s & _U64(cp - 1)) != 0)
    if bad.any():
        i = int(np.argmax(bad))
        C.fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", cp, "global", "load",
                 int(s[i]), i, active, None, iid)
    rows = np.flatnonzero(reading)
    for ends in (s[rows], s[rows] + (k[rows] - 1).astype(_U64)):
        try:
            C.memory.offsets(ends, 1)
        except AccessFault as f:
            i = int(rows[f.index])
            C.fault(f.code_name, "out-of-bounds", int(k[i]), "global", "load",
                     int(s[i]), i, active, None, iid)


register(emit_cp, "cp")
provide(_cp_async=cp_async)

__all__ = ["emit_cp", "cp_async"]

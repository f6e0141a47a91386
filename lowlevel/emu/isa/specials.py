"""Special registers computed on the fly: %lanemask_* (from %laneid), %clock/%clock64 (a
nanosecond timer times the emulated 1.98 GHz clock; strictly increasing), %globaltimer
(ns), %smid (CTA index modulo the emulated 132 SMs), %nsmid, %nwarpid, %gridid (one
number per launch), %dynamic_smem_size, %total_smem_size. (%tid, %ntid, %ctaid, %nctaid,
%laneid, %warpid are slots the engine fills: engine/decode.py's SPECIALS.)

%clock_hi is the upper half of %clock64. Three more, as the PTX ISA defines them for this device:
    %aggr_smem_size      (sm_90) the CTA's shared memory, user (static and dynamic) plus the
                         region reserved for system software (addressing.py's 1 KB, the
                         device's RESERVED_SHARED_MEMORY_PER_BLOCK)
    %current_graph_exec  the handle of the device graph the kernel runs in, 0 outside one:
                         the emulated driver launches no device graphs (graphs instantiated
                         for device launch), so always 0
    %pm0..%pm7, %pm0_64..%pm7_64
                         performance monitor counters, whose behavior the ISA leaves
                         undefined: here each counts the emulated clock (%clock64; the 32-bit
                         ones its low half, wrapping as %clock does), so a counter never
                         goes back between two reads of one thread (the 32-bit ones up to
                         their wrap)
"""
from __future__ import annotations

import itertools
import threading
import time

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Reg
from .addressing import RESERVED_OFFSETS, RESERVED_SHARED
from .registry import LaunchState, family, provide, special_register
from .warp import current_lanes

U32, U64 = np.uint32, np.uint64
CLOCK_GHZ = 1.98
N_SM = 132
N_WARPID = 64


_clock_lock = threading.Lock()
_last_clock = [0]


def clock64():
    now = int(time.perf_counter_ns() * CLOCK_GHZ)
    with _clock_lock:
        now = max(now, _last_clock[0] + 1)
        _last_clock[0] = now
    return U64(now & 0xFFFFFFFFFFFFFFFF)


def clock32():
    return U32(int(clock64()) & 0xFFFFFFFF)


def globaltimer():
    return U64(time.time_ns())


_gridids = itertools.count(1)


class GridId(LaunchState):
    """%gridid of a launch: numbered on its first read, unique in the process."""
    __slots__ = ("gridid",)

    def __init__(self, launch) -> None:
        self.gridid = None


def gridid(C):
    state = C.specials_state
    if state.gridid is None:
        state.gridid = U64(next(_gridids))
    return state.gridid


FAMILY = family("specials", __name__, state=GridId)      # special registers only, no opcodes


def smid(C):
    cta = C.first_cta + current_lanes(C) // C.padded
    if C.lanes is None and C.n == C.padded:
        return U32(C.first_cta % N_SM)
    return (cta % N_SM).astype(U32)


def dynamic_smem(C):
    return U32(C.dynamic_shared)            # the launch's dynamic shared bytes (spaces.py)


def total_smem(C):
    k = C.ck.kernel
    return U32(int(dynamic_smem(C)) + int(getattr(k, "shared_bytes", 0) or 0))


def aggr_smem(C):
    return U32(int(total_smem(C)) + RESERVED_SHARED)


provide(_clock64=clock64, _clock32=clock32, _globaltimer=globaltimer, _gridid=gridid, _smid=smid,
        _dynamic_smem=dynamic_smem, _total_smem=total_smem, _aggr_smem=aggr_smem)


def _adapt(expr: str, bits: int, ptype: str) -> str:
    size, kind = TYPES[ptype]
    if kind in ("pred", "f"):
        raise ValueError(ptype)
    if size * 8 != bits:
        expr = f"({expr}).astype(_U{size * 8})"
    if kind == "s":
        expr = f"({expr}).view(_I{size * 8})"
    return expr


def _reader(bits, make):
    def read(g, ins, ptype):
        try:
            return _adapt(make(g, ins), bits, ptype)
        except ValueError:
            raise PtxError(ins.line, f"special register read as .{ptype}: {ins.text}") from None
    return read


def _lanemask(kind):
    def make(g, ins):
        lane = g.read(ins, Reg("%laneid"), "u32")
        one = "_U64(1)"
        lane64 = f"{lane}.astype(_U64)"
        lt = f"(({one} << {lane64}) - {one})"
        le = f"(({one} << ({lane64} + {one})) - {one})"
        full = "_U64(0xFFFFFFFF)"
        expr = {"eq": f"({one} << {lane64})", "lt": lt, "le": le,
                "gt": f"({full} & ~{le})", "ge": f"({full} & ~{lt})"}[kind]
        return f"({expr}).astype(_U32)"
    return make


for _k in ("eq", "lt", "le", "gt", "ge"):
    special_register(f"%lanemask_{_k}", _reader(32, _lanemask(_k)))

for _name, _read in {
    "%clock": _reader(32, lambda g, ins: "_clock32()"),
    "%clock64": _reader(64, lambda g, ins: "_clock64()"),
    "%clock_hi": _reader(32, lambda g, ins: "(_clock64() >> _U64(32)).astype(_U32)"),
    "%globaltimer": _reader(64, lambda g, ins: "_globaltimer()"),
    "%globaltimer_lo": _reader(32, lambda g, ins: "(_globaltimer() & _U64(0xFFFFFFFF)).astype(_U32)"),
    "%globaltimer_hi": _reader(32, lambda g, ins: "(_globaltimer() >> _U64(32)).astype(_U32)"),
    "%smid": _reader(32, lambda g, ins: "_smid(C)"),
    "%nsmid": _reader(32, lambda g, ins: g.const(U32(N_SM))),
    "%nwarpid": _reader(32, lambda g, ins: g.const(U32(N_WARPID))),
    "%gridid": _reader(64, lambda g, ins: "_gridid(C)"),
    "%dynamic_smem_size": _reader(32, lambda g, ins: "_dynamic_smem(C)"),
    "%total_smem_size": _reader(32, lambda g, ins: "_total_smem(C)"),
    "%aggr_smem_size": _reader(32, lambda g, ins: "_aggr_smem(C)"),
    "%current_graph_exec": _reader(64, lambda g, ins: g.const(U64(0))),
}.items():
    special_register(_name, _read)

for _name, _offset in RESERVED_OFFSETS.items():     # the reserved shared region (addressing.py)
    special_register(_name, _reader(32, lambda g, ins, _o=_offset: g.const(U32(_o))))

for _n in range(8):                 # performance monitor counters: the emulated clock (above)
    special_register(f"%pm{_n}", _reader(32, lambda g, ins: "_clock32()"))
    special_register(f"%pm{_n}_64", _reader(64, lambda g, ins: "_clock64()"))

"""Code generation for loads and stores in every state space, cvta, and barriers.

Declared in isa/registry.py (family memops):
  ld / st       .global .const .shared .local .param(ld) and generic (no space); ldu as ld;
                st.async into a cluster peer's shared memory (asyncstore.py's run time)
  atom / red    atom.py
  cvta          .global .const (identity), .shared{::cta,::cluster} .local .param (add or
                remove the generic window; .param: paramaddr.py)
  isspacep      spacep.py
  bar/barrier   .sync (id and optional thread count, immediates), bar.cta.sync,
                barrier.sync.aligned: end their basic block (see engine/scheduler.py);
                bar.warp.sync: checks the member mask (warp.py), nothing to wait for
                (lanes run in lockstep; memory is sequentially consistent);
                bar.red (popc/and/or): barred.py; bar.arrive: refused;
                barrier.cluster.arrive/wait: cluster.py
  ld/st/atom .shared::cluster: another CTA's shared memory (cluster.py's addresses)
  cp.async      asyncopy.py (the copy at issue time; commit/wait are no-ops)
Addresses: see addressing.py for the windows and the address operand.
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import TYPES, Addr, Imm, Instruction, Reg, Sym, Vec
from . import barred, cluster, paramaddr
from .addressing import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, address, operands_less_policy, plus_offset, symbol, take_space
from .asyncstore import ST_TYPES, async_addresses, async_modifiers
from .operands import CACHE_MODS, Mods, operands, unsupported, view_name
from .registry import ANY, ASYNC, MEMORY, family
from .warpmask import sync_kind

_SPACES = ("global", "param", "shared", "local", "const", "generic", "tex")
SEMANTICS = {"relaxed", "acquire", "release", "acq_rel", "sc", "weak", "volatile", "mmio",
              "cta", "gpu", "sys", "cluster"}


def ends_block(ins: Instruction) -> bool:
    """Barrier waits end a basic block (the scheduler parks lanes between blocks)."""
    return ins.opcode in ("bar", "barrier") and "warp" not in ins.mods and \
        ("sync" in ins.mods or "red" in ins.mods) or cluster.ends_block(ins)


def after_barrier(ins: Instruction):
    """The instruction a barrier puts first in the next block (bar.red's result), or None."""
    return barred.follower(ins)


# --- ld / st -------------------------------------------------------------------------

def _memory_mods(ins: Instruction, m: Mods):
    space = take_space(ins, m, *_SPACES, cluster_ok=ins.opcode in ("ld", "st"))
    m.take_all(CACHE_MODS)
    m.take_all({"L1", "L2", "level"})
    m.take("unified")
    vec = m.take("v2", "v4", "v8")
    t = m.one_type()
    m.done()
    if space == "tex":
        raise unsupported(ins, ".tex memory")
    if t == "pred" or t == "b128":
        raise unsupported(ins, f".{t} accesses")
    if vec == "v8":
        raise unsupported(ins, ".v8 accesses")
    return space or "generic", int(vec[1:]) if vec else 1, t


def _call(space: str, what: str) -> str:
    if space in ("global", "const"):
        return f"C.{what}("                      # the arena fast path (engine/scheduler.py)
    return f"C.{what}_space({space!r}, "


def _shared_register(g, ins: Instruction, addr, space: str):
    """(register expression, offset) of a .shared [reg + offset] access through a 32- or
    64-bit integer register, for the engine's load_shared/store_shared, which prove the
    common access good from the register itself (engine/spaces.py); None otherwise."""
    if space != "shared" or not isinstance(addr, Addr) or not isinstance(addr.base, Reg):
        return None
    rtype = g.ck.kernel.registers.get(addr.base.name)
    if rtype is None or TYPES[rtype][1] not in ("u", "s", "b") or TYPES[rtype][0] not in (4, 8):
        return None
    g.ck.uses_shared = True
    return g.read(ins, addr.base, f"u{TYPES[rtype][0] * 8}"), addr.offset


def emit_ld(g, ins: Instruction) -> None:
    m = Mods(ins)
    space, vec, t = _memory_mods(ins, m)
    if ins.opcode == "ldu" and space not in ("global", "generic"):
        raise PtxError(ins.line, f"ldu loads from .global (or a generic address): {ins.text}")
    ops = operands_less_policy(g, ins, 2)
    if len(ops) != 2:
        raise PtxError(ins.line, f"ld takes 2 operands: {ins.text}")
    d, addr = ops
    guard = g.guard(ins)
    size, kind = TYPES[t]
    dests = d.elems if isinstance(d, Vec) else [d]
    if len(dests) != vec:
        raise PtxError(ins.line, f"ld.v{vec} needs {vec} destinations: {ins.text}")
    raw_t = f"u{size * 8}" if kind != "s" else t
    if space == "param":
        if isinstance(addr, Addr) and isinstance(addr.base, Reg):
            _ld_param_through_register(g, ins, addr, dests, size, vec, raw_t, kind, t, guard)
            return
        if not (isinstance(addr, Addr) and isinstance(addr.base, Sym)):
            raise unsupported(ins, "ld.param through a register address")
        p = next((p for p in g.ck.kernel.params if p.name == addr.base.name), None)
        if p is None:
            raise PtxError(ins.line, f"unknown parameter {addr.base.name}: {ins.text}")
        off = p.offset + addr.offset
        # A load wider than its parameter, or at an offset from it, is no error for ptxas
        # ("potential out of bound access", an info): it reads whatever follows in the
        # parameter buffer, padding and later parameters (C.param: 0xFF past its end).
        if off < 0:
            raise unsupported(ins, "ld.param before the first parameter (the driver's own "
                                   "constants on a GPU)")
        if off % (size * vec):
            raise unsupported(ins, f"ld.param at parameter offset {off}, not a multiple of "
                                   f"its {size * vec}-byte access size")
        for i, e in enumerate(dests):
            g.write(ins, e, f"C.param({off + i * size}, {view_name(raw_t)})", raw_t, guard)
        return
    shared = _shared_register(g, ins, addr, space)
    call = "C.load_shared(" if shared else _call(space, "load")
    a = f"{shared[0]}, {shared[1]}" if shared else address(g, ins, addr, space)
    iid = g.ns["_register_instruction"](ins)
    tmp = g.fresh()
    gexpr = guard if guard is not None else "None"
    g.emit(f"{tmp} = {call}{a}, {size}, {vec}, {iid}, {gexpr})")
    for i, e in enumerate(dests):
        col = tmp if vec == 1 else f"{tmp}[:, {i}]"
        value = col if kind != "s" else f"{col}.view({view_name(t)})"
        g.write(ins, e, value, raw_t, guard)


def _ld_param_through_register(g, ins, addr, dests, size, vec, raw_t, kind, t, guard):
    """ld.param [%rd+off]: %rd holds a parameter's address (mov %rd, param)."""
    a = plus_offset(g, g.read(ins, addr.base, "u64"), addr.offset)
    g.ns["_param_gather"] = paramaddr.param_gather
    ins_name = f"_param_ins{len(g.ns)}"      # a module-level name no temporary shadows
    g.ns[ins_name] = ins
    tmp = g.fresh()
    g.emit(f"{tmp} = _param_gather(C, {a}, {size}, {vec}, {view_name(raw_t)}, "
           f"{guard if guard is not None else 'None'}, {ins_name})")
    for i, e in enumerate(dests):
        col = tmp if vec == 1 else f"{tmp}[:, {i}]"
        g.write(ins, e, col if kind != "s" else f"{col}.view({view_name(t)})", raw_t, guard)


def emit_st(g, ins: Instruction) -> None:
    m = Mods(ins)
    space, vec, t = _memory_mods(ins, m)
    if space == "param":
        raise unsupported(ins, "st.param outside a call sequence")
    if space == "const":
        raise PtxError(ins.line, f"constant memory is read-only: {ins.text}")
    ops = operands_less_policy(g, ins, 2)
    if len(ops) != 2:
        raise PtxError(ins.line, f"st takes 2 operands: {ins.text}")
    addr, src = ops
    guard = g.guard(ins)
    size, kind = TYPES[t]
    srcs = src.elems if isinstance(src, Vec) else [src]
    if len(srcs) != vec or None in srcs:
        raise PtxError(ins.line, f"st.v{vec} needs {vec} sources: {ins.text}")
    values = []
    for s in srcs:
        if isinstance(s, Imm) and kind == "f":
            values.append(f"{g.read(ins, s, t)}.view(_U{size * 8})")
        else:
            values.append(g.read(ins, s, f"u{size * 8}"))
    shared = _shared_register(g, ins, addr, space)
    call = "C.store_shared(" if shared else _call(space, "store")
    a = f"{shared[0]}, {shared[1]}" if shared else address(g, ins, addr, space)
    iid = g.ns["_register_instruction"](ins)
    gexpr = guard if guard is not None else "None"
    value = values[0] if vec == 1 else "(" + ", ".join(values) + ",)"
    g.emit(f"{call}{a}, {size}, {vec}, {value}, {iid}, {gexpr})")


# st.async: a store into a cluster peer's shared memory, completed on its mbarrier (asyncstore.py)
def emit_st_async(g, ins: Instruction) -> None:
    m = Mods(ins)
    async_modifiers(ins, m)
    m.take("weak")
    vec = m.take("v2", "v4")
    t = m.one_type(ST_TYPES)
    m.done()
    n = int(vec[1:]) if vec else 1
    size = TYPES[t][0]
    if size * n > 16:
        raise PtxError(ins.line, f"st.async of more than 128 bits: {ins.text}")
    if len(ins.operands) != 3:
        raise PtxError(ins.line, f"st.async takes [a], b, [mbar]: {ins.text}")
    a, b, mb = async_addresses(g, ins, ins.operands)
    srcs = b.elems if isinstance(b, Vec) else [b]
    if len(srcs) != n or None in srcs:
        raise PtxError(ins.line, f"st.async{'.' + vec if vec else ''} needs {n} sources: {ins.text}")
    values = "(" + ", ".join(g.read(ins, s, f"u{size * 8}") for s in srcs) + ",)"
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    g.emit(f"_st_async(C, {a}, {mb}, {values}, {size}, {iid}, {guard if guard is not None else 'None'})")


# --- cvta ----------------------------------------------------------------------------

def emit_cvta(g, ins: Instruction) -> None:
    m = Mods(ins)
    to = m.take("to")
    space = take_space(ins, m, "global", "shared", "local", "const", "param", "param::entry",
                       cluster_ok=True)
    t = m.one_type({"u32", "u64"})
    m.done()
    if space is None:
        raise PtxError(ins.line, f"cvta needs a state space: {ins.text}")
    space = {"param::entry": "param", "shared::cluster": "shared"}.get(space, space)
    if space == "param" and t == "u32":
        # ptxas: a 32-bit address, and sm_90 has no 32-bit ABI
        raise PtxError(ins.line, f"cvta.param takes a 64-bit (.u64) address: {ins.text}")
    d, a = operands(ins, 2)
    guard = g.guard(ins)
    if isinstance(a, Sym):
        if to:
            raise PtxError(ins.line, f"cvta.to takes a generic address, not a variable: {ins.text}")
        expr, vspace = _cvta_symbol(g, ins, a.name, space)
        if vspace != space and {vspace, space} != {"global", "const"}:
            raise PtxError(ins.line, f"{a.name} is a .{vspace} variable: {ins.text}")
    else:
        expr = g.read(ins, a, "u64")
    if space == "shared":
        g.ck.uses_shared = True
    elif space == "local":
        g.ck.uses_local = True
    base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space, 0)
    if base:
        k = g.const(np.uint64(base))
        expr = f"({expr} - {k})" if to else f"({expr} + {k})"
    if t == "u32":
        g.write(ins, d, f"({expr} & _U64(0xFFFFFFFF)).astype(_U32)", "u32", guard)
    else:
        g.write(ins, d, expr, "u64", guard)


def _cvta_symbol(g, ins: Instruction, name: str, space: str):
    """(expression, space) of a cvta operand that names a variable or kernel parameter."""
    offset = paramaddr.parameter_offset(g.ck, name)
    if offset is not None:
        return g.const(np.uint64(offset)), "param"
    if space == "param":
        raise PtxError(ins.line, f"{name} is not a parameter of kernel "
                                 f"{g.ck.kernel.name}: {ins.text}")
    return symbol(g, ins, name)


# --- barriers ------------------------------------------------------------------------

def emit_bar(g, ins: Instruction) -> None:
    m = Mods(ins)
    if ins.opcode == "barrier" and m.take("cluster"):
        cluster.emit_barrier_cluster(g, ins, m)
        return
    if m.take("warp"):
        m.take("sync")
        m.done()
        (mask,) = operands(ins, 1)
        guard = g.guard(ins)
        iid = g.ns["_register_instruction"](ins)
        g.emit(f"_warp_sync(C, {g.read(ins, mask, 'u32')}, {iid}, "
               f"{guard if guard is not None else 'None'})")      # the member mask rule (warp.py)
        return
    m.take("cta")
    kind = m.take("sync", "arrive", "red")
    m.take("aligned")
    if kind is None:
        raise unsupported(ins, "barrier form")
    if kind == "red":
        barred.emit_bar_red(g, ins, m, _barrier_id_count)
        return
    if kind != "sync":
        raise unsupported(ins, f".{kind} barriers")
    m.done()
    if ins.guard is not None:
        raise unsupported(ins, "a predicated barrier")
    ops = ins.operands
    if ops and isinstance(ops[0], Reg) and len(ops) == 1:
        # barrier.sync %r (what -G builds pass __barrier_sync(id) as): the id is read at
        # run time (barred.dynamic_id); the block's barrier is -1 - iid until then
        iid = g.ns["_register_instruction"](ins)
        g.emit(f"_bar_dynamic_id(C, {g.read(ins, ops[0], 'u32')}, {iid})")
        g.barrier = (-1 - iid, 0)
        return
    g.barrier = _barrier_id_count(ins, ops)


def _barrier_id_count(ins: Instruction, ops) -> tuple:
    """(barrier id, thread count or 0) of a barrier's operands (immediates only)."""
    if not 1 <= len(ops) <= 2:
        raise PtxError(ins.line, f"{ins.opcode}.sync takes a barrier id and an optional "
                                 f"thread count: {ins.text}")
    if not isinstance(ops[0], Imm) or ops[0].is_float:
        raise unsupported(ins, "a barrier id in a register")
    bid = int(ops[0].value)
    if not 0 <= bid < 16:
        raise PtxError(ins.line, f"barrier id {bid} is outside 0..15: {ins.text}")
    count = 0
    if len(ops) == 2:
        if not isinstance(ops[1], Imm) or ops[1].is_float:
            raise unsupported(ins, "a barrier thread count in a register")
        count = int(ops[1].value)
        if count <= 0 or count % 32:
            raise PtxError(ins.line, f"barrier thread count {count} must be a positive "
                                     f"multiple of 32: {ins.text}")
    return bid, count


FAMILY = family("memops", __name__)
FAMILY.declare("ld", "ldu", emit=emit_ld, pipe=MEMORY)       # ldu: a load of read-only data (.global or generic)
FAMILY.declare("st", emit={ANY: emit_st, ASYNC: emit_st_async}, pipe=MEMORY)
FAMILY.declare("cvta", emit=emit_cvta)
FAMILY.declare("bar", "barrier", emit=emit_bar, ends_block=ends_block, follows=barred.follower, warp_sync=sync_kind)

"""The address map generated code works in, and where a kernel's variables sit in it.

- global (and .const): device addresses in the arena (engine/memory.py);
- shared: an offset into the CTA's shared window: static variables in declaration order
  at their alignment, then the dynamic `.extern .shared` part, aligned to 16 or more;
- local: an offset into the thread's local window, 0 .. local_bytes;
- param: an offset into the kernel's parameter buffer (`mov %rd, param`, paramaddr.py);
- generic: a global address as is; shared offset + SHARED_WINDOW; local offset +
  LOCAL_WINDOW; parameter offset + PARAM_WINDOW (cvta.param, PTX 7.7). The windows lie at
  2^48, 2^49 and 2^50, far above any arena address, and span 2^32 each; `cvta` adds or
  removes these bases. (The ISA puts the .param window inside the .global one: here it is
  outside the arena, so isspacep.global is true for it and an ld.global of it faults.)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Addr, Instruction, Sym, layout_variables
from .operands import Mods, unsupported

SHARED_WINDOW = 1 << 48          # generic address of shared offset 0
LOCAL_WINDOW = 1 << 49           # generic address of local offset 0
PARAM_WINDOW = 1 << 50           # generic address of parameter offset 0
WINDOW_SPAN = 1 << 32
DYNAMIC_SHARED_ALIGN = 16
# a .shared::cluster address (cluster.py's mapa): the CTA rank + 1 above the offset in the window
RANK_SHIFT = 24
OFFSET_MASK = (1 << RANK_SHIFT) - 1
_U64_MASK = (1 << 64) - 1


@dataclass
class Layout:
    shared: dict            # name -> offset in the shared window (dynamic ones included)
    static_shared: int      # bytes of static shared memory
    dynamic_offset: int     # where dynamic shared memory starts
    local: dict             # name -> offset in the local window
    local_bytes: int

    def shared_window(self, dynamic: int) -> int:
        """The bytes of shared memory a block may touch: what the GPU allocates it, its
        static and dynamic bytes rounded up to the allocation unit. Code compiled for an
        unsized dynamic array may read past its last element in one wide load (NVVM's
        ld.shared.v4 over the tail of a 28-byte array reads 32), which the GPU's rounding
        makes legal; those bytes hold fresh shared memory's poison."""
        used = self.dynamic_offset + dynamic if dynamic else self.static_shared
        return -(-used // SHARED_ALLOCATION_UNIT) * SHARED_ALLOCATION_UNIT


MAX_STATIC_SHARED = 48 * 1024   # what ptxas allows a kernel to declare statically
# Shared memory is allocated to a block in units of 128 bytes on compute capability 8.x
# and 9.x (cuda_occupancy.h, cudaOccSMemAllocationGranularity), the emulated devices.
SHARED_ALLOCATION_UNIT = 128

# Reserved shared memory (sm_80+: the driver reserves 1 KB per block, the device attribute
# RESERVED_SHARED_MEMORY_PER_BLOCK): what %reserved_smem_offset_* point into, and where
# cooperative groups keep the barriers and exchange slots of tiles of more than one warp
# (cooperative_groups/details/memory.h: at least 288 bytes at %reserved_smem_offset_1).
# A kernel that reads one of those registers gets the region at the bottom of its shared
# window, its own variables after it; the emulator's choice of the two offsets:
RESERVED_SHARED = 1024
RESERVED_OFFSETS = {"%reserved_smem_offset_begin": 0, "%reserved_smem_offset_end": RESERVED_SHARED,
                    "%reserved_smem_offset_cap": RESERVED_SHARED, "%reserved_smem_offset_0": 0,
                    "%reserved_smem_offset_1": RESERVED_SHARED // 2}


def reads_reserved_shared(k) -> bool:
    """Whether kernel k reads one of the %reserved_smem_offset_* registers."""
    for ins in k.body:
        for op in getattr(ins, "operands", ()):
            if getattr(op, "name", "").startswith("%reserved_smem_offset"):
                return True
    return False


def kernel_layout(k) -> Layout:
    svars = k.shared_variables
    base = RESERVED_SHARED if reads_reserved_shared(k) else 0
    shared, static = layout_variables(svars)
    if base:
        shared = {name: off + base for name, off in shared.items()}
        static += base
    if static - base > MAX_STATIC_SHARED:
        raise PtxError(k.line, f"entry function {k.name!r} uses too much shared data "
                               f"({static} bytes, {MAX_STATIC_SHARED} max)")
    externs = [v for v in svars if v.extern]
    align = max([DYNAMIC_SHARED_ALIGN] + [v.align for v in externs])
    dyn = -(-static // align) * align
    for v in externs:
        shared[v.name] = dyn
    local, lbytes = layout_variables([v for v in k.variables if v.space == "local"])
    return Layout(shared, static, dyn, local, lbytes)


# --- address operands (every memory instruction's)  -----------------------------------------------------------

def symbol(g, ins: Instruction, name: str):
    """(expression, space) of variable `name`'s address in its own state space."""
    ck = g.ck
    lay = ck.layout
    if name in lay.shared:
        ck.uses_shared = True
        return g.const(np.uint64(lay.shared[name])), "shared"
    if name in lay.local:
        ck.uses_local = True
        return g.const(np.uint64(lay.local[name])), "local"
    var = getattr(ck.kernel, "module_variables", {}).get(name)
    if var is not None and var.space in ("global", "const"):
        nsname = ck.global_names.get(name)
        if nsname is None:
            nsname = ck.global_names[name] = f"_GV{len(ck.global_names)}"
            g.ns[nsname] = np.uint64(0)   # spaces.bind_symbols sets the address at load
        return nsname, var.space
    if any(p.name == name for p in ck.kernel.params):
        raise unsupported(ins, f"the address of parameter {name}")
    raise PtxError(ins.line, f"unknown variable {name!r}: {ins.text}")


def plus_offset(g, expr: str, offset: int) -> str:
    if not offset:
        return expr
    return f"({expr} + {g.const(np.uint64(offset & _U64_MASK))})"


def address(g, ins: Instruction, addr, space: str) -> str:
    """Expression of the address operand `[...]` for an access in `space`."""
    if not isinstance(addr, Addr):
        raise PtxError(ins.line, f"expected an address [..]: {ins.text}")
    if isinstance(addr.base, Sym):
        expr, vspace = symbol(g, ins, addr.base.name)
        if space == "shared::cluster" and vspace == "shared":
            pass                       # the executing CTA's own variable (isa/cluster.py)
        elif space == "generic":
            if vspace == "shared":
                expr = plus_offset(g, expr, SHARED_WINDOW)
            elif vspace == "local":
                expr = plus_offset(g, expr, LOCAL_WINDOW)
        elif space == "const" and vspace == "global" or space == "global" and vspace == "const":
            pass                       # both live in the arena
        elif vspace != space:
            raise PtxError(ins.line, f"{addr.base.name} is a .{vspace} variable, "
                                     f"accessed as .{space}: {ins.text}")
        return plus_offset(g, expr, addr.offset)
    if addr.base is None:
        return g.const(np.uint64(addr.offset & _U64_MASK))
    if space in ("shared", "shared::cluster"):
        g.ck.uses_shared = True
    elif space == "local":
        g.ck.uses_local = True
    return plus_offset(g, g.read(ins, addr.base, "u64"), addr.offset)


def take_space(ins: Instruction, m: Mods, *spaces, cluster_ok: bool = False) -> str | None:
    """The state space among `spaces` that the instruction names, reading .shared::cta
    as .shared (the CTA's own shared memory); .shared::cluster (distributed shared
    memory, isa/cluster.py) only where `cluster_ok`."""
    space = m.take(*spaces)
    if "shared" in spaces:
        for x in list(m.left):
            if x.startswith("shared::"):
                if x != "shared::cta" and not (cluster_ok and x == "shared::cluster"):
                    raise unsupported(ins, f".{x}")
                m.left.remove(x)
                space = "shared" if x == "shared::cta" else x
    return space


def operands_less_policy(g, ins: Instruction, least: int) -> list:
    """The operands of a memory instruction without the cache-policy operand that
    `.L2::cache_hint` appends (read, so that a bad one is refused, and otherwise ignored:
    caches do not change results). `least`: how many operands come before the policy."""
    ops = list(ins.operands)
    if any(x.startswith("L2::cache_hint") for x in ins.mods):
        if len(ops) <= least:
            raise PtxError(ins.line, f"{ins.opcode} with .L2::cache_hint needs a cache policy "
                                     f"operand: {ins.text}")
        g.read(ins, ops.pop(), "b64")
    return ops

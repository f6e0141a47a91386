"""Device-side malloc and free: `call.uni (retval0), malloc, (param0);` and
`call.uni free, (param0);`, what nvcc and NVRTC emit for malloc/free and new/delete against
their `.extern .func` declarations. calls.py turns each call into the pseudo instruction
`_malloc` (result and size .param variables) or `_free` (the pointer's).

The heap is the context's (driver/limits.py: one allocation of CU_LIMIT_MALLOC_HEAP_SIZE
bytes, made by the first launch that uses it, kept until the context goes): each active
thread, in thread order, gets a 16-byte aligned block, or NULL once the heap cannot hold it,
as on a GPU. Memory a kernel mallocs outlives it, until some kernel frees it. free(NULL) does
nothing; freeing what malloc did not return (or twice) faults the launch.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Reg
from .calls import param_reg
from .registry import family, provide


def _param(g, ins, sym, what: str) -> str:
    sizes = getattr(g.ck.kernel, "param_vars", {})
    if sym.name not in sizes or sizes[sym.name] < 8:
        raise PtxError(ins.line, f"{what} {sym.name} is not a 64-bit .param: {ins.text}")
    return param_reg(sym.name, 0)


def emit_malloc(g, ins):
    ret, size = ins.operands
    guard = g.guard(ins)
    n = g.read(ins, Reg(_param(g, ins, size, "malloc size")), "u64")
    r = g.fresh()
    g.emit(f"{r} = _malloc(C, {n}, {guard if guard is not None else 'None'})")
    if ret is not None:
        g.write(ins, Reg(_param(g, ins, ret, "malloc result")), r, "u64", guard)


def emit_free(g, ins):
    _, ptr = ins.operands
    guard = g.guard(ins)
    p = g.read(ins, Reg(_param(g, ins, ptr, "free pointer")), "u64")
    g.emit(f"_free(C, {p}, {guard if guard is not None else 'None'})")


FAMILY = family("heap", __name__)
FAMILY.declare("_malloc", emit=emit_malloc)
FAMILY.declare("_free", emit=emit_free)


def _lanes(C, guard) -> np.ndarray:
    """The lanes that call, in thread order."""
    active = C.active if C.active is not None else np.ones(C.n, bool)
    if guard is not None:
        active = active & (guard if isinstance(guard, np.ndarray) else bool(guard))
    return np.flatnonzero(np.broadcast_to(active, (C.n,)))


def malloc(C, size, guard):
    sizes = np.broadcast_to(np.asarray(size, np.uint64), (C.n,))
    out = np.zeros(C.n, np.uint64)
    heap = C.heap          # the context's (driver/limits.py); None: the engine driven without a driver
    if heap is not None:
        for lane in _lanes(C, guard):
            out[lane] = heap.malloc(int(sizes[lane]))
    return out


def free(C, ptr, guard):
    ptrs = np.broadcast_to(np.asarray(ptr, np.uint64), (C.n,))
    heap = C.heap
    for lane in _lanes(C, guard):
        address = int(ptrs[lane])
        if address and (heap is None or not heap.free(address)):
            raise KernelFault("CUDA_ERROR_ILLEGAL_ADDRESS",
                              f"free({address:#x}) in {C.name}: not a pointer malloc returned, or freed twice")


provide(_malloc=malloc, _free=free)

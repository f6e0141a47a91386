"""The address of a kernel parameter, and ld.param through it.

LLVM's NVPTX backend passes a struct by value as one .param and, when the struct is
indexed at run time, takes its address, `mov.b64 %rd1, k_param_0;`, and loads through the
register, `ld.param.u32 %r2, [%rd1+4];`. The address is the parameter's offset in the
kernel's parameter space (the same offset `ld.param [k_param_0+4]` reads); lanes may hold
different offsets, so the load gathers. Bytes past the parameter buffer read 0xFF, as an
ld.param wider than the last parameter does (C.param).
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.ir import Instruction


def parameter_offset(ck, name: str):
    """The offset of entry parameter `name` in the parameter space, or None."""
    p = next((p for p in ck.kernel.params if p.name == name), None)
    return None if p is None else p.offset


def param_gather(C, addrs, size: int, vec: int, dtype, guard, ins: Instruction):
    """Each active lane's `vec` values of `size` bytes at its parameter-space address."""
    active, any_active = C.active_with(guard)
    addrs = np.broadcast_to(np.asarray(addrs, np.uint64), (C.n,))
    out = np.zeros((C.n, vec), dtype)
    if not any_active:
        return out[:, 0] if vec == 1 else out
    lanes = np.arange(C.n) if active is None else np.flatnonzero(active)
    raw = bytes(C.params)
    for lane in lanes:
        a = int(addrs[lane])
        if a % (size * vec):
            raise KernelFault("CUDA_ERROR_MISALIGNED_ADDRESS",
                              f"misaligned ld.param of {size * vec} bytes at parameter "
                              f"address {a:#x}, thread {lane} (line {ins.line}: {ins.text})")
        chunk = raw[a:a + size * vec] if a < len(raw) else b""
        chunk += b"\xff" * (size * vec - len(chunk))
        out[lane] = np.frombuffer(chunk, dtype, vec)
    return out[:, 0] if vec == 1 else out

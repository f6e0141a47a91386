"""The address of a kernel parameter, ld.param through it, and its generic address.

LLVM's NVPTX backend passes a struct by value as one .param and, when the struct is
indexed at run time, takes its address, `mov.b64 %rd1, k_param_0;`, and loads through the
register, `ld.param.u32 %r2, [%rd1+4];`. The address is the parameter's offset in the
kernel's parameter space (the same offset `ld.param [k_param_0+4]` reads); lanes may hold
different offsets, so the load gathers. Bytes past the parameter buffer read 0xFF, as an
ld.param wider than the last parameter does (C.param).

PTX 7.7 (sm_70+) adds the generic address of a kernel parameter: `cvta.param.u64 %rd2,
%rd1` (or of the parameter's name; `cvta.to.param` goes back), which is what LLVM emits
for a `__grid_constant__` parameter whose address escapes, and what a TMA descriptor
passed by value is reached through. Here it is the parameter offset + PARAM_WINDOW
(addressing.py); generic loads there read the parameter buffer (0xFF past its end, up
to the 32 KiB parameter space of sm_70+), aligned to their size. Kernel parameters are
read-only (PTX ISA, "Kernel Function Parameters"; writing a __grid_constant__ parameter
is undefined): a generic store or atomic there faults (CUDA_ERROR_ILLEGAL_ADDRESS)
instead of changing the values other threads read.
"""
from __future__ import annotations

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.ir import Instruction
from .addressing import PARAM_WINDOW
from .registry import LaunchState, family

PARAM_SPACE_BYTES = 32768       # sm_70+: up to 32764 bytes of kernel parameters
_SHIFT = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}


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
        if a > PARAM_SPACE_BYTES - size * vec:
            raise KernelFault("CUDA_ERROR_ILLEGAL_ADDRESS",
                              f"ld.param of {size * vec} bytes at parameter address {a:#x}, "
                              f"outside the {PARAM_SPACE_BYTES}-byte parameter space (a generic "
                              f"address needs cvta.to.param), thread {lane} (line {ins.line}: "
                              f"{ins.text})")
        if a % (size * vec):
            raise KernelFault("CUDA_ERROR_MISALIGNED_ADDRESS",
                              f"misaligned ld.param of {size * vec} bytes at parameter "
                              f"address {a:#x}, thread {lane} (line {ins.line}: {ins.text})")
        chunk = raw[a:a + size * vec] if a < len(raw) else b""
        chunk += b"\xff" * (size * vec - len(chunk))
        out[lane] = np.frombuffer(chunk, dtype, vec)
    return out[:, 0] if vec == 1 else out


def _image(C):
    """The parameter space as generic loads read it: the launch's parameter bytes, then
    0xFF (what an ld.param past the last parameter reads) up to PARAM_SPACE_BYTES."""
    state = C.paramaddr_state
    if state.image is None:
        img = np.full(PARAM_SPACE_BYTES, 0xFF, np.uint8)
        raw = np.frombuffer(bytes(C.params), np.uint8)[:PARAM_SPACE_BYTES]
        img[:raw.size] = raw
        state.image = img
    return state.image


class ParamImage(LaunchState):
    """The parameter space of a launch as generic loads read it (made on the first)."""
    __slots__ = ("image",)

    def __init__(self, launch) -> None:
        self.image = None




def window_part(C, off, nbytes: int, size: int, iid: int, kind: str, active, sub):
    """(array, element indices of `size` bytes) of generic accesses at parameter offsets
    `off` (uint64, the lanes in `sub`); faults on a store or atomic (kernel parameters are
    read-only), a misaligned access, or one past the parameter space."""
    def fault(code, what, i, note):
        C.fault(code, what, nbytes, "generic", kind, int(off[i]) + PARAM_WINDOW, i, active,
                sub, iid, f" (parameter offset {int(off[i]):#x}: {note})")
    if kind != "load":
        fault("CUDA_ERROR_ILLEGAL_ADDRESS", "illegal", 0,
              "kernel parameters are read-only; writing one is undefined in the PTX ISA")
    misaligned = (off & np.uint64(nbytes - 1)) != 0
    if misaligned.any():
        fault("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned", int(np.argmax(misaligned)),
              "a kernel parameter")
    beyond = off > np.uint64(PARAM_SPACE_BYTES - nbytes)
    if beyond.any():
        fault("CUDA_ERROR_ILLEGAL_ADDRESS", "out-of-bounds", int(np.argmax(beyond)),
              f"the parameter space is {PARAM_SPACE_BYTES} bytes")
    return _image(C), off.astype(np.int64) >> _SHIFT[size]


# its emitters write forms of memops.py's rows (mov of a parameter, ld.param through a register)
FAMILY = family("paramaddr", __name__, state=ParamImage, hooks={"param_window": window_part})

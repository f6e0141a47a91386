"""Device-side `assert()`: `call.uni __assertfail, (param0, ..., param4);`.

nvcc (<assert.h>) and NVRTC (its builtin declaration) expand a failing assert(e) to
__assertfail(message, file, line, function, charSize); debug (-G) builds of CUDA headers
call it too. calls.py turns the call into the pseudo instruction `_assertfail` (the five
argument .param variables as operands); only threads whose assertion failed reach it.

A thread that reaches it aborts the launch, as on a GPU: the first such thread of the
block execution that gets there (lowest CTA, then lowest thread) is reported as the CUDA
runtime prints it,

    FILE:LINE: FUNCTION: block: [x,y,z], thread: [x,y,z] Assertion `MESSAGE` failed.

on stderr, and as the message of KernelFault("CUDA_ERROR_ASSERT"), which the driver
makes the context's sticky error. The strings are read through generic addresses, as
printf reads its format (printf.py).
"""
from __future__ import annotations

import sys

import numpy as np

from ..engine.faults import KernelFault
from ..ptx.errors import PtxError
from ..ptx.ir import Reg
from .calls import param_reg
from .printf import strings
from .registry import family, provide

_ARGS = ("message", "file", "line", "function", "charSize")


def emit_assertfail(g, ins) -> None:
    sizes = getattr(g.ck.kernel, "param_vars", {})
    exprs = []
    for what, s in zip(_ARGS, ins.operands):
        need = 4 if what == "line" else 8
        if s.name not in sizes or sizes[s.name] < need:
            raise PtxError(ins.line, f"__assertfail {what} argument {s.name} is not a "
                                     f"{need * 8}-bit .param: {ins.text}")
        exprs.append(g.read(ins, Reg(param_reg(s.name, 0)), "u64"))
    guard = g.guard(ins)
    iid = g.ns["_register_instruction"](ins)
    msg, file, line, func, _ = exprs
    g.emit(f"_assertfail(C, {msg}, {file}, {line}, {func}, {iid}, "
           f"{guard if guard is not None else 'None'})")


def assertfail(C, msg, file, line, func, iid, guard) -> None:
    n = C.n
    active = C.active if C.active is not None else np.ones(n, bool)
    if guard is not None:
        active = active & (guard if isinstance(guard, np.ndarray) else bool(guard))
    hits = np.flatnonzero(np.broadcast_to(active, (n,)))
    if hits.size == 0:
        return
    lane = int(hits[0])
    one = np.zeros(n, bool)
    one[lane] = True

    def text(addr) -> str:
        addr = np.broadcast_to(np.asarray(addr, np.uint64), (n,))
        if int(addr[lane]) == 0:
            return "(null)"
        return strings(C, addr, iid, one)[lane].decode("utf-8", errors="replace")

    line_no = int(np.broadcast_to(np.asarray(line, np.uint64), (n,))[lane]) & 0xFFFFFFFF
    batch_lane = lane if C.lanes is None else int(C.lanes[lane])
    cta = C.first_cta + batch_lane // C.padded
    t = batch_lane % C.padded
    gx, gy, _ = C.grid
    bx, by, _ = C.block
    report = (f"{text(file)}:{line_no}: {text(func)}: "
              f"block: [{cta % gx},{cta // gx % gy},{cta // (gx * gy)}], "
              f"thread: [{t % bx},{t // bx % by},{t // (bx * by)}] "
              f"Assertion `{text(msg)}` failed.")
    sys.stderr.write(report + "\n")
    sys.stderr.flush()
    raise KernelFault("CUDA_ERROR_ASSERT", report)


FAMILY = family("devassert", __name__)
FAMILY.declare("_assertfail", emit=emit_assertfail)
provide(_assertfail=assertfail)

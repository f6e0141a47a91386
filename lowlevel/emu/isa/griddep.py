"""Programmatic dependent launch (sm_90): `griddepcontrol.wait` and
`griddepcontrol.launch_dependents` (what cudaGridDependencySynchronize and
cudaTriggerProgrammaticLaunchCompletion compile to).

The emulated GPU runs the work of a stream one item after another: a kernel starts only
after the kernels before it have completed and their memory is visible, with or without
the PROGRAMMATIC_STREAM_SERIALIZATION launch attribute (driver/launch_ex.py). So the
prerequisite grids `wait` waits for are always complete already, and letting dependents
launch early changes nothing: both do nothing here, which is one of the orders a GPU may
run them in.
"""
from __future__ import annotations

from ..ptx.errors import PtxError
from ..ptx.ir import Instruction
from .operands import Mods
from .registry import family


def emit_griddepcontrol(g, ins: Instruction) -> None:
    m = Mods(ins)
    if m.take("wait", "launch_dependents") is None:
        raise PtxError(ins.line, f"griddepcontrol is .wait or .launch_dependents: {ins.text}")
    m.done()
    if ins.operands:
        raise PtxError(ins.line, f"griddepcontrol takes no operands: {ins.text}")
    g.guard(ins)


FAMILY = family("griddep", __name__)
FAMILY.declare("griddepcontrol", emit=emit_griddepcontrol)

__all__ = ["emit_griddepcontrol"]

"""isspacep: which state space's window a generic address lies in (addressing.py).

    isspacep.{global, const, local, shared{::cta, ::cluster}, param{::entry}}  p, a;

- .shared (= .shared::cta): the executing CTA's shared memory; .shared::cluster: that of
  any CTA of its cluster (cluster.py reads the rank in the address);
- .local, .param: their windows (a kernel parameter's generic address: paramaddr.py);
- .const: here .const variables live in the arena like .global ones (cvta.const is the
  identity), so an address is in the .const window when it lies inside one of the
  module's .const variables, which is where a generic address of constant memory can
  point; a pointer into a __constant__ variable that the host got from
  cuModuleGetGlobal is thus .const here too;
- .global: neither shared, local nor const (the ISA puts the .param window inside the
  .global one: both are true for a parameter's generic address).
"""
from __future__ import annotations

import numpy as np

from ..ptx.errors import PtxError
from ..ptx.ir import Instruction
from .addressing import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SPAN
from .addressing import symbol, take_space
from .operands import Mods, operands
from .registry import family, provide

_SPACES = ("global", "shared", "local", "const", "param", "param::entry")


def emit_isspacep(g, ins: Instruction) -> None:
    m = Mods(ins)
    space = take_space(ins, m, *_SPACES, cluster_ok=True)
    m.done()
    if space is None:
        raise PtxError(ins.line, f"isspacep needs a state space: {ins.text}")
    space = "param" if space == "param::entry" else space
    d, a = operands(ins, 2)
    x = g.read(ins, a, "u64")
    span = g.const(np.uint64(WINDOW_SPAN))

    def inside(base):
        lo = g.const(np.uint64(base))
        return f"(({x} >= {lo}) & ({x} < {lo} + {span}))"
    in_sh, in_lo = inside(SHARED_WINDOW), inside(LOCAL_WINDOW)
    in_const = _in_const(g, ins, x)
    expr = {"local": in_lo, "param": inside(PARAM_WINDOW), "const": in_const,
            "global": f"(~({in_sh} | {in_lo} | {in_const}))",
            "shared": f"_in_shared(C, {x}, False)",             # this CTA's (cluster.py)
            "shared::cluster": f"_in_shared(C, {x}, True)"}[space]
    g.write(ins, d, expr, "pred", g.guard(ins))


def _in_const(g, ins, x) -> str:
    """An expression: `x` lies inside one of the module's .const variables."""
    variables = [v for v in getattr(g.ck.kernel, "module_variables", {}).values()
                 if v.space == "const"]
    if not variables:
        return f"_in_ranges({x}, (), ())"
    starts = [symbol(g, ins, v.name)[0] for v in variables]      # bound when the module loads
    sizes = ", ".join(g.const(np.uint64(max(v.size, 1))) for v in variables)
    return f"_in_ranges({x}, ({', '.join(starts)},), ({sizes},))"


def in_ranges(x, starts, sizes):
    """Whether each address of `x` lies in one of [start, start + size)."""
    x = np.asarray(x, np.uint64)
    hit = np.zeros(x.shape, bool)
    for start, size in zip(starts, sizes):
        hit |= (x >= start) & (x - start < size)
    return hit


FAMILY = family("spacep", __name__)
FAMILY.declare("isspacep", emit=emit_isspacep)
provide(_in_ranges=in_ranges)

__all__ = ["emit_isspacep", "in_ranges"]

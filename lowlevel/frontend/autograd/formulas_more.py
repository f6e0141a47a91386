"""Backward formulas of math_ops.py's kernels (sin, cos, and the rounding ops, whose
derivative is zero almost everywhere, as PyTorch defines it); the decompositions there
need none: autograd records the ops they are made of."""
from .. import math_ops
from ..joining import zeros_like
from .formulas import formula


@formula("sin", save="inputs")
def sin(node, g):
    (x,) = node.saved()
    return (g * math_ops.cos(x),)


@formula("cos", save="inputs")
def cos(node, g):
    (x,) = node.saved()
    return (-(g * math_ops.sin(x)),)


def _zero(node, g):
    return (zeros_like(g),)


for _op in ("floor", "ceil", "round", "trunc"):
    formula(_op)(_zero)

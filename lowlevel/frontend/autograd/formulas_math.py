"""Backward formulas of the math ops (sqrt ... sigmoid, abs, minimum, pow) and of t[mask], registered into
formulas.FORMULAS like the others and written with the frontend's dispatched ops."""
from .. import ops
from ..shapes import broadcast_shapes
from .formulas import formula, sum_to


@formula("sqrt", save="output")
def sqrt(node, g):
    (out,) = node.saved()
    return (g * 0.5 / out,)                     # d sqrt(x) = 1 / (2 sqrt(x))


@formula("rsqrt", save="output")
def rsqrt(node, g):
    (out,) = node.saved()
    return (g * (out * out * out) * -0.5,)      # d x^-1/2 = -1/2 x^-3/2


@formula("log", save="inputs")
def log(node, g):
    (x,) = node.saved()
    return (g / x,)


@formula("log1p", save="inputs")
def log1p(node, g):
    (x,) = node.saved()
    return (g / (x + 1.0),)


@formula("expm1", save="output")
def expm1(node, g):
    (out,) = node.saved()
    return (g * (out + 1.0),)                   # d (e^x - 1) = e^x


@formula("tanh", save="output")
def tanh(node, g):
    (out,) = node.saved()
    return (g * (1.0 - out * out),)


@formula("sigmoid", save="output")
def sigmoid(node, g):
    (out,) = node.saved()
    return (g * out * (1.0 - out),)


@formula("abs", save="inputs")
def abs_(node, g):
    (x,) = node.saved()
    # sign(x) * g, with sign(0) = 0 as in PyTorch
    return (ops.where(x > 0.0, g, ops.where(x < 0.0, -g, 0.0)),)


@formula("minimum", save="inputs")
def minimum(node, g):
    # Ties share the gradient equally, as PyTorch's minimum does.
    a, b = node.saved()
    half = g * 0.5
    ga = ops.where(a < b, g, ops.where(a == b, half, 0.0))
    gb = ops.where(b < a, g, ops.where(a == b, half, 0.0))
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


@formula("pow", save="both")
def pow_(node, g):
    x, e, out = node.saved()
    gx = g * e * ops.pow(x, e - 1.0)            # d x^e / dx = e x^(e-1)
    ge = g * out * ops.log(x)                   # d x^e / de = x^e log x (NaN for x < 0, as in PyTorch)
    return sum_to(gx, x.shape), sum_to(ge, e.shape)


@formula("masked_select", save="inputs")
def masked_select(node, g):
    # t[mask] picked elements out of x (broadcast to the mask's shape): their gradients go
    # back to where they came from, zeros elsewhere, then summed back over the broadcast
    x, mask = node.saved()
    shape = broadcast_shapes("masked_select", x.shape, mask.shape)
    scattered = ops.masked_scatter(g, mask if mask.shape == shape else mask.expand(shape))
    return sum_to(scattered, x.shape), None

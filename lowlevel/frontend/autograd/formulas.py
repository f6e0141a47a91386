"""The backward formulas, one per differentiable op, written with the frontend's own ops so
that they dispatch like any call (a CUDA gradient runs on CUDA's kernels).

    @formula("mul", save="inputs")
    def mul(node, g):               # g: the gradient of the output
        a, b = node.saved()         # what `save` asked for: "inputs", "output", or nothing
        return sum_to(g * b, a.shape), sum_to(g * a, b.shape)

A formula returns one gradient (or None) per tensor argument of the op, in order; the
shapes of the inputs are in node.inputs_meta, the op's keyword arguments in node.meta.
Broadcasting in the forward is undone by summing the gradient back to each input's shape.
"""

from .. import ops
from ..creation import full, zeros

FORMULAS: dict = {}       # op -> (backward, save)
NOT_DIFFERENTIABLE = {"eq", "ne", "lt", "le", "gt", "ge"}


def formula(op: str, save: str | None = None):
    def register(fn):
        FORMULAS[op] = (fn, save)
        return fn
    return register


def sum_to(g, shape):
    """g summed over the dimensions that broadcasting added or stretched, to `shape`."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    for _ in range(lead):
        g = ops.sum(g, 0)
    for d, size in enumerate(shape):
        if size == 1 and g.shape[d] != 1:
            g = ops.sum(g, d, keepdim=True)
    return g


def _shape(node, i):
    return node.inputs_meta[i][0]


# ---- arithmetic -----------------------------------------------------------------------------------------
@formula("add")
def add(node, g):
    return sum_to(g, _shape(node, 0)), sum_to(g, _shape(node, 1))


@formula("sub")
def sub(node, g):
    return sum_to(g, _shape(node, 0)), sum_to(-g, _shape(node, 1))


@formula("mul", save="inputs")
def mul(node, g):
    a, b = node.saved()
    return sum_to(g * b, a.shape), sum_to(g * a, b.shape)


@formula("div", save="inputs")
def div(node, g):
    a, b = node.saved()
    return sum_to(g / b, a.shape), sum_to(-(g * a) / (b * b), b.shape)


@formula("maximum", save="inputs")
def maximum(node, g):
    # Ties share the gradient equally, as PyTorch's maximum does.
    a, b = node.saved()
    half = g * 0.5
    ga = ops.where(a > b, g, ops.where(a == b, half, 0.0))
    gb = ops.where(b > a, g, ops.where(a == b, half, 0.0))
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


@formula("where")
def where(node, g):
    cond = node.meta["args"][2]
    return (sum_to(ops.where(cond, g, 0.0), _shape(node, 0)), sum_to(ops.where(cond, 0.0, g), _shape(node, 1)),
            None)


@formula("neg")
def neg(node, g):
    return (-g,)


@formula("exp", save="output")
def exp(node, g):
    (out,) = node.saved()
    return (g * out,)


@formula("relu", save="output")
def relu(node, g):
    (out,) = node.saved()
    return (ops.where(out > 0.0, g, 0.0),)


# ---- reductions -----------------------------------------------------------------------------------------
def _unreduce(g, shape, dim, keepdim):
    """g (the shape of a reduction's result) broadcast back to the input's `shape`."""
    if dim is None:
        kept = [1] * len(shape)
    else:
        kept = [1 if d == dim else s for d, s in enumerate(shape)]
    if not keepdim or dim is None:
        g = g.reshape(kept)
    return g.expand(shape)


@formula("sum")
def sum_(node, g):
    kw = node.meta["kwargs"]
    return (_unreduce(g, _shape(node, 0), kw["dim"], kw["keepdim"]),)


@formula("mean")
def mean(node, g):
    kw = node.meta["kwargs"]
    shape = _shape(node, 0)
    count = _count(shape, kw["dim"])
    return (_unreduce(g, shape, kw["dim"], kw["keepdim"]) / float(count),)


def _count(shape, dim):
    n = 1
    for d, s in enumerate(shape):
        if dim is None or d == dim:
            n *= s
    return n


@formula("max", save="both")
def max_(node, g):
    # The gradient goes to every element equal to the maximum, shared equally among ties
    # (PyTorch's amax; lowlevel's max(dim) returns values only, so there is no index to use).
    x, out = node.saved()
    kw = node.meta["kwargs"]
    one = full((), 1.0, dtype=x.dtype, device=x.device)
    hit = ops.where(x == _unreduce(out, x.shape, kw["dim"], kw["keepdim"]), one, 0.0)
    ties = ops.sum(hit, kw["dim"], keepdim=True) if kw["dim"] is not None else ops.sum(hit)
    share = _unreduce(g, x.shape, kw["dim"], kw["keepdim"]) / _unreduce(ties, x.shape, kw["dim"], True)
    return (share * hit,)


@formula("softmax", save="output")
def softmax(node, g):
    (y,) = node.saved()
    dim = node.meta["kwargs"]["dim"]
    return (y * (g - ops.sum(g * y, dim, keepdim=True)),)


# ---- matmul -----------------------------------------------------------------------------------------------
@formula("matmul", save="inputs")
def matmul(node, g):
    """1-D operands become matrices (a row, b a column), the 2-D formulas run (batched when
    either is 3-D), a batch that an operand was broadcast over is summed, and each gradient
    takes its input's shape back."""
    a, b = node.saved()
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out_shape = ((a2.shape[0],) if a2.ndim == 3 else (b2.shape[0],) if b2.ndim == 3 else ()) + \
        (a2.shape[-2], b2.shape[-1])
    g2 = g.reshape(out_shape)
    ga = g2 @ b2.transpose(-1, -2)
    gb = a2.transpose(-1, -2) @ g2
    if ga.ndim > a2.ndim:
        ga = ops.sum(ga, 0)
    if gb.ndim > b2.ndim:
        gb = ops.sum(gb, 0)
    return ga.reshape(a.shape), gb.reshape(b.shape)


# ---- copies -------------------------------------------------------------------------------------------------
@formula("contiguous")
def contiguous(node, g):
    return (g,)


@formula("cast")
def cast(node, g):
    return (ops.cast(g, node.inputs_meta[0][1]),)


@formula("to_host")
def to_host(node, g):
    return (ops.to(g, node.inputs_meta[0][2]),)


@formula("to_device")
def to_device(node, g):
    return (ops.to(g, node.inputs_meta[0][2]),)


@formula("cat")
def cat(node, g):
    """Each input's gradient is its slice of g along dim."""
    dim, at, grads = node.meta["kwargs"]["dim"], 0, []
    for shape, _dtype, _device in node.inputs_meta:
        grads.append(g[(slice(None),) * dim + (slice(at, at + shape[dim]),)])
        at += shape[dim]
    return tuple(grads)


# ---- views (recorded by the view methods, not the dispatcher) ---------------------------------------------
def view_backward(how):
    """The formula of a view taken as `how` says (tensor.py's _view)."""
    kind = how[0]
    if kind == "reshape":
        return lambda node, g: (g.reshape(_shape(node, 0)),)
    if kind == "permute":
        inverse = [how[1].index(d) for d in range(len(how[1]))]
        return lambda node, g: (g.permute(inverse),)
    if kind == "expand":
        return lambda node, g: (sum_to(g, _shape(node, 0)),)
    if kind == "index":
        def index_backward(node, g):
            shape, dtype, device = node.inputs_meta[0]
            full = zeros(shape, dtype=dtype, device=device)
            full[how[1]] = g
            return (full,)
        return index_backward
    raise NotImplementedError(f"autograd: no backward for the view {how!r}")

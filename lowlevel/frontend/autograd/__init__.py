"""Autograd, part of the frontend (layer 1): recording ops on tensors that require grad,
and running their backward formulas.

    mode.py       no_grad, enable_grad, is_grad_enabled (per thread)
    graph.py      Node, saved tensors with version checks, AccumulateGrad, the backward pass
    formulas.py   one backward formula per differentiable op, written with the frontend ops
    formulas_math.py  those of sqrt ... sigmoid, abs, minimum, pow, t[mask]
    formulas_index.py  those of gather, scatter, scatter_add, cumsum, cumprod (and so of
                  max/min(dim), sort, topk, prod, t[idx] built on them)
    formulas_more.py  those of math_ops.py's kernels: sin, cos, floor ceil round trunc
    record.py     the Autograd dispatch key's kernel (a fallback for every op), the view
                  hook, the in-place hooks, and Tensor.backward / detach / requires_grad_
    views.py      in-place ops on views: the base's CopySlices node, stale views made again

It sits in the frontend because its formulas are frontend ops (as PyTorch's derivatives
are ATen ops): a gradient is computed by dispatched calls, on the device of the tensors.
It imports the dispatcher (below it) and the rest of the frontend, never a backend; the
dispatcher knows only the Autograd key and a tensor's `requires_grad` flag.
"""
from .mode import enable_grad, is_grad_enabled, no_grad
from .record import rebase_history, records_inplace

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "rebase_history", "records_inplace"]

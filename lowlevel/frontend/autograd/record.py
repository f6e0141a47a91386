"""Recording: the Autograd key's kernel, the view hook, the in-place hooks, and the Tensor
methods of autograd (requires_grad_, detach, backward, is_leaf).

The Autograd kernel is a fallback (it serves every op): when grad mode is on and an
argument requires grad, it redispatches below itself with Autograd excluded on this thread
(so whatever the backend kernel calls is not recorded), then gives the result a node with
the op's formula. Otherwise it only redispatches, as PyTorch's autograd kernels do.
"""
from ...dispatch import Autograd, exclude, redispatch, register_fallback
from .. import tensor as tensor_module
from ..creation import ones
from ..ops import clone
from ..tensor import Tensor
from . import formulas_index, formulas_math, formulas_more  # noqa: F401  (register the math and indexing ops' formulas)
from . import views
from .formulas import FORMULAS, NOT_DIFFERENTIABLE, view_backward
from .graph import Node, edge_of, run_backward
from .mode import recording


def _not_implemented(op):
    def backward(node, g):
        raise RuntimeError(f"the derivative for '{op}' is not implemented.")
    return backward


def _node_name(op: str) -> str:
    return "".join(part.capitalize() for part in op.split("_")) + "Backward"


def autograd_kernel(op: str, below, args, kwargs):
    inputs = [a for a in args if isinstance(a, Tensor)]
    if not recording() or op in NOT_DIFFERENTIABLE or not any(t.requires_grad for t in inputs):
        return redispatch(op, below, *args, **kwargs)
    with exclude(Autograd):
        out = redispatch(op, below, *args, **kwargs)
    backward, save = FORMULAS.get(op, (_not_implemented(op), None))
    saved = {"inputs": inputs, "output": [out], "both": [*inputs, out]}.get(save, [])
    out.grad_fn = Node(_node_name(op), backward, inputs, saved, meta={"kwargs": kwargs, "args": args})
    out.requires_grad = True
    out.view_base = None          # to the caller a result is a tensor of its own, never a view
    return out


register_fallback(Autograd, autograd_kernel)


def record_view(base: Tensor, view: Tensor, how) -> None:
    """tensor.py's view_hook: a view of a tensor that requires grad gets a view node."""
    if not recording() or how is None:
        return
    node = Node(f"{how[0].capitalize()}ViewBackward", view_backward(how), [base])
    node.is_view = True
    view.grad_fn, view.requires_grad = node, True
    view.base_grad_fn = view.view_base.grad_fn       # views.refresh: has the base changed since?


tensor_module.view_hook = record_view


# ---- in-place ops (frontend/inplace.py calls these) --------------------------------------------------
def records_inplace(dst: Tensor, other) -> bool:
    """Whether an in-place op on dst (with `other`) must be recorded; refuses what cannot be."""
    if not recording() or not (dst.requires_grad or getattr(other, "requires_grad", False)):
        return False
    if dst.requires_grad and dst.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = dst.view_base
    if base is not None and base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    return True


def rebase_history(dst: Tensor, values: Tensor) -> None:
    """dst now holds `values`: it takes their history (the in-place op's node); a view's base
    takes a CopySlices node (views.py), and the view a view of that."""
    if values.requires_grad and (values.grad_fn is None or values is dst):
        values = clone(values)                       # a node of its own, leading to the leaf
    if dst.view_base is not None:
        views.copy_slices(dst.view_base, dst, values)
        return
    if values.shape != dst.shape:
        values = values.expand(dst.shape)
    dst.grad_fn, dst.requires_grad = values.grad_fn, values.requires_grad


# ---- the Tensor methods -------------------------------------------------------------------------------
def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
    if self.grad_fn is not None and not requires_grad:
        raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                           "computed variable in a subgraph that doesn't require differentiation use "
                           "var_no_grad = var.detach().")
    if requires_grad and not self.dtype.is_float:
        raise RuntimeError(f"only Tensors of floating point dtype can require gradients, got {self.dtype.name}")
    self.requires_grad = bool(requires_grad)
    return self


def detach(self: Tensor) -> Tensor:
    """The same storage (and version counter) without history: a new leaf not requiring grad."""
    return Tensor(self.storage, self.shape, self.strides, self.offset, self.dtype)


def backward(self: Tensor, gradient=None, retain_graph=None, create_graph=False) -> None:
    """Gradients of self with respect to every leaf that requires grad, summed into .grad.
    create_graph records the backward's own ops (the .grad tensors then have a history, for
    a double backward); it implies retain_graph unless that is given, as in PyTorch."""
    if not self.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if self.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        gradient = ones(self.shape, dtype=self.dtype, device=self.device)
    elif gradient.shape != self.shape:
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {list(gradient.shape)} and "
                           f"output[0] has a shape of {list(self.shape)}.")
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(edge_of(self), gradient, bool(retain_graph), bool(create_graph))


for _name, _fn in {"requires_grad_": requires_grad_, "detach": detach, "backward": backward}.items():
    setattr(Tensor, _name, _fn)
Tensor.is_leaf = property(lambda self: self.grad_fn is None)

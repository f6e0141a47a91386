"""In-place ops on views while gradients are recorded, as PyTorch does them.

A view shares its base's storage and version counter, so writing into the view changes the
base: the base's history must change too. After `v.mul_(2)` on a view v of base (or
`base[0] = x`), base.grad_fn becomes a CopySlices node with two inputs, the base's old history
and the new values: its backward sends the gradient of the view's region to the values, and
the rest (the region zeroed: those old values were overwritten) to the old history.

Every view remembers its base's node when it was made (`base_grad_fn`). When the base's
history changes (an in-place op on the base, or on any of its views), a view's own node is
stale: edge_of (graph.py) asks `refresh` for the view's edge, which makes the view's node
again, from the base's current history, as an as-strided view of it (its shape, strides and
offset in the shared storage). PyTorch regenerates a view's grad_fn the same way.

Not done: a view made while its base did not require grad keeps requires_grad False when an
in-place op later gives the base a history (PyTorch's view would take part).
"""
from ..creation import empty
from ..tensor import Tensor
from . import graph
from .formulas import sum_to
from .graph import Node
from .mode import is_grad_enabled


def _no_double_backward(name: str) -> None:
    # these backwards write into raw layouts of a fresh storage, which a recorded graph
    # would not see: refuse create_graph through them rather than differentiate wrongly
    if is_grad_enabled():
        raise NotImplementedError(f"{name}: create_graph=True (double backward) through an in-place operation on "
                                  f"a view is not supported by lowlevel's autograd")


class _Layout:
    """Where a tensor's elements sit in its storage: enough to lay out a gradient the same way."""

    __slots__ = ("shape", "strides", "offset", "dtype", "device", "storage_elements")

    def __init__(self, t: Tensor):
        self.shape, self.strides, self.offset = t.shape, t.strides, t.offset
        self.dtype, self.device = t.dtype, t.device
        self.storage_elements = t.storage.nbytes // t.dtype.itemsize

    def fresh(self) -> Tensor:
        """An uninitialised tensor with this layout, in storage of its own."""
        flat = empty((max(1, self.storage_elements),), dtype=self.dtype, device=self.device)
        return Tensor(flat.storage, self.shape, self.strides, self.offset, self.dtype)

    def over(self, t: Tensor) -> Tensor:
        """This layout over t's storage (t laid out as the base this layout's view came from)."""
        return Tensor(t.storage, self.shape, self.strides, self.offset, self.dtype)


def _self_overlapping(t: Tensor) -> bool:
    return t.numel() > 0 and any(st == 0 and s > 1 for s, st in zip(t.shape, t.strides))


def copy_slices(base: Tensor, view: Tensor, values: Tensor) -> None:
    """base's history after `values` (broadcastable to the view) were written into `view`."""
    base_layout, view_layout, values_shape = _Layout(base), _Layout(view), values.shape

    def backward(node, g):
        _no_double_backward("CopySlices")
        result = base_layout.fresh()
        result.copy_(g)                                  # g laid out as base is
        region = view_layout.over(result)
        grad_values = sum_to(region.clone(), values_shape)
        region.zero_()                                   # overwritten: no gradient to the old values
        return result, grad_values

    node = Node("CopySlices", backward, [base, values])
    base.grad_fn, base.requires_grad = node, True
    refresh(view)


def refresh(view: Tensor) -> None:
    """Make the view's node again when its base's history changed since it was made."""
    base = view.view_base
    if base is None or not base.requires_grad or getattr(view, "base_grad_fn", None) is base.grad_fn:
        return
    if _self_overlapping(view):
        raise NotImplementedError("the base of an expanded view was modified in place while gradients are "
                                  "recorded; lowlevel cannot regenerate the view's history: expand again after "
                                  "the in-place operation")
    base_layout, view_layout = _Layout(base), _Layout(view)

    def backward(node, g):
        _no_double_backward("AsStridedBackward")
        result = base_layout.fresh()
        result.zero_()
        view_layout.over(result).copy_(g)
        return (result,)

    view.grad_fn = Node("AsStridedBackward", backward, [base])
    view.grad_fn.is_view = True
    view.requires_grad, view.base_grad_fn = True, base.grad_fn


graph.refresh_view = refresh

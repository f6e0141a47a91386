"""x[idx] and x[idx] = v with integer tensors (or lists) among the indices, as PyTorch's:

    x[idx]          rows of x, in idx's shape: (*idx.shape, *x.shape[1:])
    x[:, idx]       the same along dim 1; x[i, j] the elements at (i[k], j[k]) (broadcast)
    x[[0, 2], :]    a list is an index tensor; a bool tensor among other indices is its
                    nonzero() positions; negative indices count from the end

How: the ints, slices and None are applied first (a view); the indexed dims of that view
are moved first and merged into one, and each index tuple becomes its flat position there
(int64 tensor arithmetic on the device); an index_select of those positions gives the
elements. The indexed dims of the result replace the indexed ones where those were
adjacent, else they come first (numpy's and PyTorch's rule). Assignment writes through
the same positions with scatter, then copies into the view of x: x changes in place.
Every index is checked against its size first (IndexError naming both).
"""
import math

from ..dispatch import call
from . import dtypes as dt
from . import ops
from .creation import full, tensor
from .indexing import check_bounds, index_select, nonzero
from .inplace import copy_
from .inplace import setitem as basic_setitem
from .shapes import broadcast_shapes
from .tensor import Tensor

basic_getitem = Tensor.__getitem__          # ops.py's: ints, slices, None, ..., and one bool mask


def wants_advanced(index) -> bool:
    """Whether `index` has an integer tensor or a list in it (or a bool tensor among others)."""
    items = index if isinstance(index, tuple) else (index,)
    for i in items:
        if isinstance(i, list) or (isinstance(i, Tensor) and (i.dtype.name != "bool" or len(items) > 1)):
            return True
    return False


def _entries(x: Tensor, index) -> list:
    """The index as a list of slices, None and int64 index tensors (one per dim it indexes);
    Python ints stay ints (applied first, as PyTorch's select)."""
    items = list(index) if isinstance(index, tuple) else [index]
    out = []
    for i in items:
        if isinstance(i, list):
            i = tensor(i, device=x.device) if i else tensor([], dtype=dt.int64, device=x.device)
        if isinstance(i, Tensor):
            if i.dtype.name == "bool":
                out += list(nonzero(i, as_tuple=True))
                continue
            if i.dtype.is_float:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            out.append(i.to(dt.int64))
        else:
            out.append(i)
    if any(i is Ellipsis for i in out):
        at = out.index(Ellipsis)
        used = sum(1 for i in out if i is not None and i is not Ellipsis)
        out[at:at + 1] = [slice(None)] * (x.ndim - used)
    return out


def _plan(x: Tensor, index):
    """(the view of x the ints, slices and None give, the view dims the tensors index, the
    tensors broadcast and wrapped into range, their broadcast shape)."""
    entries = _entries(x, index)
    basic, positions, tensors, at, dim = [], [], [], 0, 0
    for e in entries:
        if isinstance(e, Tensor):
            basic.append(slice(None))
            positions.append(at)
            tensors.append(e)
        elif e is not None and not isinstance(e, slice):
            basic.append(e)
            dim += 1
            continue
        else:
            basic.append(e)
        at += 1
        dim += e is not None
    if dim > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    view = basic_getitem(x, tuple(basic))
    shape = ()
    for t in tensors:
        shape = broadcast_shapes("index", shape, t.shape)
    wrapped = []
    for p, t in zip(positions, tensors):
        size = view.shape[p]
        check_bounds("index", t, size, p, negative=True)
        wrapped.append(ops.where(ops.lt(t, 0), t + size, t) if t.numel() else t)
    return view, positions, wrapped, tuple(shape)


def _flat_positions(view: Tensor, positions, tensors, shape) -> Tensor:
    """The flat position of each index tuple in the merged indexed dims (int64, 1-D)."""
    flat, scale = None, 1
    for p, t in reversed(list(zip(positions, tensors))):
        term = t if scale == 1 else t * scale
        flat = term if flat is None else flat + term
        scale *= view.shape[p]
    return flat.expand(shape).reshape(-1) if flat.shape != shape else flat.reshape(-1)


def _front(view: Tensor, positions) -> tuple[Tensor, list]:
    """The view with its indexed dims first, and the other dims in order."""
    rest = [d for d in range(view.ndim) if d not in positions]
    return view.permute(list(positions) + rest), rest


def _adjacent_at(positions) -> int:
    """Where the indexed dims go in the result: their place if adjacent, else 0."""
    return positions[0] if positions == list(range(positions[0], positions[0] + len(positions))) else 0


def getitem(self: Tensor, index) -> Tensor:
    if not wants_advanced(index):
        return basic_getitem(self, index)
    view, positions, tensors, shape = _plan(self, index)
    front, rest = _front(view, positions)
    rest_shape = [view.shape[d] for d in rest]
    merged = front.reshape(math.prod(view.shape[p] for p in positions), *rest_shape)
    picked = index_select(merged, 0, _flat_positions(view, positions, tensors, shape))
    picked = picked.reshape(*shape, *rest_shape)
    at, nb = _adjacent_at(positions), len(shape)
    if at:
        order = list(range(nb, nb + at)) + list(range(nb)) + list(range(nb + at, picked.ndim))
        picked = picked.permute(order)
    return picked


def setitem(self: Tensor, index, value) -> None:
    if not wants_advanced(index):
        basic_setitem(self, index, value)
        return
    view, positions, tensors, shape = _plan(self, index)
    front, rest = _front(view, positions)
    rest_shape = [view.shape[d] for d in rest]
    nb, at = len(shape), _adjacent_at(positions)
    result_shape = list(shape) + rest_shape
    if at:
        result_shape = rest_shape[:at] + list(shape) + rest_shape[at:]
    value = value.to(self.dtype) if isinstance(value, Tensor) else full((), value, dtype=self.dtype, device=self.device)
    value = value.expand(result_shape)
    if at:              # back to the order (*shape, *rest) the positions are in
        value = value.permute(list(range(at, at + nb)) + list(range(at)) + list(range(at + nb, len(result_shape))))
    flat = _flat_positions(view, positions, tensors, shape)
    count = flat.shape[0]
    merged = front.reshape(math.prod(view.shape[p] for p in positions), *rest_shape)
    spread = flat.reshape(count, *([1] * len(rest_shape))).expand(count, *rest_shape)
    written = call("scatter", merged, spread, value.reshape(count, *rest_shape), dim=0)
    copy_(front, written.reshape(front.shape))


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem

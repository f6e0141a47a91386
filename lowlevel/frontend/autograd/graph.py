"""The recorded graph and the backward pass.

A Node is one recorded op: its backward formula, the tensors the formula needs (saved with
the version of their storage at the time), facts about the inputs (shapes, dtypes,
devices), and one edge per tensor input: the input's own node, an AccumulateGrad for a leaf
that requires grad, or None. backward() runs the nodes in reverse topological order from
the output, summing the gradients that meet at a node before running it, and accumulates
into the leaves' .grad. Unless retain_graph, the saved tensors are freed on the way.
"""
import weakref

from .mode import enable_grad, no_grad

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
         "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
         "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
         "or if you need to access saved tensors after calling backward.")


class SavedTensor:
    """A tensor a formula needs, with its storage's version when it was saved."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.version = tensor.storage.version

    def unpack(self, node):
        t = self.tensor
        if t is None:
            raise RuntimeError(FREED)
        if t.storage.version != self.version:
            # PyTorch's message, with lowlevel's names for the type.
            raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                               f"inplace operation: [{t.dtype.name} {list(t.shape)}], which is saved by "
                               f"{node.name}, is at version {t.storage.version}; expected version "
                               f"{self.version} instead.")
        return t


class Node:
    """One recorded op. `backward(node, grad)` returns one gradient (or None) per input."""

    is_view = False
    retained = ()           # weak references to the output, where retain_grad() asked for its .grad

    def __init__(self, name: str, backward, inputs, saved=(), meta=None):
        self.name = name
        self.backward = backward
        self.next_functions = tuple(edge_of(t) for t in inputs)
        self.inputs_meta = tuple((t.shape, t.dtype, t.device) for t in inputs)
        self.saved_tensors_ = [SavedTensor(t) for t in saved]
        self.meta = meta or {}

    def saved(self):
        """The saved tensors, checked: freed by an earlier backward, or modified in place since."""
        return [s.unpack(self) for s in self.saved_tensors_]

    def release(self):
        for s in self.saved_tensors_:
            s.tensor = None

    def __repr__(self):
        return f"<{self.name}>"


class AccumulateGrad:
    """Where a leaf's gradient goes: summed into leaf.grad."""

    name = "AccumulateGrad"
    next_functions = ()
    retained = ()           # a leaf keeps its gradient in .grad itself

    def __init__(self, leaf):
        self.leaf = leaf

    def accumulate(self, grad):
        leaf = self.leaf
        if grad.shape != leaf.shape:
            raise RuntimeError(f"AccumulateGrad: gradient of shape {grad.shape} for a leaf of shape {leaf.shape}")
        # A gradient may be an expanded view or another tensor's storage: keep a copy of its own.
        leaf.grad = grad.clone() if leaf.grad is None else leaf.grad + grad

    def release(self):
        pass

    def __repr__(self):
        return "<AccumulateGrad>"


# Set by views.py: makes a view's node again when its base's history changed in place.
refresh_view = None


def edge_of(t):
    """Where a gradient for input t goes: its node, its leaf accumulator, or nowhere."""
    if not t.requires_grad:
        return None
    if t.view_base is not None and refresh_view is not None:
        refresh_view(t)
    if t.grad_fn is not None:
        return t.grad_fn
    acc = getattr(t, "grad_accumulator", None)
    if acc is None:
        acc = t.grad_accumulator = AccumulateGrad(t)
    return acc


def retain_grad_at(node, tensor) -> None:
    """Let backward keep the gradient that reaches `node` in tensor.grad (tensor: its output)."""
    node.retained = (*node.retained, weakref.ref(tensor))


def keep_grad(node, g) -> None:
    for ref in node.retained:
        t = ref()
        if t is not None:
            t.grad = g.detach() if t.grad is None else t.grad + g.detach()


def _dependencies(root) -> dict:
    """For each node reachable from root, how many edges lead into it."""
    deps, seen, stack = {root: 0}, {root}, [root]
    while stack:
        node = stack.pop()
        for nxt in node.next_functions:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return deps


def run_backward(root, grad, retain_graph: bool, create_graph: bool = False) -> None:
    """Send `grad` back from the node `root` to every leaf it reaches. With create_graph the
    formulas (ordinary dispatched ops) are recorded too, so the gradients have a history of
    their own and can be differentiated again (double backward)."""
    deps = _dependencies(root)
    pending = {root: grad}
    ready = [root]
    with enable_grad() if create_graph else no_grad():
        while ready:
            node = ready.pop()
            g = pending.pop(node, None)
            if node.retained and g is not None:
                keep_grad(node, g)
            if isinstance(node, AccumulateGrad):
                if g is not None:
                    node.accumulate(g)
                continue
            grads = node.backward(node, g) if g is not None else (None,) * len(node.next_functions)
            if not retain_graph:
                node.release()
            for nxt, gi in zip(node.next_functions, grads):
                if nxt is None:
                    continue
                if gi is not None:
                    pending[nxt] = gi if nxt not in pending else pending[nxt] + gi
                deps[nxt] -= 1
                if deps[nxt] == 0:
                    ready.append(nxt)

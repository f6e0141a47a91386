"""Shape arithmetic shared by the frontend and the backends: contiguous strides, the shape
arguments of views, -1 inference, and broadcasting (which names both shapes when it fails).
"""
import math

from .errors import ShapeError


def contiguous_strides(shape) -> tuple:
    """Row-major strides, in elements, of a tensor of `shape`."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def shape_args(args) -> list:
    """The dimensions of f(2, 3) and of f((2, 3)) alike."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


def infer_shape(shape, numel: int) -> tuple:
    """`shape` with its -1 (at most one) filled in, checked against `numel` elements."""
    if shape.count(-1) > 1:
        raise ShapeError("only one dimension can be -1")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"shape {tuple(shape)} is invalid for {numel} elements")
        shape = [numel // known if s == -1 else s for s in shape]
    if math.prod(shape) != numel:
        raise ShapeError(f"shape {tuple(shape)} is invalid for {numel} elements")
    return tuple(shape)


def broadcast_shapes(op: str, a: tuple, b: tuple) -> tuple:
    """The shape `a` and `b` broadcast to, as numpy's rules give it; `op` names the error."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ShapeError(f"{op}: shapes {tuple(a)} and {tuple(b)} do not broadcast "
                             f"(dimension -{i}: {x} vs {y})")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))

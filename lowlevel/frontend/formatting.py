"""Layer 1: repr() of a tensor, as PyTorch 2.x prints it.

    tensor([1.5000, 2.0000])         floats with 4 decimals, padded to one width
    tensor([1., 2.])                 floats that are all whole numbers
    tensor([1.0000e-05, 1.0000e+03]) scientific where the magnitudes span more than 1000x,
                                     or reach 1e8, or fall below 1e-4
    tensor([1, 2], dtype=lowlevel.int32, device='cuda:0', requires_grad=True)

The suffixes follow: a dtype other than the defaults (float32, int64, bool), the device
when it is not the CPU, grad_fn=<...> for a result of recorded ops or requires_grad=True
for a leaf. More than 1000 elements are summarised: the first and last 3 along each
dimension, with "..." between. Lines wrap at 80 characters as PyTorch's do.
"""
import math

import numpy as np

from ..cuda.graph import refuse_while_capturing
from .tensor import Tensor

THRESHOLD, EDGE_ITEMS, LINE_WIDTH, PRECISION = 1000, 3, 80, 4
DEFAULT_DTYPES = ("float32", "int64", "bool")


class _Formatter:
    """One width and one style for every element shown (PyTorch's _Formatter)."""

    def __init__(self, values: np.ndarray, floating: bool):
        self.floating, self.int_mode, self.sci_mode = floating, True, False
        if not floating:
            self.width = max((len(str(int(v))) for v in values.reshape(-1)), default=1)
            return
        finite = values[np.isfinite(values)]
        signed = finite[finite != 0].astype(np.float64)
        nonzero = np.abs(signed)
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if nonzero.size:
            low, high = nonzero.min(), nonzero.max()
            self.sci_mode = high / low > 1000.0 or high > 1e8 or (low < 1e-4 and not self.int_mode)
        # the width of the nonzero finite values only: a nan, inf or 0 wider than them sticks out
        self.width = max((len(self.text(v)) for v in signed), default=1)

    def text(self, v) -> str:
        if not self.floating:
            return str(int(v))
        v = float(v)
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if self.sci_mode:
            return f"{v:.{PRECISION}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{PRECISION}f}"

    def format(self, v) -> str:
        return self.text(v).rjust(self.width)


def _shown(values: np.ndarray, summarize: bool) -> np.ndarray:
    """The elements that will be printed (the edges of each dimension when summarising)."""
    if not summarize or values.ndim == 0:
        return values
    for d in range(values.ndim):
        if values.shape[d] > 2 * EDGE_ITEMS:
            index = list(range(EDGE_ITEMS)) + list(range(values.shape[d] - EDGE_ITEMS, values.shape[d]))
            values = np.take(values, index, axis=d)
    return values


def _vector(values, fmt: _Formatter, indent: int, summarize: bool) -> str:
    texts = [fmt.format(v) for v in values]
    if summarize and len(values) > 2 * EDGE_ITEMS:
        texts = texts[:EDGE_ITEMS] + [" ..."] + texts[-EDGE_ITEMS:]
    per_line = max(1, math.floor((LINE_WIDTH - indent) / (fmt.width + 2)))
    lines = [", ".join(texts[i:i + per_line]) for i in range(0, len(texts), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, fmt: _Formatter, indent: int, summarize: bool) -> str:
    if values.ndim == 1:
        return _vector(values, fmt, indent, summarize)
    rows = [_nested(values[i], fmt, indent + 1, summarize) for i in range(values.shape[0])]
    if summarize and values.shape[0] > 2 * EDGE_ITEMS:
        rows = rows[:EDGE_ITEMS] + ["..."] + rows[-EDGE_ITEMS:]
    separator = "," + "\n" * (values.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(rows) + "]"


def _suffixes(t: Tensor) -> list:
    suffixes = []
    if t.device.type != "cpu":
        index = t.device.index if t.device.index is not None else 0
        suffixes.append(f"device='{t.device.type}:{index}'")
    if t.numel() == 0 and t.shape != (0,):
        suffixes.append(f"size={tuple(t.shape)}")
    if t.dtype.name not in DEFAULT_DTYPES:
        suffixes.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        # PyTorch numbers its nodes by overload (MulBackward0); lowlevel has one per op: 0
        name = t.grad_fn.name
        suffixes.append(f"grad_fn=<{name}0>" if name.endswith("Backward") else f"grad_fn=<{name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return suffixes


def tensor_repr(t: Tensor) -> str:
    if t.device.type == "cuda":
        refuse_while_capturing("repr() (print) of a tensor")
    values = t.detach().numpy()
    floating = t.dtype.is_float
    if t.dtype.name == "bool":
        body = repr(bool(values)) if values.ndim == 0 else _nested_bool(values, t.numel() > THRESHOLD)
    elif values.size == 0:
        body = "[]"
    else:
        summarize = values.size > THRESHOLD
        fmt = _Formatter(_shown(values, summarize), floating)
        body = fmt.text(values.item()) if values.ndim == 0 else _nested(values, fmt, len("tensor("), summarize)
    return "tensor(" + ", ".join([body, *_suffixes(t)]) + ")"


def _nested_bool(values, summarize: bool) -> str:
    fmt = _Formatter(np.zeros(1), False)
    fmt.width = 4 if values.all() else 5        # " True" beside "False"
    fmt.format = lambda v: ("True" if v else "False").rjust(fmt.width)
    return _nested(values, fmt, len("tensor("), summarize)


Tensor.__repr__ = tensor_repr

"""The CPU backend: every op through numpy, on strided views of host storage.

bfloat16 values are widened to float32 for the arithmetic and rounded back on the way out.
"""
import contextvars
import threading

import numpy as np

from ..dispatch import CPU, register_kernel
from ..frontend import dtypes as dt
from ..frontend.creation import from_numpy_values
from ..frontend.shapes import contiguous_strides
from ..frontend.tensor import Tensor


def values(t: Tensor) -> np.ndarray:
    return t.dtype.to_numpy_values(t.host_view())


def result(x: np.ndarray, like: Tensor, dtype=None) -> Tensor:
    return from_numpy_values(np.asarray(x), dtype or like.dtype, like.device)


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
           "minimum": np.minimum, "pow": np.power}
_UNARY = {"neg": np.negative, "exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "log": np.log,
          "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
          "abs": np.abs,
          "relu": lambda v: np.where((v > 0) | np.isnan(v), v, v.dtype.type(0))}
# relu(-0.0) is +0.0 on every backend and dtype, as PyTorch's CUDA relu (clamp_min(x, 0) =
# fmaxf(x, 0), which orders -0.0 below +0.0); numpy.maximum(-0.0, 0) would keep -0.0


_direct: dict = {}          # (ufunc, dtype, shape) -> (strides, nbytes) of the output, or None


def _direct_output(fn, x: Tensor):
    """(strides, nbytes) of a new contiguous tensor of x's shape and dtype that `fn` (a
    ufunc of operands of x's dtype) may write into directly, or None: when numpy computes
    `fn` in x's dtype itself (checked once, by one element), writing there gives the values
    result() would have copied there. bfloat16 and bool are never written directly."""
    key = (fn, x.dtype, x.shape)
    found = _direct.get(key, False)
    if found is False:
        found, dtype = None, x.dtype
        if isinstance(fn, np.ufunc) and dtype is not dt.bfloat16 and dtype is not dt.bool_:
            with np.errstate(all="ignore"):
                answer = fn(*[np.ones(1, dtype.storage)] * fn.nin)
            if answer.dtype == dtype.storage:
                found = (contiguous_strides(x.shape), x.numel() * dtype.itemsize)
        if len(_direct) >= 4096:
            _direct.clear()
        _direct[key] = found
    return found


@np.errstate(all="ignore")          # as a decorator: the error state set per call, thread-safely
def _ufunc_into_quietly(fn, out: np.ndarray, *operands) -> None:
    fn(*operands, out=out)


class _Quiet(threading.local):
    """Per thread: a copy of the thread's context variables made under
    np.errstate(all="ignore") (numpy keeps its error state in a context variable), so that
    a call runs in it with Context.run (0.05 us) instead of setting and resetting the state
    (0.7 us). A Context may be entered by one thread at a time and not twice: one per
    thread, and a nested call (a finalizer running an op inside the ufunc), which
    Context.run refuses with a RuntimeError, takes the decorator's way."""
    context = None


_quiet = _Quiet()


def _quiet_context() -> contextvars.Context:
    with np.errstate(all="ignore"):
        context = _quiet.context = contextvars.copy_context()
    return context


def ufunc_into(fn, out: np.ndarray, *operands) -> None:
    """fn(*operands, out=out) with numpy's floating-point warnings off (IEEE results)."""
    context = _quiet.context
    if context is None:
        context = _quiet_context()
    try:
        context.run(fn, *operands, out=out)
    except RuntimeError:
        # Context.run refused a context entered already (a nested call) before running fn;
        # the decorator's way runs fn (and raises any RuntimeError of fn's own again)
        _ufunc_into_quietly(fn, out, *operands)


def _register_elementwise():
    # A repeat call reads the plan in _direct itself (the miss computes it), and the host
    # views made already (host_view_cache, which new_host sets for its result) directly:
    # each frame less is ~0.05 us of a ~3 us op.
    for name, fn in _BINARY.items():
        def kernel(a, b, fn=fn):
            # the operand of the result's shape: either, if both have it, or the other of a
            # 0-d one (a number's constant: x * 2.0, 2.0 - x), which numpy broadcasts
            like = a if a.shape == b.shape or not b.shape else (b if not a.shape else None)
            if like is not None:
                layout = _direct.get((fn, like.dtype, like.shape), False)
                if layout is False:
                    layout = _direct_output(fn, like)
                if layout is not None:
                    out = Tensor.new_host(like.shape, layout[0], layout[1], like.dtype, like.device)
                    va, vb = a.host_view_cache, b.host_view_cache
                    ufunc_into(fn, out.host_view_cache, a.host_view() if va is None else va,
                               b.host_view() if vb is None else vb)
                    return out
            with np.errstate(all="ignore"):
                return result(fn(values(a), values(b)), a)
        register_kernel(name, CPU, kernel, name=name)
    for name, fn in _UNARY.items():
        def kernel(x, fn=fn):
            layout = _direct.get((fn, x.dtype, x.shape), False)
            if layout is False:
                layout = _direct_output(fn, x)
            if layout is not None:
                out = Tensor.new_host(x.shape, layout[0], layout[1], x.dtype, x.device)
                ufunc_into(fn, out.host_view_cache, x.host_view())
                return out
            with np.errstate(all="ignore"):
                return result(fn(values(x)), x)
        register_kernel(name, CPU, kernel, name=name)


_register_elementwise()

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


def _register_comparisons():
    for name, fn in _COMPARE.items():
        def kernel(a, b, fn=fn):
            with np.errstate(all="ignore"):
                return from_numpy_values(fn(values(a), values(b)), dt.bool_, a.device)
        register_kernel(name, CPU, kernel, name=name)


_register_comparisons()


def _floor_division(fn):
    """a // b or a % b as Python and PyTorch define them (numpy's floor_divide and remainder
    do too); an integer divisor of 0 is refused as PyTorch's CPU kernels refuse it."""
    def kernel(a, b):
        vb = values(b)
        if not b.dtype.is_float and not np.all(vb):
            raise RuntimeError("ZeroDivisionError: integer division or remainder by zero")
        with np.errstate(all="ignore"):
            return result(fn(values(a), vb), a)
    return kernel


register_kernel("floor_divide", CPU, _floor_division(np.floor_divide), name="floor_divide")
register_kernel("remainder", CPU, _floor_division(np.remainder), name="remainder")


@register_kernel("where", CPU)
def where(a, b, cond):
    return result(np.where(values(cond), values(a), values(b)), a)


@register_kernel("copy_", CPU)
def copy_(dst, src):
    """Write src (already of dst's dtype, broadcastable to its shape) into the view dst."""
    dst.host_view()[...] = dst.dtype.from_numpy_values(np.broadcast_to(values(src), dst.shape))
    return dst


@register_kernel("sum", CPU)
def sum_(x, dim, keepdim):
    v = values(x)
    # Integers sum in int64 as numpy does (then wrap to the dtype); floats in their own
    # precision (float32 pairwise), except float16, which accumulates in float32 and rounds
    # once at the end, as the CUDA backend and PyTorch do (bfloat16's values are float32
    # already). inf + -inf is NaN, as on a GPU: no RuntimeWarning for the user.
    acc = (np.float32 if x.dtype is dt.float16 else v.dtype) if x.dtype.is_float else None
    with np.errstate(all="ignore"):
        return result(np.sum(v, axis=dim, keepdims=keepdim, dtype=acc), x)


@register_kernel("mean", CPU)
def mean(x, dim, keepdim):
    v = values(x)
    count = v.size if dim is None else v.shape[dim]
    # the sum over the count, not np.mean: an empty mean is NaN without numpy's warning
    with np.errstate(all="ignore"):
        return result(np.sum(v, axis=dim, keepdims=keepdim, dtype=np.float64) / np.float64(count), x)


@register_kernel("max", CPU)
def max_(x, dim, keepdim):
    with np.errstate(all="ignore"):
        return result(np.max(values(x), axis=dim, keepdims=keepdim), x)


@register_kernel("softmax", CPU)
def softmax(x, dim):
    v = values(x).astype(np.float64)
    if v.size == 0:
        return result(v, x)         # np.max has no identity; an empty softmax is empty
    with np.errstate(all="ignore"):
        shifted = np.exp(v - np.max(v, axis=dim, keepdims=True))
        return result(shifted / np.sum(shifted, axis=dim, keepdims=True), x)


@register_kernel("matmul", CPU)
def matmul(a, b):
    va, vb = values(a), values(b)
    if a.dtype.is_float and va.dtype != np.float64:
        va, vb = va.astype(np.float32), vb.astype(np.float32)
    return result(np.matmul(va, vb), a)


@register_kernel("contiguous", CPU)
def contiguous(x):
    return result(values(x), x)


@register_kernel("cast", CPU)
def cast(x, dtype):
    return from_numpy_values(values(x), dtype, x.device)


@register_kernel("cat", CPU)
def cat(*tensors, dim):
    return result(np.concatenate([values(t) for t in tensors], axis=dim), tensors[0])


def _arg_kernel(fn):
    def kernel(x, dim, keepdim):
        v = values(x)
        if dim is None:
            out = np.asarray(fn(v.reshape(-1)))
            out = out.reshape((1,) * v.ndim) if keepdim else out
        else:
            out = fn(v, axis=dim, keepdims=keepdim) if v.ndim else np.asarray(0)
        return from_numpy_values(np.asarray(out), dt.int64, x.device)
    return kernel


register_kernel("argmax", CPU, _arg_kernel(np.argmax), name="argmax")      # NaN counts as the largest, as in
register_kernel("argmin", CPU, _arg_kernel(np.argmin), name="argmin")      # PyTorch (numpy's first NaN)


@register_kernel("masked_select", CPU)
def masked_select(x, mask):
    v = values(x)
    shape = np.broadcast_shapes(v.shape, mask.shape)
    return result(np.broadcast_to(v, shape)[np.broadcast_to(values(mask), shape)], x)


@register_kernel("masked_scatter", CPU)
def masked_scatter(src, mask):
    """A tensor of mask's shape: src's elements, in order, where mask is true, zeros elsewhere."""
    out = np.zeros(mask.shape, dtype=values(src).dtype)
    out[values(mask)] = values(src)
    return result(out, src)


@register_kernel("arange", CPU)
def arange(t, start, step):
    """t[i] = start + i * step: float64 (two roundings, as the CUDA kernel) or int64 (wrapping)."""
    index = np.arange(t.numel(), dtype=t.dtype.storage)
    with np.errstate(all="ignore"):
        t.host_view()[...] = index * t.dtype.storage.type(step) + t.dtype.storage.type(start)
    return t

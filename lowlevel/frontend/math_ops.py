"""Layer 1: the math a PyTorch user reaches for after the basic arithmetic.

    kernels on both backends    sin cos floor ceil round trunc (float dtypes; the rounding
                                ops return an integer tensor unchanged, as PyTorch does),
                                bitwise_and / or / xor (bool and integer dtypes)
    decompositions              sign reciprocal square exp2 log2 log10 log_softmax,
                                isnan isinf isfinite, logical_and / or / xor / not,
                                bitwise_not, isclose allclose equal, mm bmm, and matmul
                                with batch dimensions that broadcast (beyond 3-D)

A decomposition is registered with the dispatcher (register_decomposition), so
`ll.explain("log2", x)` names it, and runs as other dispatched ops: every backend that
has those runs it, and autograd records the ops it is made of (their formulas are its
gradient). The new kernels' formulas are in autograd/formulas_more.py.
"""
import math

from ..dispatch import call as dispatch
from ..dispatch import register_decomposition
from . import dtypes as dt
from . import ops
from .device import on_their_device
from .creation import scalar_tensor
from .joining import full_like
from .shapes import broadcast_shapes
from .tensor import Tensor

call = on_their_device(dispatch)          # CUDA work on its tensors' device


def _describe(x) -> str:
    return f"{tuple(x.shape)} {x.dtype.name} on {x.device}" if isinstance(x, Tensor) else repr(x)


def _tensor(op: str, x) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    return x


def _floating(op: str, x) -> Tensor:
    """x, or x as float32 where it is an integer or bool tensor (PyTorch's sin(int) is float)."""
    x = _tensor(op, x)
    return x if x.dtype.is_float else x.to(dt.float32)


# ---- kernels on both backends -----------------------------------------------------------------
def sin(x) -> Tensor:
    return call("sin", _floating("sin", x))


def cos(x) -> Tensor:
    return call("cos", _floating("cos", x))


def _rounding(op: str):
    def fn(x) -> Tensor:
        x = _tensor(op, x)
        return call(op, x) if x.dtype.is_float else ops.clone(x)      # an integer is its own floor
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Elementwise {op} (round: half to even, as PyTorch); integer tensors come back as they are."
    return fn


floor, ceil, round, trunc = (_rounding(op) for op in ("floor", "ceil", "round", "trunc"))      # noqa: A001


def _bitwise(op: str, a, b) -> Tensor:
    """a OP b on bool and integer operands, in their result type (promotion.py) like every
    binary op: ops.checked_binary checks devices and shapes and casts."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: needs at least one tensor")
    for x in (a, b):
        if isinstance(x, Tensor) and x.dtype.is_float:
            raise TypeError(f"{op}: is only defined for bool and integer tensors, got {_describe(x)}")
        if not isinstance(x, (Tensor, bool, int)):
            raise TypeError(f"{op}: cannot combine a tensor with {type(x).__name__}")
    return ops.checked_binary(op, a, b)


def bitwise_and(a, b) -> Tensor:
    return _bitwise("bitwise_and", a, b)


def bitwise_or(a, b) -> Tensor:
    return _bitwise("bitwise_or", a, b)


def bitwise_xor(a, b) -> Tensor:
    return _bitwise("bitwise_xor", a, b)


def bitwise_not(x) -> Tensor:
    x = _tensor("bitwise_not", x)
    if x.dtype.is_float:
        raise TypeError(f"bitwise_not: is only defined for bool and integer tensors, got {_describe(x)}")
    return call("bitwise_not", x)


# ---- decompositions: each registered, so that explain() names it -----------------------------------
def _decomposed(op: str, fn):
    """`op` as the dispatched decomposition `fn`; the function users call checks x first."""
    register_decomposition(op, fn, name=f"{op}_decomposed")

    def public(x, *args, **kwargs):
        return dispatch(op, _tensor(op, x), *args, **kwargs)
    public.__name__ = public.__qualname__ = op
    public.__doc__ = fn.__doc__
    return public


def _sign(x):
    """-1, 0 or 1 by the sign of x (0 for +-0 and for NaN, as in PyTorch)."""
    if x.dtype is dt.bool_:
        return ops.clone(x)
    zero = full_like(x, 0)
    return ops.where(x > 0, 1, ops.where(x < 0, -1, zero))


def _reciprocal(x):
    """1 / x (an integer tensor gives float32, as in PyTorch)."""
    x = x if x.dtype.is_float else x.to(dt.float32)
    return ops.div(1.0, x)


def _square(x):
    """x * x."""
    return ops.mul(x, x)


def _exp2(x):
    """2^x, as e^(x ln 2)."""
    x = x if x.dtype.is_float else x.to(dt.float32)
    return ops.exp(x * math.log(2.0))


def _log2(x):
    """log2 x, as ln x / ln 2."""
    x = x if x.dtype.is_float else x.to(dt.float32)
    return ops.log(x) * (1.0 / math.log(2.0))


def _log10(x):
    """log10 x, as ln x / ln 10."""
    x = x if x.dtype.is_float else x.to(dt.float32)
    return ops.log(x) * (1.0 / math.log(10.0))


def _log_softmax(x, dim=-1):
    """x - max - ln(sum(e^(x - max))) along dim: no exp overflows, no log of an underflowed 0."""
    if not x.dtype.is_float:
        raise TypeError(f"log_softmax: needs a floating-point tensor, got {_describe(x)}")
    nd = x.ndim
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise IndexError(f"log_softmax: dim {dim} is out of range for a tensor of shape {x.shape}")
    if nd == 0:
        return x - x                      # one element: log(1) = 0 (NaN stays NaN)
    dim %= nd
    if x.shape[dim] == 0:
        return ops.clone(x)
    # the shift: a constant per row for the gradient (it cancels), so taken without history
    shift = call("max", x.detach(), dim=dim, keepdim=True)
    shift = ops.where(shift.eq(shift) & (shift.abs() < math.inf), shift, 0.0)     # an inf or NaN row: no shift
    shifted = x - shift
    return shifted - ops.log(ops.sum(ops.exp(shifted), dim, keepdim=True))


def _isnan(x):
    """True where x is NaN (never for integers)."""
    return ops.ne(x, x) if x.dtype.is_float else full_like(x, False, dtype=dt.bool_)


def _isinf(x):
    return ops.eq(ops.abs(x), math.inf) if x.dtype.is_float else full_like(x, False, dtype=dt.bool_)


def _isfinite(x):
    return ops.lt(ops.abs(x), math.inf) if x.dtype.is_float else full_like(x, True, dtype=dt.bool_)


sign = _decomposed("sign", _sign)
reciprocal = _decomposed("reciprocal", _reciprocal)
square = _decomposed("square", _square)
exp2 = _decomposed("exp2", _exp2)
log2 = _decomposed("log2", _log2)
log10 = _decomposed("log10", _log10)
log_softmax = _decomposed("log_softmax", _log_softmax)
isnan = _decomposed("isnan", _isnan)
isinf = _decomposed("isinf", _isinf)
isfinite = _decomposed("isfinite", _isfinite)


# ---- logical ops: on truth values (nonzero is true), bool results ---------------------------------
def _truth(x) -> Tensor:
    if not isinstance(x, Tensor):
        return x if isinstance(x, bool) else bool(x)
    return x if x.dtype is dt.bool_ else ops.ne(x, 0)


def _logical(op: str, combine):
    def fn(a, b) -> Tensor:
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise TypeError(f"{op}: needs at least one tensor")
        return combine(_truth(a), _truth(b))
    register_decomposition(op, fn, name=f"{op}_decomposed")

    def public(a, b) -> Tensor:
        return dispatch(op, a, b) if isinstance(a, Tensor) else fn(a, b)
    public.__name__ = public.__qualname__ = op
    public.__doc__ = f"Elementwise {op.split('_')[1]} of the truth values of a and b (nonzero is true): a bool tensor."
    return public


logical_and = _logical("logical_and", lambda a, b: bitwise_and(a, b))
logical_or = _logical("logical_or", lambda a, b: bitwise_or(a, b))
logical_xor = _logical("logical_xor", lambda a, b: ops.ne(a, b))
logical_not = _decomposed("logical_not", lambda x: ops.eq(_truth(x), False))


# ---- comparisons of whole tensors -----------------------------------------------------------------
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    """|a - b| <= atol + rtol |b| elementwise (equal infinities are close; NaN only with equal_nan)."""
    a, b = _tensor("isclose", a), b if isinstance(b, Tensor) else scalar_tensor(b, a.dtype, a.device)
    if a.dtype is not b.dtype:
        raise TypeError(f"isclose: {_describe(a)} and {_describe(b)} have different dtypes")
    if not a.dtype.is_float:
        return ops.eq(a, b)
    close = ops.eq(a, b) | ops.le(ops.abs(a - b), ops.abs(b) * rtol + atol)
    return close | (_isnan(a) & _isnan(b)) if equal_nan else close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(ops.all(isclose(a, b, rtol, atol, equal_nan)).item())


def equal(a, b) -> bool:
    """True if a and b have the same shape and equal elements (NaN is never equal)."""
    a, b = _tensor("equal", a), _tensor("equal", b)
    if a.shape != b.shape:
        return False
    return bool(ops.all(ops.eq(a, b)).item())


# ---- matrix products ----------------------------------------------------------------------------------
def mm(a, b) -> Tensor:
    """The product of two matrices (2-D only, as in PyTorch)."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor) or x.ndim != 2:
            raise RuntimeError(f"mm: {name} must be a matrix, got {_describe(x)}")
    return ops.matmul(a, b)


def bmm(a, b) -> Tensor:
    """Batched product of (B, n, k) and (B, k, m) tensors (no broadcasting, as in PyTorch)."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, Tensor) or x.ndim != 3:
            raise RuntimeError(f"bmm: {name} must be a 3-D tensor, got {_describe(x)}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: a is {a.shape}, b is {b.shape}")
    return ops.matmul(a, b)


def batched_matmul(a: Tensor, b: Tensor) -> Tensor:
    """matmul where the batch dimensions (all but the last two) broadcast, as numpy's and
    PyTorch's do: both operands expanded to the common batch, flattened to one batch
    dimension, one 3-D product, the batch shape put back. 1-D operands are a row (a) or a
    column (b), removed from the result again."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise RuntimeError(f"matmul: a is {a.shape} and b is {b.shape}: inner dimensions "
                           f"{a2.shape[-1]} and {b2.shape[-2]} differ")
    batch = tuple(broadcast_shapes("matmul", a2.shape[:-2], b2.shape[:-2]))
    count = math.prod(batch)
    a3 = a2.expand(*batch, *a2.shape[-2:]).reshape(count, *a2.shape[-2:])
    b3 = b2.expand(*batch, *b2.shape[-2:]).reshape(count, *b2.shape[-2:])
    out = ops.matmul(a3, b3).reshape(*batch, a2.shape[-2], b2.shape[-1])
    if a.ndim == 1:
        out = out.reshape(*batch, b2.shape[-1])
    if b.ndim == 1:
        out = out.reshape(*out.shape[:-1])
    return out


register_decomposition("matmul_broadcast", batched_matmul, name="matmul_broadcast_decomposed")

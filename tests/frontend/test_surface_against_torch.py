"""The surface issue 23 found missing, on both devices, against PyTorch (CPU) where it is
installed: methods (.long .int .bool .t .dim .stride ...), method forms with PyTorch's
keywords (add/sub alpha=, div rounding_mode=), the math ops and their decompositions, &
| ^ ~ and the reflected operators, chunk and split, relu_, retain_grad, to(...), a 0-d CPU
tensor in a CUDA op, format() of a 0-d tensor, and repr as PyTorch prints it. Each of
these raised AttributeError or TypeError, or printed differently, before."""
import math

import numpy as np
import pytest

import lowlevel as ll

torch = pytest.importorskip("torch", reason="PyTorch is the reference here: pip install torch (CPU)")


def _same(got, expect, rtol=1e-6, atol=1e-6):
    """A lowlevel tensor against a torch tensor: shape, dtype name and values."""
    if isinstance(expect, torch.Tensor):
        assert isinstance(got, ll.Tensor), type(got)
        assert got.shape == tuple(expect.shape), (got.shape, expect.shape)
        assert got.dtype.name == str(expect.dtype).removeprefix("torch."), (got.dtype, expect.dtype)
        e = expect.detach().double().numpy() if expect.dtype.is_floating_point else expect.numpy()
        g = got.detach().numpy().astype(np.float64) if got.dtype.is_float else got.detach().numpy()
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    elif isinstance(expect, (tuple, list)):
        assert len(got) == len(expect)
        for g, e in zip(got, expect):
            _same(g, e, rtol, atol)
    else:
        assert got == expect, (got, expect)


def _pair(rng, shape=(3, 4), dtype="float32"):
    x = rng.standard_normal(shape).astype(dtype)
    return x, torch.tensor(x)


def test_metadata_and_dtype_methods(device, rng):
    x, tx = _pair(rng, (3, 4))
    t = ll.tensor(x, device=device)
    for name in ("long", "int", "bool", "t", "float", "double"):
        _same(getattr(t, name)(), getattr(tx, name)())
    for name in ("dim", "ndimension", "nelement", "element_size", "is_floating_point", "stride"):
        _same(getattr(t, name)(), getattr(tx, name)())
    assert t.stride(1) == tx.stride(1) and t.ndim == tx.ndim and t.numel() == tx.numel()
    assert ll.tensor([1, 2], device=device).is_floating_point() is False
    _same(ll.tensor(2.0, device=device).t(), torch.tensor(2.0).t())
    with pytest.raises(RuntimeError, match="<= 2 dimensions"):
        ll.zeros(2, 2, 2).t()
    _same(t.new_zeros(2, 3), tx.new_zeros(2, 3))
    _same(t.new_full((2,), 7), tx.new_full((2,), 7))
    _same(t.type_as(ll.tensor([1])), tx.type_as(torch.tensor([1])))


def test_method_forms_with_pytorchs_keywords(device, rng):
    (a, ta), (b, tb) = _pair(rng), _pair(rng)
    A, B = ll.tensor(a, device=device), ll.tensor(b, device=device)
    _same(A.add(B, alpha=2), ta.add(tb, alpha=2))
    _same(A.sub(B, alpha=0.5), ta.sub(tb, alpha=0.5))
    _same(ll.add(A, B, alpha=3), torch.add(ta, tb, alpha=3))
    _same(ll.sub(A, 2.0, alpha=3), torch.sub(ta, 2.0, alpha=3))
    _same(A.mul(B), ta.mul(tb))
    _same(A.div(B), ta.div(tb), rtol=1e-5)
    _same(A.neg(), ta.neg())
    _same(A.matmul(B.t()), ta.matmul(tb.t()), rtol=1e-5, atol=1e-5)
    for mode in ("trunc", "floor"):
        _same(A.div(B, rounding_mode=mode), ta.div(tb, rounding_mode=mode))
        ia, ib = ll.tensor([7, -7, 9], device=device), ll.tensor([2, 2, -4], device=device)
        _same(ia.div(ib, rounding_mode=mode), torch.tensor([7, -7, 9]).div(torch.tensor([2, 2, -4]),
                                                                             rounding_mode=mode))


MATH = ["sin", "cos", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square", "exp2", "log2", "log10",
        "isnan", "isinf", "isfinite", "logical_not"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_ops_equal_torchs(device, rng, dtype):
    x = np.concatenate([rng.standard_normal(20) * 3, [0.0, -0.0, 0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    t, tx = ll.tensor(x, device=device), torch.tensor(x)
    for name in MATH:
        _same(getattr(ll, name)(t), getattr(torch, name)(tx), rtol=3e-6, atol=1e-6)
        _same(getattr(t, name)(), getattr(tx, name)(), rtol=3e-6, atol=1e-6)
    pos = np.abs(x[np.isfinite(x)]) + 0.1
    _same(ll.tensor(pos, device=device).log2(), torch.tensor(pos).log2(), rtol=3e-6)
    m, tm = _pair(rng, (3, 5), dtype)
    M = ll.tensor(m, device=device)
    for dim in (0, 1, -1):
        _same(ll.log_softmax(M, dim), torch.log_softmax(tm, dim), rtol=1e-5, atol=1e-6)
    big = ll.tensor([[1000.0, 0.0, -1000.0]], device=device)
    _same(big.log_softmax(1), torch.tensor([[1000.0, 0.0, -1000.0]]).log_softmax(1))      # no inf, no NaN
    _same(ll.tensor([1, -2, 0], device=device).floor(), torch.tensor([1, -2, 0]).floor())
    for ints in ([1, -2, 0], [True, False]):
        _same(ll.tensor(ints, device=device).sign(), torch.tensor(ints).sign())
        _same(ll.tensor(ints, device=device).isnan(), torch.tensor(ints).isnan())


def test_logical_ops_isclose_equal(device, rng):
    a = np.array([0, 1, 2, 0]), np.array([0.0, 0.0, 3.5, np.nan])
    ta = torch.tensor(a[0]), torch.tensor(a[1])
    la = ll.tensor(a[0], device=device), ll.tensor(a[1].astype(np.float32), device=device)
    ta = ta[0], ta[1].float()
    for name in ("logical_and", "logical_or", "logical_xor"):
        _same(getattr(ll, name)(*la), getattr(torch, name)(*ta))
    x, tx = _pair(rng)
    X = ll.tensor(x, device=device)
    y = x + rng.choice([0.0, 1e-3], x.shape).astype(np.float32)     # some close, some not (none near the edge)
    _same(ll.isclose(X, ll.tensor(y, device=device)), torch.isclose(tx, torch.tensor(y)))
    assert ll.allclose(X, ll.tensor(y, device=device)) == torch.allclose(tx, torch.tensor(y))
    near = ll.tensor(x * np.float32(1 + 1e-6), device=device)                  # within rtol everywhere
    assert ll.allclose(X, near) and X.allclose(near) and not ll.allclose(X, X + 1.0)
    assert ll.equal(X, X.clone()) and not ll.equal(X, X + 1.0) and not ll.equal(X, X[:1])
    nan = ll.tensor([np.nan, 1.0], device=device)
    assert not ll.allclose(nan, nan) and ll.allclose(nan, nan, equal_nan=True)
    inf = ll.tensor([np.inf, -np.inf], device=device)
    _same(ll.isclose(inf, inf), torch.isclose(torch.tensor([np.inf, -np.inf]), torch.tensor([np.inf, -np.inf])))


def test_operators_and_reflected_forms(device, rng):
    x, tx = _pair(rng)
    t = ll.tensor(x, device=device)
    _same(2 ** t, 2 ** tx, rtol=1e-5)
    _same(2 - t, 2 - tx)
    _same(1 / t, 1 / tx, rtol=1e-6)
    _same(2.5 * t, 2.5 * tx)
    i, ti = ll.tensor([1, 2, 5], device=device), torch.tensor([1, 2, 5])
    _same(2 ** i, 2 ** ti)
    for got, expect in ((2 & i, 2 & ti), (i | 8, ti | 8), (3 ^ i, 3 ^ ti), (~i, ~ti)):
        _same(got, expect)
    m, tm = t > 0, tx > 0
    _same(~m, ~tm)
    _same(m & (t < 1), tm & (tx < 1))
    _same(m | (t < -1), tm | (tx < -1))
    _same(m ^ True, tm ^ True)


def test_chunk_split_narrow(device, rng):
    x, tx = _pair(rng, (7, 4))
    t = ll.tensor(x, device=device)
    for args in ((3,), (2, 1), (7,), (10,)):
        _same(t.chunk(*args), tx.chunk(*args))
        _same(ll.chunk(t, *args), torch.chunk(tx, *args))
    for args in ((2,), ([3, 4],), ([1, 2, 1], 1), (3, 1), (7,)):
        _same(t.split(*args), tx.split(*args))
    _same(t.narrow(1, 1, 2), tx.narrow(1, 1, 2))
    with pytest.raises(RuntimeError, match="sum exactly"):
        t.split([3, 3])


def test_matmul_mm_bmm_broadcast_like_torch(device, rng):
    shapes = [((2, 3, 4, 5), (5, 6)), ((2, 1, 4, 5), (3, 5, 2)), ((5,), (2, 3, 5, 4)), ((2, 3, 4, 5), (5,)),
              ((1, 4, 5), (3, 5, 2)), ((2, 2, 1, 3, 4), (2, 1, 4, 2))]
    for sa, sb in shapes:
        (a, ta), (b, tb) = _pair(rng, sa), _pair(rng, sb)
        _same(ll.tensor(a, device=device) @ ll.tensor(b, device=device), ta @ tb, rtol=1e-5, atol=1e-5)
    (a, ta), (b, tb) = _pair(rng, (3, 4)), _pair(rng, (4, 2))
    _same(ll.mm(ll.tensor(a, device=device), ll.tensor(b, device=device)), torch.mm(ta, tb), rtol=1e-5, atol=1e-5)
    (a, ta), (b, tb) = _pair(rng, (2, 3, 4)), _pair(rng, (2, 4, 2))
    _same(ll.tensor(a, device=device).bmm(ll.tensor(b, device=device)), ta.bmm(tb), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError):
        ll.mm(ll.zeros(2, 3, 4), ll.zeros(4, 2))
    assert "decomposition" in ll.explain("matmul_broadcast", ll.zeros(2, 1, 2, 2), ll.zeros(3, 2, 2))


def test_relu_in_place_retain_grad_and_gradients(device, rng):
    x, tx = _pair(rng)
    t = ll.tensor(x, device=device)
    assert t.relu_() is t
    _same(t, tx.relu_())
    w = ll.tensor(x, device=device, requires_grad=True)
    tw = torch.tensor(x, requires_grad=True)
    h, th = w * 3.0, tw * 3.0
    h.retain_grad(), th.retain_grad()
    hidden, thidden = (h * h).relu_(), (th * th).relu_()
    hidden.sum().backward(), thidden.sum().backward()
    _same(h.grad, th.grad, rtol=1e-6)
    _same(w.grad, tw.grad, rtol=1e-6)
    assert h.retains_grad and not w.retains_grad
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        ll.zeros(2).retain_grad()


def test_to_forms_and_a_cpu_scalar_in_a_device_op(device, rng):
    x, tx = _pair(rng)
    t = ll.tensor(x, device=device)
    _same(t.to(dtype=ll.float64), tx.to(dtype=torch.float64))
    _same(t.to("cpu", ll.float16), tx.to("cpu", torch.float16))
    _same(t.to(ll.tensor([1], device=device)), tx.to(torch.tensor([1])))
    assert t.to(device, ll.float64).device.type == t.device.type
    assert t.to(t) is t and t.to(ll.float32) is t and t.to(ll.float32, copy=True) is not t
    two = ll.tensor(2.0)                              # a 0-d CPU tensor with a tensor of `device`
    _same(t * two, tx * torch.tensor(2.0))
    _same(two - t, torch.tensor(2.0) - tx)
    assert (t * two).device.type == t.device.type
    if device != "cpu":                              # a CPU tensor of one or more dimensions is not a scalar
        with pytest.raises((ValueError, RuntimeError), match="different devices"):
            t + ll.zeros(4)


def test_format_and_repr_as_pytorch(device):
    assert f"{ll.tensor(3.14159, device=device):.2f}" == f"{torch.tensor(3.14159):.2f}" == "3.14"
    assert f"{ll.tensor(7, device=device):>4}" == "   7"
    with pytest.raises(TypeError):
        f"{ll.tensor([1.0, 2.0]):.2f}"
    suffix = "" if device == "cpu" else ", device='cuda:0'"
    for values, kw in (([1.5, 2.0], {}), ([1, 2], {}), ([1.0, 2.0], {}), (2.5, {}), ([True, False], {}),
                       ([1e-5, 1e3], {}), ([float("nan"), 1.0, -math.inf], {}), ([[1.5, 2.0], [3.0, -4.25]], {}),
                       ([1, 2], {"dtype": "int32"}), ([0.1, 2.0], {"dtype": "float64"}),
                       (list(range(30)), {}), ([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], {})):
        ours = ll.tensor(values, device=device, **{k: getattr(ll, v) for k, v in kw.items()})
        theirs = repr(torch.tensor(values, **{k: getattr(torch, v) for k, v in kw.items()}))
        if suffix:
            theirs = theirs[:-1] + suffix + ")" if "dtype" not in theirs else theirs.replace(", dtype", suffix + ", dtype")
        assert repr(ours).replace("lowlevel.", "torch.") == theirs
    big = np.arange(3000, dtype=np.float32).reshape(30, 100) / 7
    assert repr(ll.tensor(big)) == repr(torch.tensor(big))
    w = ll.tensor([1.0, 2.0], requires_grad=True)
    tw = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(w) == repr(tw) and repr(w * 2) == repr(tw * 2)

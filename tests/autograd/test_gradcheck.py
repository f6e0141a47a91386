"""Gradients of every differentiable op: against central finite differences in float64 on
the CPU backend, and CUDA's (float32, its own kernels) against the CPU backend's, on random
shapes. Each case is a function of some inputs returning a tensor; the scalar checked is
sum(f(inputs) * w) for a random w, so every output element's gradient matters."""
import numpy as np
import pytest

import lowlevel as ll


def _shape(rng, ndim, low=1, high=5):
    return tuple(int(s) for s in rng.integers(low, high, size=ndim))


def _broadcast_pair(rng):
    a = _shape(rng, int(rng.integers(1, 4)))
    b = tuple(1 if rng.random() < 0.4 else s for s in a)[int(rng.integers(0, len(a))):] or (1,)
    return (a, b) if rng.random() < 0.5 else (b, a)


def _distinct(rng, shape):
    """Values far enough apart that max and relu are differentiable at them."""
    n = int(np.prod(shape))
    v = (rng.permutation(n) - n / 2 + 0.3) * 0.37     # never 0, never a tie
    return v.reshape(shape)


def cases(rng):
    """(name, f, input arrays)."""
    sa, sb = _broadcast_pair(rng)
    m, k, n, batch = (int(x) for x in rng.integers(1, 5, size=4))
    x3 = rng.standard_normal(_shape(rng, 3))
    d, keep = int(rng.integers(0, 3)), bool(rng.integers(0, 2))
    yield "add", lambda a, b: a + b, [rng.standard_normal(sa), rng.standard_normal(sb)]
    yield "sub", lambda a, b: a - b, [rng.standard_normal(sa), rng.standard_normal(sb)]
    yield "mul", lambda a, b: a * b, [rng.standard_normal(sa), rng.standard_normal(sb)]
    yield "div", lambda a, b: a / b, [rng.standard_normal(sa), rng.uniform(1, 2, sb) * rng.choice([-1, 1], sb)]
    yield "scalars", lambda a: 2.0 * a - 1.0 / (a * a + 3.0) + 0.5, [rng.standard_normal(sa)]
    yield "neg", lambda a: -a, [rng.standard_normal(sa)]
    yield "exp", lambda a: a.exp(), [rng.standard_normal(sa)]
    yield "relu", lambda a: a.relu(), [_distinct(rng, sa)]
    yield "sum", lambda a: a.sum(), [x3]
    yield "sum_dim", lambda a: a.sum(d), [x3]
    yield "sum_keepdim", lambda a: a.sum(d, keepdim=True), [x3]
    yield "mean_dim", lambda a: a.mean(d) * 3.0, [x3]
    yield "mean", lambda a: a.mean(), [x3]
    yield "max", lambda a: a.max(), [_distinct(rng, x3.shape)]
    yield "max_dim", lambda a: a.max(d, keepdim=keep).values, [_distinct(rng, x3.shape)]
    yield "softmax", lambda a: a.softmax(d), [x3]
    yield "matmul", lambda a, b: a @ b, [rng.standard_normal((m, k)), rng.standard_normal((k, n))]
    yield "matmul_T", lambda a, b: a.T @ b.T, [rng.standard_normal((k, m)), rng.standard_normal((n, k))]
    yield "matmul_vec", lambda a, b: a @ b, [rng.standard_normal(k), rng.standard_normal((k, n))]
    yield "matvec", lambda a, b: a @ b, [rng.standard_normal((m, k)), rng.standard_normal(k)]
    yield "dot", lambda a, b: a @ b, [rng.standard_normal(k), rng.standard_normal(k)]
    yield "bmm", lambda a, b: a @ b, [rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n))]
    yield "bmm_2d", lambda a, b: a @ b, [rng.standard_normal((batch, m, k)), rng.standard_normal((k, n))]
    yield "2d_bmm", lambda a, b: a @ b.transpose(1, 2), [rng.standard_normal((m, k)),
                                                        rng.standard_normal((batch, n, k))]
    yield "reshape", lambda a: a.reshape(-1) * 2.0, [x3]
    yield "view_T", lambda a: a.T.reshape(-1).view(x3.shape[::-1]), [x3]
    yield "permute", lambda a: a.permute(2, 0, 1) * 1.0, [x3]
    yield "slicing", lambda a: a[::2, None, ..., 1:] * 3.0 + a[-1, ..., 1:], [x3]
    yield "expand", lambda a: a.expand(3, *a.shape) * 1.0, [rng.standard_normal((2, 1, 3))]
    yield "contiguous", lambda a: a.T.contiguous(), [x3]
    yield "reuse", lambda a: (a * a).sum(0) + a.sum(0) * a[0], [x3]
    yield "where", lambda a, b: ll.where(a > b, a * 2.0, b), [_distinct(rng, sa), _distinct(rng, sa) + 0.1]
    cat_other = list(x3.shape)
    cat_other[d] = int(rng.integers(1, 4))
    yield "cat", lambda a, b: ll.cat([a, b * 2.0, a], d), [x3, rng.standard_normal(cat_other)]
    yield "stack", lambda a, b: ll.stack([a, b], d), [x3, rng.standard_normal(x3.shape)]
    yield "unsqueeze_squeeze", lambda a: a.unsqueeze(d).squeeze(d).unsqueeze(-1) * 1.0, [x3]
    yield "flatten", lambda a: a.T.flatten(1) * 2.0, [x3]
    pos = rng.uniform(0.5, 2.0, sa)
    yield "sqrt", lambda a: a.sqrt(), [pos]
    yield "rsqrt", lambda a: a.rsqrt(), [pos]
    yield "log", lambda a: a.log(), [pos]
    yield "log1p", lambda a: a.log1p(), [pos - 0.4]
    yield "expm1", lambda a: a.expm1(), [rng.standard_normal(sa)]
    yield "tanh", lambda a: a.tanh(), [rng.standard_normal(sa)]
    yield "sigmoid", lambda a: a.sigmoid(), [rng.standard_normal(sa)]
    yield "abs", lambda a: a.abs(), [_distinct(rng, sa)]
    yield "minimum", lambda a, b: ll.minimum(a, b), [_distinct(rng, sa), _distinct(rng, sa) + 0.1]
    yield "clamp", lambda a: a.clamp(-0.5, 0.6), [_distinct(rng, sa)]
    yield "min_dim", lambda a: a.min(d, keepdim=keep).values, [_distinct(rng, x3.shape)]
    yield from reduction_and_index_cases(rng, x3, d, keep)


def reduction_and_index_cases(rng, x3, d, keep):
    """The reductions, sorts and indexing of frontend/reductions.py and indexing.py."""
    size = x3.shape[d]
    idx = rng.integers(0, size, x3.shape)
    rows = rng.integers(0, x3.shape[0], 5)

    def on(a, values):
        return ll.tensor(values, device=a.device)
    yield "max_dim_tuple", lambda a: a.max(d)[0] * 2.0, [_distinct(rng, x3.shape)]
    yield "sort", lambda a: a.sort(d, descending=keep).values, [_distinct(rng, x3.shape)]
    yield "topk", lambda a: a.topk(1, d).values, [_distinct(rng, x3.shape)]
    yield "kthvalue", lambda a: a.kthvalue(size, d, keepdim=keep).values, [_distinct(rng, x3.shape)]
    yield "amax_tuple", lambda a: a.amax((0, 2), keepdim=keep), [_distinct(rng, x3.shape)]
    yield "sum_tuple", lambda a: a.sum((0, 2), keepdim=keep), [x3]
    yield "mean_tuple", lambda a: a.mean((1, 2)), [x3]
    yield "cumsum", lambda a: a.cumsum(d), [x3]
    yield "cumprod", lambda a: a.cumprod(d), [rng.uniform(0.5, 1.5, x3.shape)]
    with_zero = rng.uniform(0.5, 1.5, x3.shape)
    with_zero.reshape(-1)[int(rng.integers(0, with_zero.size))] = 0.0
    yield "cumprod_zero", lambda a: a.cumprod(d), [with_zero]
    yield "prod", lambda a: a.prod(), [rng.uniform(0.5, 1.5, x3.shape)]
    yield "prod_dim", lambda a: a.prod(d, keepdim=keep), [rng.uniform(0.5, 1.5, x3.shape)]
    yield "var", lambda a: a.var(d, keepdim=keep), [x3]
    yield "var_tuple", lambda a: a.var((0, 1), correction=0), [x3]
    yield "std", lambda a: a.std(), [x3]
    yield "logsumexp", lambda a: a.logsumexp(d, keepdim=keep), [x3]
    yield "norm", lambda a: a.norm(), [x3]
    yield "norm_p1_dim", lambda a: a.norm(p=1, dim=d), [_distinct(rng, x3.shape)]
    yield "norm_p3", lambda a: a.norm(p=3, dim=(0, 2)), [_distinct(rng, x3.shape)]
    yield "norm_inf", lambda a: a.norm(p=float("inf")), [_distinct(rng, x3.shape)]
    yield "gather", lambda a: a.gather(d, on(a, idx)), [x3]
    yield "scatter_add", lambda a, b: a.scatter_add(d, on(a, idx), b), [x3, rng.standard_normal(x3.shape)]
    # distinct indices along d (with equal ones, which src wins is unspecified, as in PyTorch)
    perm = np.take(np.argsort(rng.random(x3.shape), axis=d), range(max(1, size // 2)), axis=d)
    yield "scatter", lambda a, b: a.scatter(d, on(a, perm), b), [x3, rng.standard_normal(x3.shape)]
    yield "index_select", lambda a: a.index_select(d, on(a, rows % size)), [x3]
    yield "index_rows", lambda a: a[on(a, rows)], [x3]
    yield "index_columns", lambda a: a[:, on(a, rows % x3.shape[1])] * 2.0, [x3]
    yield "index_pairs", lambda a: a[on(a, rows), :, on(a, rows % x3.shape[2])], [x3]
    yield "masked_fill", lambda a: a.masked_fill(a > 0.0, 0.5), [_distinct(rng, x3.shape)]

    def setitem(a, b):
        c = a * 1.0
        c[on(a, rows[:1])] = b
        return c
    yield "setitem_rows", setitem, [x3, rng.standard_normal(x3.shape[1:])]


def _scalar(f, inputs, w):
    out = f(*inputs)
    return out, (out * w).sum()


def numeric_grads(f, arrays, w):
    eps = 1e-6
    grads = []
    for i, x in enumerate(arrays):
        g = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            vals = []
            for step in (eps, -eps):
                xs = [a.copy() for a in arrays]
                xs[i][j] += step
                vals.append(_scalar(f, [ll.tensor(a, dtype=ll.float64) for a in xs], w)[1].item())
            g[j] = (vals[0] - vals[1]) / (2 * eps)
        grads.append(g)
    return grads


def analytic_grads(f, arrays, w, dtype, device):
    leaves = [ll.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in arrays]
    out, loss = _scalar(f, leaves, w)
    assert out.requires_grad and out.grad_fn is not None
    loss.backward()
    return [t.grad for t in leaves]


@pytest.mark.parametrize("trial", range(2))
def test_gradients_match_finite_differences_float64(rng, trial):
    for name, f, arrays in cases(rng):
        shape = f(*[ll.tensor(a, dtype=ll.float64) for a in arrays]).shape
        w = ll.tensor(rng.standard_normal(shape), dtype=ll.float64)
        got = analytic_grads(f, arrays, w, ll.float64, "cpu")
        expect = numeric_grads(f, arrays, w)
        for i, (g, e) in enumerate(zip(got, expect)):
            assert g is not None and g.dtype is ll.float64 and g.shape == e.shape, (name, i)
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-6, err_msg=f"{name}: input {i}")


@pytest.mark.parametrize("trial", range(2))
def test_cuda_gradients_match_the_cpu_backend(device, rng, trial):
    if device == "cpu":
        pytest.skip("compares CUDA against the CPU backend")
    for name, f, arrays in cases(rng):
        arrays = [a.astype(np.float32) for a in arrays]
        shape = f(*[ll.tensor(a) for a in arrays]).shape
        w = rng.standard_normal(shape).astype(np.float32)
        expect = analytic_grads(f, arrays, ll.tensor(w), ll.float32, "cpu")
        got = analytic_grads(f, arrays, ll.tensor(w, device=device), ll.float32, device)
        for i, (g, e) in enumerate(zip(got, expect)):
            assert g.device.type == "cuda", (name, i)
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=2e-4, atol=2e-5, err_msg=f"{name}: input {i}")


def test_to_and_cast_carry_gradients(device, rng):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    a = ll.tensor(x, requires_grad=True)
    b = a.to(device)
    c = (b * b).to("cpu").to(ll.float64).sum()
    c.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * x, rtol=1e-6)
    assert a.grad.device.type == "cpu" and a.grad.dtype is ll.float32


def test_pow_gradients_match_finite_differences_float64(rng):
    # pow has a CPU kernel only, so it is not among the cases CUDA is compared on
    base, exponent = rng.uniform(0.5, 2.0, (3, 2)), rng.uniform(-1.0, 2.0, (2,))
    for name, f, arrays in (("pow_number", lambda a: a ** 2.5, [base]),
                            ("pow_tensor", lambda a, b: ll.pow(a, b), [base, exponent])):
        w = ll.tensor(rng.standard_normal((3, 2)), dtype=ll.float64)
        got = analytic_grads(f, arrays, w, ll.float64, "cpu")
        for i, (g, e) in enumerate(zip(got, numeric_grads(f, arrays, w))):
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-6, err_msg=f"{name}: input {i}")

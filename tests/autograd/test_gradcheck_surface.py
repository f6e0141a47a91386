"""Gradients of issue 23's new surface against finite differences in float64 (the helpers
of test_gradcheck.py), on the CPU backend, and CUDA's against the CPU's: the kernels' own
formulas (sin, cos, the rounding ops) and the decompositions' (recorded as the ops they
are made of: log_softmax, exp2, log2, log10, reciprocal, square, sign, matmul over
broadcast batches, chunk and split views, x.add(y, alpha=), number ** x)."""
import numpy as np
import pytest

import lowlevel as ll
from test_gradcheck import analytic_grads, numeric_grads


def _away_from_integers(rng, shape):
    x = rng.uniform(-3, 3, shape)
    return np.floor(x) + rng.uniform(0.1, 0.9, shape)      # floor/round/... are flat here


def cases(rng):
    x = rng.standard_normal((3, 4))
    pos = rng.uniform(0.5, 2.0, (3, 4))
    yield "sin", lambda a: a.sin(), [x]
    yield "cos", lambda a: ll.cos(a), [x]
    for op in ("floor", "ceil", "round", "trunc", "sign"):
        yield op, lambda a, op=op: getattr(a, op)() * a, [_away_from_integers(rng, (3, 4))]
    yield "log_softmax0", lambda a: a.log_softmax(0), [x]
    yield "log_softmax1", lambda a: ll.log_softmax(a, -1), [x]
    yield "exp2", lambda a: a.exp2(), [x]
    yield "log2", lambda a: a.log2(), [pos]
    yield "log10", lambda a: ll.log10(a), [pos]
    yield "reciprocal", lambda a: a.reciprocal(), [pos]
    yield "square", lambda a: a.square(), [x]
    yield "rpow", lambda a: 2.0 ** a, [x]
    yield "add_alpha", lambda a, b: a.add(b, alpha=2.5), [x, rng.standard_normal(4)]
    yield "sub_alpha", lambda a, b: ll.sub(a, b, alpha=-1.5), [x, x + 1]
    yield "chunk", lambda a: a.chunk(2, 1)[1] * a.chunk(2, 1)[0], [x]
    yield "split", lambda a: a.split([1, 2])[1].sum(0) * a.split(1)[0], [x]
    yield "matmul_4d", lambda a, b: a @ b, [rng.standard_normal((2, 1, 3, 2)), rng.standard_normal((3, 2, 2))]
    yield "matmul_vec", lambda a, b: a @ b, [rng.standard_normal(3), rng.standard_normal((2, 2, 3, 2))]


@pytest.mark.parametrize("trial", range(2))
def test_new_surface_gradients_match_finite_differences_float64(rng, trial):
    for name, f, arrays in cases(rng):
        shape = f(*[ll.tensor(a, dtype=ll.float64) for a in arrays]).shape
        w = ll.tensor(rng.standard_normal(shape), dtype=ll.float64)
        got = analytic_grads(f, arrays, w, ll.float64, "cpu")
        for i, (g, e) in enumerate(zip(got, numeric_grads(f, arrays, w))):
            assert g is not None and g.dtype is ll.float64 and g.shape == e.shape, (name, i)
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-6, err_msg=f"{name}: input {i}")


def test_cuda_gradients_of_the_new_surface_match_the_cpu_backend(device, rng):
    if device == "cpu":
        pytest.skip("compares CUDA against the CPU backend")
    for name, f, arrays in cases(rng):
        w = rng.standard_normal(f(*[ll.tensor(a) for a in arrays]).shape)
        expect = analytic_grads(f, arrays, ll.tensor(w, dtype=ll.float64), ll.float64, "cpu")
        got = analytic_grads(f, arrays, ll.tensor(w, dtype=ll.float64, device=device), ll.float64, device)
        for i, (g, e) in enumerate(zip(got, expect)):
            assert g.device.type == "cuda", (name, i)
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{name}: input {i}")

"""matmul on the handwritten kernels when asked (lowlevel.backends.cuda.matmul_library("ptx")):
float32 by sgemm_tiled, float16 by hgemm_mma, against numpy float64 beside cuBLAS's
result, on every driver present; the launches show the route (the trace's records);
shapes and dtypes the kernels cannot take are clear errors; the setting is restored by
the context manager and read from LOWLEVEL_MATMUL_LIBRARY."""
import os
import subprocess
import sys

import numpy as np
import pytest

import lowlevel as ll
import lowlevel.backends.cuda as cuda_backend
from lowlevel import trace

EPS32, EPS16 = float(np.finfo(np.float32).eps), float(np.finfo(np.float16).eps)


def routed(fn):
    """(result, kernels launched, cuBLAS calls made) of fn() on the ptx route."""
    with cuda_backend.matmul_library("ptx"), trace.Recorder() as rec:
        out = fn()
    return out, [k["kernel"] for k in rec.launches], [c["symbol"] for c in rec.calls if c["library"] == "cublas"]


@pytest.mark.parametrize("a_shape, b_shape", [((67, 45), (45, 33)), ((3, 20, 9), (9, 17)), ((30,), (30, 5))])
def test_float32_runs_sgemm_tiled(driver, rng, a_shape, b_shape):
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    ta, tb = ll.tensor(a, device="cuda"), ll.tensor(b, device="cuda")
    out, kernels, blas = routed(lambda: ta @ tb)
    batches = a_shape[0] if len(a_shape) == 3 else 1
    assert kernels == ["sgemm_tiled"] * batches and blas == []
    want = a.astype(np.float64) @ b.astype(np.float64)
    k = a_shape[-1]
    bound = k * EPS32 * (np.abs(a).astype(np.float64) @ np.abs(b))
    assert out.shape == want.shape
    assert (np.abs(out.numpy() - want) <= bound).all()
    np.testing.assert_allclose((ta @ tb).numpy(), out.numpy(), rtol=1e-5, atol=1e-5 * k)   # cuBLAS beside it


def test_float16_runs_hgemm_mma(driver, rng):
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 72)).astype(np.float16)
    ta, tb = ll.tensor(a, device="cuda"), ll.tensor(b, device="cuda")
    out, kernels, blas = routed(lambda: ta @ tb.T.contiguous().T)      # a transposed view is copied
    assert kernels[-1] == "hgemm_mma" and blas == []
    av, bv = a.astype(np.float64), b.astype(np.float64)
    want = av @ bv
    bound = 41 * EPS32 * (np.abs(av) @ np.abs(bv)) + EPS16 / 2 * np.abs(want) + 2.0 ** -24
    assert (np.abs(out.numpy().astype(np.float64) - want) <= bound).all()


def test_what_the_kernels_cannot_take_is_a_clear_error(driver, rng):
    x64 = ll.tensor(rng.standard_normal((4, 4)), device="cuda")
    h = ll.tensor(rng.standard_normal((8, 12)).astype(np.float16), device="cuda")
    with cuda_backend.matmul_library("ptx"):
        with pytest.raises(TypeError, match="not float64"):
            x64 @ x64
        with pytest.raises(ValueError, match=r"\(8 x 12\) @ \(12 x 8\).*N = 8, K = 12"):
            h @ h.T.contiguous()
    with pytest.raises(ValueError, match="'tensorcores' is not a matmul library"):
        cuda_backend.matmul_library("tensorcores")


def test_the_setting_is_restored_and_read_from_the_environment():
    assert cuda_backend.matmul_library() == "cublas"
    with cuda_backend.matmul_library("ptx"):
        assert cuda_backend.matmul_library() == "ptx"
        with cuda_backend.matmul_library("cublas"):
            assert cuda_backend.matmul_library() == "cublas"
        assert cuda_backend.matmul_library() == "ptx"
    assert cuda_backend.matmul_library() == "cublas"
    code = "import lowlevel.backends.cuda as c; print(c.matmul_library())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LOWLEVEL_MATMUL_LIBRARY": "ptx"})
    assert out.stdout.strip() == "ptx", out.stderr

"""relu(-0.0) is +0.0 on every backend and dtype. PyTorch's relu is clamp_min(x, 0); its CUDA
kernel computes ::max(x, 0) = fmaxf, which orders -0.0 below +0.0 and gives +0.0 (its x86 CPU
kernel happens to give -0.0: MAXPS returns its second operand, x, for two zeros). lowlevel
follows the CUDA answer on both of its backends, so that a model gives the same bits on each."""
import numpy as np
import pytest

import lowlevel as ll

VALUES = [-0.0, 0.0, -1.5, 2.0, np.nan, -np.inf, np.inf]
WANT = [0.0, 0.0, 0.0, 2.0, np.nan, 0.0, np.inf]


@pytest.mark.parametrize("dtype", [ll.float32, ll.float64, ll.float16], ids=lambda d: d.name)
def test_relu_of_negative_zero_is_positive_zero(device, dtype):
    got = ll.tensor(VALUES, dtype=dtype, device=device).relu().to(ll.float64).numpy()
    np.testing.assert_array_equal(got, WANT)
    assert not np.signbit(got[:2]).any(), got


def test_relu_of_negative_zero_bfloat16_on_cpu():
    got = ll.tensor(VALUES, dtype=ll.bfloat16).relu().to(ll.float64).numpy()
    np.testing.assert_array_equal(got, WANT)
    assert not np.signbit(got[:2]).any(), got

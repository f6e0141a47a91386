"""The CUDA backend's kernels for the other dtypes run on the device: every cast is one
kernel launch and no copy to the host (checked in the trace of driver calls), argmax and
argmin follow PyTorch's ties and NaN, t[mask] reads back only its count, and the gradient of
t[mask] is scattered back into zeros on the device."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import trace

NAMES = {ll.bool: "bool", ll.int32: "i32", ll.int64: "i64", ll.float16: "f16", ll.bfloat16: "bf16",
         ll.float32: "f32", ll.float64: "f64"}
PAIRS = [(a, b) for a in NAMES for b in NAMES if a is not b]


def _copies_and_syncs(calls):
    return [c["symbol"] for c in calls if c["symbol"].startswith("cuMemcpy") or "Synchronize" in c["symbol"]]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{NAMES[a]}-{NAMES[b]}" for a, b in PAIRS])
def test_every_cast_is_one_kernel_and_no_host_round_trip(driver, src, dst):
    x = ll.tensor(np.array([0, 1, -2, 3]), device="cuda").to(src)
    x.to(dst)                                   # the module loads once, outside the trace
    with trace.Recorder() as r:
        y = x.to(dst)
    assert [launch["kernel"] for launch in r.launches] == [f"cast_{NAMES[src]}_{NAMES[dst]}"]
    assert _copies_and_syncs(r.calls) == []
    assert y.device.type == "cuda" and y.dtype is dst


def test_argmax_and_argmin_ties_and_nan_on_cuda(driver, rng):
    x = ll.tensor([[1.0, 3.0, 3.0, np.nan, 2.0, np.nan], [5.0, -1.0, 5.0, -1.0, 0.0, 0.0]], device="cuda")
    np.testing.assert_array_equal(x.argmax(1).numpy(), [3, 0])      # the first NaN; the first of equals
    np.testing.assert_array_equal(x.argmin(1).numpy(), [3, 1])
    assert x.argmax().item() == 3 and x.argmin(0, keepdim=True).shape == (1, 6)
    wide = rng.integers(-1000, 1000, (3, 700)).astype(np.int64)       # many columns per lane
    t = ll.tensor(wide, device="cuda")
    np.testing.assert_array_equal(t.argmax(1).numpy(), wide.argmax(1))
    np.testing.assert_array_equal(t.T.argmin(0).numpy(), wide.argmin(1))
    flat = np.full(1000, -np.inf, np.float32)
    assert ll.tensor(flat, device="cuda").argmax().item() == 0      # every element is the lowest value


def test_mask_selection_reads_back_only_its_count(driver, rng):
    x = rng.standard_normal((5, 67)).astype(np.float32)
    t = ll.tensor(x, device="cuda")
    m = t > 0.3
    t[m]
    with trace.Recorder() as r:
        picked = t[m]
    assert [c for c in _copies_and_syncs(r.calls) if "DtoH" in c] == ["cuMemcpyDtoHAsync_v2"]
    assert "masked_select_b32" in [launch["kernel"] for launch in r.launches]
    np.testing.assert_array_equal(picked.numpy(), x[x > 0.3])


def test_gradient_of_mask_selection_scatters_into_zeros(device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    mask = rng.random((4, 6)) > 0.5
    weights = rng.standard_normal(int(mask.sum())).astype(np.float32)
    t = ll.tensor(x, device=device, requires_grad=True)
    (t[ll.tensor(mask, device=device)] * ll.tensor(weights, device=device)).sum().backward()
    expected = np.zeros_like(x)
    expected[mask] = weights
    np.testing.assert_array_equal(t.grad.numpy(), expected)
    # a broadcast mask picks each row element several times: its gradients add up
    row = ll.tensor(rng.standard_normal(6).astype(np.float32), device=device, requires_grad=True)
    picked = ll.masked_select(row, ll.tensor(mask, device=device))
    picked.sum().backward()
    np.testing.assert_allclose(row.grad.numpy(), mask.sum(0).astype(np.float32))

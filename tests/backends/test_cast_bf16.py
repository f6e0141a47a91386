"""float32 <-> bfloat16 on the device (ptx/cast_bf16.ptx): every bit pattern class (normal,
subnormal, ties, the overflow to inf, NaN payloads, -0.0) rounds as the CPU conversion
does (nearest, ties to even, NaN -> 0x7FC0), and widening is exact."""
import numpy as np
from helpers.tensor_strategies import PROPERTY
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowlevel as ll

BITS = hnp.arrays(np.uint32, st.integers(0, 40),
                  elements=st.integers(0, 2**32 - 1) | st.sampled_from([0x3F808000, 0x3F818000, 0x7F7FFFFF,
                                                                        0x7F800001, 0xFFC00001, 0x80000000,
                                                                        0x00008000, 0x00018000]))


@PROPERTY
@given(bits=BITS)
def test_float32_to_bfloat16_on_the_device_rounds_like_the_cpu(driver, bits):
    x = bits.view(np.float32)
    on_device = ll.tensor(x, device="cuda").to(ll.bfloat16)
    assert on_device.dtype is ll.bfloat16 and on_device.device.type == "cuda"
    got_bits = on_device.to("cpu").host_view()
    np.testing.assert_array_equal(got_bits, ll.tensor(x).to(ll.bfloat16).host_view())
    back = on_device.to(ll.float32)
    assert back.device.type == "cuda"
    np.testing.assert_array_equal(back.numpy().view(np.uint32), got_bits.astype(np.uint32) << 16)


def test_bfloat16_casts_of_views_and_empty_tensors(driver, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = ll.tensor(x, device="cuda").T.to(ll.bfloat16)
    np.testing.assert_array_equal(t.numpy(), ll.tensor(x.T).to(ll.bfloat16).numpy())
    assert ll.zeros(0, 2, device="cuda").to(ll.bfloat16).shape == (0, 2)

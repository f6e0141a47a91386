"""What the dispatcher remembers of a call (dispatch.table.resolved: the kernel per op, key
set and dtype) is never a stale answer: any registration empties it, a new dtype, key set
or include set finds its own kernel, and an error or a fallback is never remembered."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import dispatch
from lowlevel.dispatch import table


def test_a_registration_after_a_call_is_seen_by_the_next_call(rng):
    x = ll.tensor(rng.standard_normal(4).astype(np.float32))
    dispatch.register_kernel("cache_op", dispatch.CPU, lambda t: "first", dtypes=["float32"])
    assert dispatch.call("cache_op", x) == "first"
    assert ("cache_op", dispatch.CPU.bit, "float32") in table.resolved
    dispatch.register_kernel("cache_op", dispatch.CPU, lambda t: "second", dtypes=["float32"])
    assert dispatch.call("cache_op", x) == "second"
    dispatch.register_fallthrough(dispatch.CPU, "cache_op")
    with pytest.raises(NotImplementedError, match="cache_op has no kernel for any key"):
        dispatch.call("cache_op", x)


def test_each_dtype_and_key_set_finds_its_own_kernel(rng):
    x32 = ll.tensor(rng.standard_normal(4).astype(np.float32))
    x64 = x32.double()
    dispatch.register_kernel("cache_dtype_op", dispatch.CPU, lambda t: "f32", dtypes=["float32"])
    assert dispatch.call("cache_dtype_op", x32) == "f32"
    for _ in range(2):                           # the error is raised again, never remembered
        with pytest.raises(NotImplementedError, match="cache_dtype_op has no CPU kernel for dtype float64"):
            dispatch.call("cache_dtype_op", x64)
    key = dispatch.register_key("CacheWrapper", 87)
    dispatch.register_kernel("cache_dtype_op", key, lambda t: "wrapped")
    assert dispatch.call("cache_dtype_op", x32) == "f32"
    with dispatch.include(key):
        assert dispatch.call("cache_dtype_op", x32) == "wrapped"
    assert dispatch.call("cache_dtype_op", x32) == "f32"


def test_a_fallback_runs_on_every_call(rng):
    x = ll.tensor(rng.standard_normal(2).astype(np.float32))
    key = dispatch.register_key("CacheCounter", 88)
    seen = []

    def count(op, below, args, kwargs):
        seen.append(op)
        return dispatch.redispatch(op, below, *args, **kwargs)
    dispatch.register_fallback(key, count)
    with dispatch.include(key):
        for _ in range(3):
            np.testing.assert_array_equal((x + x).numpy(), 2 * x.numpy())
    assert seen == ["add"] * 3

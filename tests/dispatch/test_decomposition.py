"""Decompositions: an op written as other ops (PyTorch's CompositeImplicitAutograd), which runs
wherever the highest acting key has no kernel of the call's dtype, or is a fallback's."""
import numpy as np

import lowlevel as ll
from lowlevel import dispatch


def test_a_kernel_wins_where_one_takes_the_dtype_and_the_decomposition_runs_elsewhere(rng):
    x32 = ll.tensor(rng.standard_normal(4).astype(np.float32))
    x64 = ll.tensor(rng.standard_normal(4))
    dispatch.register_kernel("decomp_twice.Scalar", dispatch.CPU, lambda t, s: "cpu kernel", dtypes=[ll.float32])
    dispatch.register_decomposition("decomp_twice.Scalar", lambda t, s: ("decomposed", s))
    assert dispatch.call("decomp_twice.Scalar", x32, 2.0) == "cpu kernel"
    for _ in range(2):                                  # the second call: the cached answer
        assert dispatch.call("decomp_twice.Scalar", x64, 3.0) == ("decomposed", 3.0)
    assert "decomposition" in dispatch.explain("decomp_twice.Scalar", x64, 3.0)
    assert "kernel" in dispatch.explain("decomp_twice.Scalar", x32, 2.0)


def test_a_fallback_on_top_sees_the_decomposed_ops_not_the_op(rng):
    x = ll.tensor(rng.standard_normal(4).astype(np.float32))
    key = dispatch.register_key("DecompCounter", 121)
    seen = []

    def counting(op, below, args, kwargs):
        seen.append(op)
        return dispatch.redispatch(op, below, *args, **kwargs)
    dispatch.register_fallback(key, counting)
    dispatch.register_kernel("decomp_neg.Scalar", dispatch.CPU, lambda t, s: "never", dtypes=[ll.float32])
    dispatch.register_kernel("decomp_neg", dispatch.CPU, lambda t: "neg kernel", dtypes=[ll.float32])
    dispatch.register_decomposition("decomp_neg.Scalar", lambda t, s: dispatch.call("decomp_neg", t))
    with dispatch.include(key):
        assert dispatch.call("decomp_neg.Scalar", x, 1.0) == "neg kernel"
        assert dispatch.call("decomp_neg.Scalar", x, 1.0) == "neg kernel"
    assert seen == ["decomp_neg", "decomp_neg"]
    assert dispatch.call("decomp_neg.Scalar", x, 1.0) == "never"      # no fallback: the kernel


def test_an_op_with_only_a_decomposition_runs_it(rng):
    x = ll.tensor(rng.standard_normal(2).astype(np.float32))
    dispatch.register_decomposition("decomp_only", lambda t: t.shape)
    assert dispatch.call("decomp_only", x) == (2,)

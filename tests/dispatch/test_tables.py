"""The per-op tables: computed when something registers, read by a call; each entry names
where its kernel was defined, which is what explain() prints."""
import numpy as np
import pytest

import lowlevel as ll
from lowlevel import dispatch
from lowlevel.frontend.creation import from_numpy_values


def test_key_sets_are_ordered_by_priority():
    keys = dispatch.KeySet([dispatch.CPU, dispatch.Profiler, dispatch.CUDA])
    assert keys.keys == (dispatch.Profiler, dispatch.CUDA, dispatch.CPU)
    assert keys.below(dispatch.CUDA).keys == (dispatch.CPU,)
    assert dispatch.CUDA in keys and dispatch.CUDA not in keys.below(dispatch.CUDA)
    assert repr(keys) == "KeySet(Profiler, CUDA, CPU)"
    with pytest.raises(ValueError, match="priority must be an int >= 0"):
        dispatch.register_key("Negative", -1)
    with pytest.raises(ValueError, match="priority 10 is taken"):
        dispatch.register_key("SameAsCPU", 10)


def test_a_registration_recomputes_the_table_and_a_call_only_reads_it(rng):
    x = ll.tensor(rng.standard_normal(5).astype(np.float32))
    dispatch.register_kernel("tables_op", dispatch.CPU, lambda t: "cpu kernel")
    table = dispatch.op_table("tables_op")
    assert table.entries[dispatch.CPU.priority].kernel_for("float32").fn(x) == "cpu kernel"
    assert dispatch.call("tables_op", x) == "cpu kernel"
    assert dispatch.op_table("tables_op") is table              # calls compute nothing
    key = dispatch.register_key("TablesWrapper", 61)
    dispatch.register_kernel("tables_op", key, lambda t: "wrapper kernel")
    assert dispatch.op_table("tables_op") is not table          # recomputed at registration
    with dispatch.include(key):
        assert dispatch.call("tables_op", x) == "wrapper kernel"
    assert dispatch.call("tables_op", x) == "cpu kernel"


def test_a_fallback_and_a_fallthrough_for_every_op_reach_ops_registered_before_and_after(rng):
    x = ll.tensor(rng.standard_normal(3).astype(np.float32))
    key = dispatch.register_key("TablesCounter", 62)
    seen = []

    def counting(op, below, args, kwargs):
        seen.append(op)
        return dispatch.redispatch(op, below, *args, **kwargs)
    dispatch.register_kernel("tables_before", dispatch.CPU, lambda t: "before")
    dispatch.register_fallback(key, counting)
    dispatch.register_kernel("tables_after", dispatch.CPU, lambda t: "after")
    with dispatch.include(key):
        assert dispatch.call("tables_before", x) == "before"
        assert dispatch.call("tables_after", x) == "after"
        assert seen == ["tables_before", "tables_after"]
        assert dispatch.route("tables_after", x) == ["TablesCounter", "CPU"]
        dispatch.register_fallthrough(key)                       # now every op skips it
        assert dispatch.call("tables_before", x) == "before"
        assert dispatch.route("tables_before", x) == ["CPU"]
    assert seen == ["tables_before", "tables_after"]


def test_a_backend_without_the_dtype_says_which_it_has():
    key = dispatch.register_backend("TablesDevice", "tablesdev", priority=63)

    @dispatch.register_kernel("to_device", key)
    def to_tablesdev(x, device):
        return from_numpy_values(x.dtype.to_numpy_values(x.host_view()), x.dtype, device)

    dispatch.register_kernel("tables_scale", key, lambda t: "float32 kernel", dtypes=[ll.float32])
    a = ll.tensor([1, 2], dtype=ll.int64).to("tablesdev")
    with pytest.raises(NotImplementedError, match=r"tables_scale has no TablesDevice kernel for dtype int64 "
                                                  r"\(it has: float32\)"):
        dispatch.call("tables_scale", a)
    assert "no kernel for int64 (has float32): error" in ll.explain("tables_scale", a)
    assert dispatch.call("tables_scale", ll.tensor([1.0, 2.0]).to("tablesdev")) == "float32 kernel"


def test_explain_names_where_each_kernel_was_defined(device, capsys):
    a = ll.zeros(2, 2, device=device)
    backend = "cuda.elementwise" if device == "cuda" else "cpu"
    assert f"kernel lowlevel.backends.{backend}.add  <- chosen" in ll.explain("add", a, a)

    def made_by(factory_op):
        def kernel(x):
            return factory_op
        return kernel
    dispatch.register_kernel("tables_made", dispatch.CPU, made_by("tables_made"), name="tables_kernel")
    text = ll.explain("tables_made", ll.zeros(1))
    assert f"kernel {__name__}.tables_kernel  <- chosen" in text
    # lowlevel's own kernels, factory-made ones included, are named by module and op.
    for op in ("add", "sub", "neg", "sum", "matmul", "contiguous", "to_host"):
        for key in (dispatch.CPU, dispatch.CUDA):
            entry = dispatch.op_table(op).entries.get(key.priority)
            for registration in [*entry.kernels.values(), entry.default] if entry else []:
                assert registration is None or "<locals>" not in registration.where, (op, registration)
                assert registration is None or registration.where.startswith("lowlevel.backends."), registration


def test_call_known_is_call_with_the_key_set_computed_by_the_caller(rng):
    """What fast_ops uses: the caller's bits and dtype, plus the thread's include set."""
    x = ll.tensor(rng.standard_normal(3).astype(np.float32))
    dispatch.register_kernel("tables_known", dispatch.CPU, lambda t: "cpu kernel")
    key = dispatch.register_key("TablesKnownWrapper", 122)
    dispatch.register_kernel("tables_known", key, lambda t: "wrapper kernel")
    assert dispatch.call_known("tables_known", x.device.key_bit, "float32", x) == "cpu kernel"
    with dispatch.include(key):
        assert dispatch.call_known("tables_known", x.device.key_bit, "float32", x) == "wrapper kernel"
        assert dispatch.call("tables_known", x) == "wrapper kernel"

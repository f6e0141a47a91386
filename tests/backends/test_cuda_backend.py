"""The CUDA backend package: its settings and where its kernels are registered from."""
import lowlevel as ll
import lowlevel.backends.cuda as cuda_backend
from lowlevel import dispatch, trace


def test_allow_tf32_set_on_the_package_reaches_matmul(driver):
    a = ll.ones(4, 4, device="cuda")
    a @ a                                          # warm: the cuBLAS handle exists
    assert cuda_backend.allow_tf32 is False
    cuda_backend.allow_tf32 = True
    try:
        assert cuda_backend.matmul.allow_tf32 is True
        with trace.Recorder() as r:
            a @ a
    finally:
        cuda_backend.allow_tf32 = False
    modes = [c["args"].split(", ")[1] for c in r.calls if c["symbol"] == "cublasSetMathMode"]
    assert modes[0] == "3"                         # CUBLAS_TF32_TENSOR_OP_MATH, then restored
    with trace.Recorder() as r:
        a @ a
    assert [c["symbol"] for c in r.calls] == ["cublasSgemm_v2"]


def test_each_cuda_kernel_is_registered_from_its_module():
    where = {op: dispatch.op_table(op).entries[dispatch.CUDA.priority].kernel_for("float32").where
             for op in ("add", "relu", "sum", "softmax", "matmul", "contiguous", "cast", "to_host")}
    assert where == {
        "add": "lowlevel.backends.cuda.elementwise.add", "relu": "lowlevel.backends.cuda.elementwise.relu",
        "sum": "lowlevel.backends.cuda.reductions.sum_", "softmax": "lowlevel.backends.cuda.reductions.softmax",
        "matmul": "lowlevel.backends.cuda.matmul.matmul", "contiguous": "lowlevel.backends.cuda.layout.contiguous",
        "cast": "lowlevel.backends.cuda.layout.cast", "to_host": "lowlevel.backends.cuda.layout.to_host",
    }

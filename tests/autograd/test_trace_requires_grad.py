"""`lowlevel trace OP --requires-grad`: the forward's route goes through Autograd to CUDA,
and the report lists the kernels the backward launched."""
from lowlevel.cli import trace


def test_trace_shows_autograd_and_the_backward_kernels(driver):
    report = trace.run("matmul", size=16, requires_grad=True)
    assert "keys visited: Autograd -> CUDA" in report
    backward = report.split("\nbackward ")[1].split("\nL5")[0]
    assert "from MatmulBackward" in backward and backward.count("cuBLAS gemm") == 2
    plain = trace.run("softmax", size=16)
    assert "keys visited: CUDA" in plain and "\nbackward " not in plain
    softmax = trace.run("softmax", size=16, requires_grad=True).split("\nbackward ")[1]
    assert "reduce_rows_sum_f32" in softmax and "mul_f32" in softmax

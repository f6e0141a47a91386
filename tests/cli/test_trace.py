"""The five-layer trace, the main job: every layer reported, with figures."""
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trace(*args, driver="emu"):
    out = subprocess.run([sys.executable, "-m", "lowlevel", "trace", *args], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env={**os.environ, "LOWLEVEL_DRIVER": driver})
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("driver", ["emu", "cuda"])
def test_matmul_trace_shows_all_five_layers(driver):
    if driver == "cuda":
        from lowlevel import cuda
        if cuda.real_driver_status():
            pytest.skip(f"no real GPU here: {cuda.real_driver_status()}")
    text = trace("matmul", "--size", "128", "--dtype", "float32", driver=driver)
    for heading in ("L1  Python frontend", "L2  the ctypes boundary", "L3  the dispatcher", "L4  kernel libraries",
                    "L5  hardware", "summary"):
        assert heading in text
    assert re.search(r"matmul: \d+\.\d us", text)                                   # L1 figure
    assert re.search(r"cublasSgemm_v2\(.*128, 128, 128.*\) -> CUBLAS_STATUS_SUCCESS\s+\d+\.\d us", text)   # L2
    assert "CUDA       kernel lowlevel.backends.cuda.matmul.matmul  <- chosen" in text      # L3
    assert re.search(r"device time between events around the call: \d+\.\d us", text)   # L4
    assert re.search(r"sm_\d+, \d+ SMs", text)                                      # L5
    assert re.search(r"about \d+ us of lowlevel's host work per queued call for about \d+ us of", text)
    assert ("EMULATED GPU" in text) == (driver == "emu")


def test_ptx_kernel_trace_counts_thread_instructions():
    text = trace("add", "--size", "64")
    assert "add_f32 (elementwise_f32, grid" in text
    assert "PTX the driver compiled at load" in text
    count = int(re.search(r"PTX engine: ([\d,]+)", text).group(1).replace(",", ""))
    assert count >= 64 * 64 * 5            # at least a handful of instructions per element


def test_every_op_traces():
    from lowlevel.cli.trace import OPS
    for op in OPS:
        assert "summary" in trace(op, "--size", "16")


def test_a_float16_reduction_traces_its_float32_kernels():
    # float16 sums accumulate in float32 on CUDA: widened, summed, rounded back
    out = trace("sum", "--size", "8", "--dtype", "float16")
    assert "cast_f16_f32" in out and "cast_f32_f16" in out


def test_an_op_without_a_kernel_for_the_dtype_is_a_clear_error(monkeypatch, capsys):
    # every op and dtype the command offers has a CUDA kernel now: the dispatcher's refusal
    # is stood in for, to check the command turns it into a message and exit status 2
    from lowlevel.cli import main
    from lowlevel.cli import trace as trace_cli

    def refuse(op, **kwargs):
        raise NotImplementedError(f"{op} has no CUDA kernel for dtype {kwargs['dtype']}")
    monkeypatch.setattr(trace_cli, "run", refuse)
    assert main(["trace", "sum", "--size", "8", "--dtype", "float16"]) == 2
    err = capsys.readouterr().err
    assert "sum has no CUDA kernel for dtype float16" in err and "Traceback" not in err


def figure(label, text):
    return float(re.search(rf"{re.escape(label)}:? (\d+\.\d) us", text).group(1))


def test_the_summary_separates_lowlevel_from_the_emulated_driver():
    text = trace("add", "--size", "16")
    total = figure("untraced, one call after a synchronize (median of 3 calls)", text)
    own = figure("lowlevel (own Python and ctypes crossings)", text)
    inside = figure("driver (emulated)", text)
    waited = figure("waiting for the emulator's worker threads (Python's lock)", text)
    assert inside > 0 and own > 0
    assert abs(own + inside + waited - total) <= 0.3         # the three parts, rounded to 0.1 us
    queued = re.search(r"untraced, (\d+) calls queued in a row \(the GPU held until they are made\), per call: "
                       r"lowlevel ([\d.]+) us, driver \(emulated\) ([\d.]+) us", text)
    assert queued is not None and int(queued.group(1)) == 20, text       # a tiny op: the most calls
    queued_own, queued_inside = float(queued.group(2)), float(queued.group(3))
    assert queued_own > 0 and queued_inside > 0
    # the closing line rounds the unrounded figure to 1 us: 6.5 shown as 6.5 may read 6 or 7
    closing = re.search(r"about (\d+) us of lowlevel's host work per queued call .*; (\d+) us for one call after a "
                        r"synchronize\)", text)
    assert closing is not None and abs(int(closing.group(1)) - queued_own) <= 0.55, text
    assert abs(int(closing.group(2)) - own) <= 0.55, text


def test_the_queued_calls_cannot_hang_on_a_call_that_waits_for_the_gpu(driver, monkeypatch):
    """The host function that holds the stream lets go by itself: a call that synchronises
    (here, the whole work) waits for it, then goes on."""
    from lowlevel import cuda
    from lowlevel.cli import trace as cli_trace
    monkeypatch.setattr(cli_trace, "GATE_S", 0.2)
    start = time.perf_counter()
    split = cli_trace.queued_split(cuda.synchronize, driver, drain_s=0.4)      # 1 s / 0.4 s: 2 calls
    assert split["calls"] == 2 and time.perf_counter() - start < 5        # and one untimed before them
    assert split["wall"] < 0.1                  # the untimed call waited for the gate


def test_time_inside_emulated_calls_is_not_counted_as_lowlevel(driver, monkeypatch):
    """The emulator made 3 ms slower inside cuLaunchKernel: the driver's share grows by it,
    lowlevel's own does not."""
    if driver.kind != "emu":
        pytest.skip("the split is the emulated driver's")
    from lowlevel.cli import trace as cli_trace
    from lowlevel.emu.driver import launch

    original = launch.check_config

    def slow_check_config(*args):
        until = time.thread_time() + 0.003          # 3 ms of CPU, as the emulator's own Python
        while time.thread_time() < until:
            pass
        return original(*args)
    monkeypatch.setattr(launch, "check_config", slow_check_config)
    text = cli_trace.run("relu", size=8)
    assert figure("driver (emulated)", text) >= 3000
    assert figure("lowlevel (own Python and ctypes crossings)", text) < 3000


def test_trace_of_a_graph_replay():
    text = trace("relu", "--size", "16", "--graph")
    assert "one replay of the op captured in a CUDA graph" in text
    assert "L2  the ctypes boundary: 1 call into C" in text and "cuGraphLaunch(" in text
    assert re.search(r"the graph's \d+ nodes?, launched as one: .*kernel", text)
    assert "none in a replay" in text and "summary" in text


def test_a_graph_trace_needs_a_cuda_device():
    out = subprocess.run([sys.executable, "-m", "lowlevel", "trace", "add", "--size", "8", "--device", "cpu",
                          "--graph"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "LOWLEVEL_DRIVER": "emu"})
    assert out.returncode == 2 and "--graph captures the op on a CUDA device" in out.stderr

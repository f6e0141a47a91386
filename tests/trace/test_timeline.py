"""`with lowlevel.profile() as p:` records a timeline: driver and cuBLAS calls per host
thread, op spans, and device spans per stream timed by events; exported as a Chrome trace."""
import json
import threading
import types

import numpy as np
import pytest

import lowlevel as ll
from helpers import chrome_trace
from helpers.memory import download, upload
from lowlevel import cuda, kernels
from lowlevel.dispatch import profiler

N = 1024                 # small launches: the emulated GPU runs them in milliseconds


def _add(a, b, c, stream):
    f = kernels.module("vector_add").get_function("vector_add")
    f.launch(grid=N // 256, block=256, args=(a, b, c, N), stream=stream)


def _export(p, tmp_path) -> dict:
    path = tmp_path / "t.json"
    p.export_chrome_trace(path)
    return json.loads(path.read_text())


def test_chrome_trace_has_every_launch_with_a_flow(driver, rng, tmp_path):
    x, y = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    a, b = upload(x), upload(y)
    outs = [cuda.mem_alloc(4 * N) for _ in range(3)]
    s1, s2 = cuda.Stream(non_blocking=True), cuda.Stream(non_blocking=True)
    _add(a, b, outs[0], s1)                  # loaded before the profile
    cuda.synchronize()
    with ll.profile() as p:
        _add(a, b, outs[0], s1)
        _add(a, a, outs[1], s2)
        worker = threading.Thread(target=_add, args=(b, b, outs[2], s2), name="launcher")
        worker.start()
        worker.join()
        cuda.memset_d32(outs[0], 0, 1, stream=s1)       # one word zeroed after the kernel
    got = [download(o, N) for o in outs]
    ref0 = x + y
    ref0[0] = 0.0
    np.testing.assert_array_equal(got[0], ref0)
    np.testing.assert_array_equal(got[1], x + x)
    np.testing.assert_array_equal(got[2], y + y)

    found = chrome_trace.check(_export(p, tmp_path))
    kernels_run = [s for s in found["spans"] if s["cat"] == "kernel"]
    assert len(kernels_run) == 3 and {s["name"] for s in kernels_run} == {"vector_add"}
    for s in kernels_run:
        assert s["args"]["grid"] == [N // 256, 1, 1] and s["args"]["block"] == [256, 1, 1]
        assert "PTX JIT" in s["args"]["image"] or "SASS" in s["args"]["image"]
        assert s["args"]["registers"] > 0 and "dynamic shared bytes" in s["args"]
    launches = [s for s in found["spans"] if s["name"] == "cuLaunchKernel"]
    assert len(launches) == 3 and len(found["flows"]) == 4        # 3 launches and the memset
    finishes = {(f["pid"], f["tid"], f["ts"]) for _, f in found["flows"].values()}
    assert all((k["pid"], k["tid"], k["ts"]) in finishes for k in kernels_run)
    host = {name for (pid, _), name in found["threads"].items() if pid == 1}
    assert {"MainThread", "launcher"} <= host
    device_tracks = {(pid, tid) for (pid, tid) in found["threads"] if pid != 1}
    assert len(device_tracks) == 2                                 # the two streams
    memsets = [s for s in found["spans"] if s["cat"] == "memset"]
    assert len(memsets) == 1 and memsets[0]["ts"] >= max(k["ts"] for k in kernels_run if k["tid"] == memsets[0]["tid"])


def test_profile_adds_no_synchronisation(driver, rng):
    """Work queued inside the profile is still pending at its end; the exit waits for it."""
    x = rng.standard_normal(N).astype(np.float32)
    a, c = upload(x), cuda.mem_alloc(4 * N)
    s = cuda.Stream(non_blocking=True)
    _add(a, a, c, s)
    s.synchronize()
    gate = threading.Event()
    with ll.profile() as p:
        s.add_callback(lambda: gate.wait(10))       # the stream holds until the gate opens
        _add(a, a, c, s)
        pending = not s.query()                     # nothing in the profile waited for it
        gate.set()
    assert pending
    np.testing.assert_array_equal(download(c, N), x + x)
    cats = [span["cat"] for span in p.timeline.device]
    assert sorted(cats) == ["host function", "kernel"]
    host_fn, kernel = sorted(p.timeline.device, key=lambda sp: sp["start"])
    assert host_fn["cat"] == "host function" and kernel["start"] >= host_fn["end"]


def test_graph_capture_and_replay(driver, rng):
    """Inside a capture no event is recorded; the replay is one device span on its stream."""
    x = ll.tensor(rng.standard_normal((16, 16)).astype(np.float32), device="cuda")
    step = lambda: (x * 2.0).relu()          # noqa: E731
    step()
    with ll.profile() as p:
        with cuda.graph() as g:
            y = step()
        g.replay()
        got = y.numpy()
    np.testing.assert_array_equal(got, np.maximum(x.numpy() * 2.0, 0))
    captured = [s for s in p.timeline.host if "captured" in s["args"]]
    assert [s["name"] for s in captured].count("cuLaunchKernel") == 2        # x * 2.0, relu
    device = [s["cat"] for s in p.timeline.device]
    assert device.count("graph") == 1 and "kernel" not in device
    copies = [s for s in p.timeline.device if s["cat"] == "copy"]
    assert [c["args"]["bytes"] for c in copies] == [16 * 16 * 4]           # y.numpy()
    assert "host" in p.report(80)


def test_profile_inside_a_capture_leaves_it_valid(driver, rng):
    """A profile that opens and closes inside a capture waits for nothing there (a wait would
    invalidate the capture); the work it saw on another stream is read when next asked."""
    x = ll.tensor(rng.standard_normal((16, 16)).astype(np.float32), device="cuda")
    h = rng.standard_normal(N).astype(np.float32)
    a, c = upload(h), cuda.mem_alloc(4 * N)
    other = cuda.Stream(non_blocking=True)
    _add(a, a, c, other)
    (x * 2.0).relu()
    other.synchronize()
    with cuda.graph() as g:
        with ll.profile() as p:
            y = (x * 2.0).relu()
            _add(a, a, c, other)                 # not captured: a device span, read later
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.maximum(x.numpy() * 2.0, 0))
    np.testing.assert_array_equal(download(c, N), h + h)
    assert "K kernel" in p.report(80)                   # read now, after the capture
    assert [s["name"] for s in p.timeline.device] == ["vector_add"]


def test_report_table_driver_and_ascii_timeline(driver, rng):
    a = ll.tensor(rng.standard_normal((8, 8)).astype(np.float32), device="cuda")
    (a @ a).relu().numpy()
    with ll.profile() as p:
        b = (a @ a).relu()
    report = p.report(width=100)
    assert cuda.get_driver().description in report
    assert "device times: measured" in report
    assert "matmul" in report and "Profiler -> CUDA" in report
    rows = report.splitlines()
    host = [r for r in rows if r.startswith("host MainThread")]
    streams = [r for r in rows if r.startswith("dev 0")]
    assert len(host) == 1 and len(host[0]) == 100 and ("=" in host[0] or "o" in host[0])      # the op, or its backend span over it
    assert streams and set("BK") & set("".join(streams))      # cuBLAS's work, relu's kernel
    assert sorted(sp["cat"] for sp in p.timeline.device) == ["cublas", "kernel"]
    assert "legend:" in report and "K kernel" in report
    assert [r["op"] for r in p.records] == ["matmul", "relu"]
    assert all(p.device_us(r) > 0 for r in p.records)
    assert "cublasSgemm_v2" in {s["name"] for s in p.timeline.host}
    np.testing.assert_allclose(b.numpy(), np.maximum(a.numpy() @ a.numpy(), 0), rtol=1e-5, atol=1e-5)


def test_report_says_device_times_are_modelled(monkeypatch, rng):
    cuda.use_driver("emu")
    monkeypatch.setattr(profiler, "device_timing", lambda drv: "modelled (H200 time model)")
    a = ll.tensor(rng.standard_normal(8).astype(np.float32), device="cuda")
    with ll.profile() as p:
        a.relu()
    assert "MODELLED" in p.report(80) and "H200 time model" in p.report(80)


def test_device_timing_is_the_drivers_word_else_the_environment(monkeypatch):
    said = types.SimpleNamespace(kind="emu", timing="modelled (H200 time model)")
    assert profiler.device_timing(said) == "modelled (H200 time model)"
    silent = types.SimpleNamespace(kind="emu")
    monkeypatch.setenv("LOWLEVEL_EMU_TIMING", "model")
    assert profiler.device_timing(silent).startswith("modelled")
    monkeypatch.setenv("LOWLEVEL_EMU_TIMING", "cpu")
    assert profiler.device_timing(silent) == "emulator CPU time"
    assert profiler.device_timing(types.SimpleNamespace(kind="cuda")) == "measured on the GPU"


def test_plot_needs_matplotlib_and_says_how_to_get_it(monkeypatch, tmp_path):
    with ll.profile() as p:
        ll.ones(4) + 1
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install lowlevel\[plot\]"):
        p.plot(tmp_path / "t.png")


def test_plot_draws_threads_and_streams(driver, rng, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install lowlevel[plot])")
    a = ll.tensor(rng.standard_normal(64).astype(np.float32), device="cuda")
    with ll.profile() as p:
        a.relu().numpy()
    p.plot(tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpu_ops_have_host_spans_only():
    x = np.arange(6, dtype=np.float32)
    with ll.profile() as p:
        y = ll.tensor(x) * 3.0
    np.testing.assert_array_equal(y.numpy(), x * 3.0)
    assert p.timeline.device == [] and any(s["cat"] == "op" for s in p.timeline.host)
    assert "(no driver call in this profile)" in p.report(80)


def test_an_op_has_a_dispatch_span_and_a_backend_span_inside_it(driver):
    """Each op: its span (the dispatch) and, inside it, the backend kernel function's span,
    named by the key that ran it."""
    a, b = ll.randn(8, 8, device="cuda"), ll.randn(8, 8, device="cuda")
    with ll.profile() as p:
        (a + b).relu()
    host = p.timeline.host
    for op in ("add", "relu"):
        outer = next(s for s in host if s["cat"] == "op" and s["name"] == op)
        inner = next(s for s in host if s["cat"] == "backend" and s["name"] == f"{op}: CUDA kernel")
        assert outer["start"] <= inner["start"] <= inner["end"] <= outer["end"] and outer["tid"] == inner["tid"]
    assert "o the backend's kernel function" in p.report()

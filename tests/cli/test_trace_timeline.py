"""`lowlevel trace OP --timeline t.json`: the traced call's timeline, as a Chrome trace."""
import json

from helpers import chrome_trace
from lowlevel.cli import main


def test_trace_timeline_writes_a_chrome_trace(driver, tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["trace", "matmul", "--size", "32", "--timeline", str(path)]) == 0
    text = capsys.readouterr().out
    assert f"written to {path}" in text and "legend:" in text and "host MainThread" in text
    document = json.loads(path.read_text())
    found = chrome_trace.check(document)
    names = {s["name"] for s in found["spans"]}
    assert "matmul" in names and "cublasSgemm_v2" in names
    work = [s for s in found["spans"] if s["cat"] == "cublas" and s["pid"] != 1]
    assert len(work) == 1 and work[0]["dur"] > 0                  # the gemm, on its stream
    assert document["otherData"]["driver"].startswith(f"driver: {driver.kind}")


def test_trace_timeline_of_elementwise_op_links_launch_to_kernel(driver, tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["trace", "relu", "--size", "32", "--timeline", str(path)]) == 0
    capsys.readouterr()
    found = chrome_trace.check(json.loads(path.read_text()))
    kernels = [s for s in found["spans"] if s["cat"] == "kernel"]
    assert [k["name"] for k in kernels] == ["relu_f32"]
    (start, finish), = [f for f in found["flows"].values() if f[1]["ts"] == kernels[0]["ts"]]
    assert start["pid"] == 1 and finish["tid"] == kernels[0]["tid"]

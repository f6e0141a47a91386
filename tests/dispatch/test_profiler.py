"""The Profiler key: while `with ll.profile()` is active every op is recorded with its
route and times, then continues to its backend."""
import numpy as np

import lowlevel as ll


def test_profiler_records_route_and_times(device, rng):
    a = ll.tensor(rng.standard_normal((8, 8)).astype(np.float32), device=device)
    with ll.profile() as prof:
        b = (a @ a).relu()
        b.sum()
    ops = [r["op"] for r in prof.records]
    assert ops == ["matmul", "relu", "sum"]
    backend = "CUDA" if device == "cuda" else "CPU"
    assert all(r["route"] == ["Profiler", backend] for r in prof.records)
    report = prof.report()
    assert "matmul" in report and "Profiler -> " + backend in report
    with ll.profile() as outer:
        pass
    assert outer.records == []

"""The ASCII timeline draws short bursts of device work again over their own span, so that
microseconds of (modelled or real GPU) work beside milliseconds of host time stay visible."""
from types import SimpleNamespace

from lowlevel.trace.ascii_art import render


def _span(cat, name, start, end, stream=7):
    return {"cat": cat, "name": name, "start": start, "end": end, "device": 0, "stream": stream}


def test_a_short_burst_of_device_work_is_drawn_zoomed():
    host = [{"cat": "driver", "name": "cuLaunchKernel", "start": 0, "end": 100_000_000, "tid": 1}]
    device = [_span("host function", "gate", 0, 50_000_000),        # holds the stream: not work
              _span("copy", "cuMemcpyHtoDAsync", 50_000_000, 50_010_000),
              _span("kernel", "k", 50_010_000, 50_020_000),
              _span("copy", "cuMemcpyDtoHAsync", 50_020_000, 50_030_000)]
    timeline = SimpleNamespace(host=host, device=device, threads={1: "MainThread"},
                               bounds=lambda: (0, 100_000_000))
    text = render(timeline, width=86)
    whole, zoomed = text.split("drawn over its own span:")
    assert "50 ms on" in whole and "30 us" in zoomed
    row = next(line for line in zoomed.splitlines() if line.startswith("dev 0"))
    cells = row.split("|")[1]
    assert cells.count(">") > 15 and cells.count("K") > 15 and cells.count("<") > 15   # a third each


def test_device_work_that_fills_the_view_is_drawn_once():
    host = [{"cat": "driver", "name": "cuLaunchKernel", "start": 0, "end": 1000, "tid": 1}]
    device = [_span("kernel", "k", 100, 900)]
    timeline = SimpleNamespace(host=host, device=device, threads={1: "MainThread"}, bounds=lambda: (0, 1000))
    assert "own span" not in render(timeline, width=86)

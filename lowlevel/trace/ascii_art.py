"""A timeline drawn with characters, for the terminal: a row per host thread and per stream,
time scaled to the width, each span a run of its category's character.

    host MainThread        |vv====cc===c=======                                      |
    dev 0 legacy stream    |        KKKKKKKKKKKK  >>>>                               |
                           0                                                  1.25 ms

Longer spans are drawn first, so a short call inside an op stays visible.
"""
import shutil

from .timeline import DEFAULT_STREAMS, stream_label

SYMBOLS = {"op": "=", "backend": "o", "frontend": "v", "driver": "c", "cublas": "b", "profiler": "a",
           "kernel": "K", "copy": ">", "memset": "M", "host function": "h", "graph": "G"}
LEGEND = {"=": "op (dispatch)", "o": "the backend's kernel function", "v": "frontend validation", "c": "driver call", "b": "cuBLAS call",
          "a": "profiler's anchor", "K": "kernel", ">": "copy HtoD", "<": "copy DtoH", "~": "copy DtoD/other",
          "M": "memset", "h": "host function", "G": "graph launch", "B": "cuBLAS work"}
LABEL = 24


def _symbol(span: dict, device: bool) -> str:
    if span["cat"] == "copy":
        name = span["name"]
        return ">" if "HtoD" in name else "<" if "DtoH" in name else "~"
    if span["cat"] == "cublas" and device:
        return "B"
    return SYMBOLS.get(span["cat"], "#")


def _draw(cells: list[str], spans: list[dict], lo: int, scale: float, device: bool) -> set[str]:
    used = set()
    for span in sorted(spans, key=lambda s: s["start"] - s["end"]):       # longest first
        first = int((span["start"] - lo) * scale)
        last = max(first, int((span["end"] - lo) * scale - 1e-9))
        char = _symbol(span, device)
        used.add(char)
        for i in range(max(0, first), min(len(cells), last + 1)):
            cells[i] = char
    return used


def _duration(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e3:.3g} us"


def _stream_row(device: int, stream: int, numbers: dict) -> str:
    """A short, distinct row label: the default streams by name, the others numbered in
    handle order per device (the Chrome trace names them by handle)."""
    if stream in DEFAULT_STREAMS:
        return f"dev {device} " + stream_label(stream).replace(" default stream", " stream")
    numbers[device] = numbers.get(device, 0) + 1
    return f"dev {device} stream {numbers[device]} ({stream:#x})"


def _device_rows(timeline, lo: int, hi: int, cols: int, used: set) -> list[str]:
    scale = cols / max(1, hi - lo)
    rows, numbers = [], {}
    for device, stream in sorted({(s["device"], s["stream"]) for s in timeline.device}):
        cells = [" "] * cols
        spans = [s for s in timeline.device if (s["device"], s["stream"]) == (device, stream)]
        used |= _draw(cells, spans, lo, scale, True)
        rows.append(f"{_stream_row(device, stream, numbers)[:LABEL - 1]:{LABEL}s}|{''.join(cells)}|")
    return rows


def _bursts(spans: list[dict], cell: float) -> list[tuple[int, int]]:
    """(start, end) of the runs of device work (host functions aside: they only hold a
    stream) with no gap of more than a few cells of the whole view between their spans."""
    bursts: list[list[int]] = []
    for span in sorted((s for s in spans if s["cat"] != "host function"), key=lambda s: s["start"]):
        if bursts and span["start"] <= bursts[-1][1] + 4 * cell:
            bursts[-1][1] = max(bursts[-1][1], span["end"])
        else:
            bursts.append([span["start"], span["end"]])
    return [(a, b) for a, b in bursts if b > a]


def render(timeline, width: int | None = None) -> str:
    """The ASCII timeline of `timeline`, `width` characters wide (default: the terminal's).
    When the device's work fills a small part of it (a fast GPU, or modelled times, beside
    a slow host), the streams are drawn again over the device's own span."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    cols = max(20, width - LABEL - 2)
    lo, hi = timeline.bounds()
    scale = cols / max(1, hi - lo)
    rows, used = [], set()
    for ident in sorted({s["tid"] for s in timeline.host}):
        cells = [" "] * cols
        used |= _draw(cells, [s for s in timeline.host if s["tid"] == ident], lo, scale, False)
        name = timeline.threads.get(ident, str(ident))
        rows.append(f"{('host ' + name)[:LABEL - 1]:{LABEL}s}|{''.join(cells)}|")
    rows += _device_rows(timeline, lo, hi, cols, used)
    rows.append(" " * LABEL + "0" + _duration(hi - lo).rjust(cols + 1))
    for dlo, dhi in _bursts(timeline.device, (hi - lo) / cols)[:3]:
        if 4 * (dhi - dlo) < hi - lo:
            rows.append(f"the device's work from {_duration(dlo - lo)} on, drawn over its own span:")
            rows += _device_rows(timeline, dlo, dhi, cols, used)
            rows.append(" " * LABEL + "0" + _duration(dhi - dlo).rjust(cols + 1))
    legend = ", ".join(f"{c} {LEGEND[c]}" for c in LEGEND if c in used)
    if legend:
        rows.append("legend: " + legend)
    return "\n".join(rows)

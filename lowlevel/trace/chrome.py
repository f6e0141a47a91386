"""A timeline as the Chrome trace event format (the JSON that Perfetto, ui.perfetto.dev, and
chrome://tracing open): {"traceEvents": [...], "displayTimeUnit": "ns"}.

    pid 1             the host: a track (tid) per thread, named by "M" thread_name events
    pid 100 + N       device N: a track per stream
    "X" events        every span, ts and dur in microseconds from the profile's start
    "s" / "f" events  a flow from each call that queued device work to that work's span,
                      the finish bound to the enclosing slice ("bp": "e")

Events are written per track in order of ts, the metadata first.
"""
import json

from .timeline import stream_label

HOST_PID = 1
DEVICE_PID = 100


def _us(ns: int, origin: int) -> float:
    return round((ns - origin) / 1000, 3)


def _meta(name: str, pid: int, tid: int | None, value: str) -> dict:
    event = {"name": name, "ph": "M", "pid": pid, "args": {"name": value}}
    if tid is not None:
        event["tid"] = tid
    return event


def _complete(span: dict, pid: int, tid: int, origin: int) -> dict:
    args = {k: v for k, v in span["args"].items() if k not in ("issued by thread", "issued at")}
    return {"name": span["name"], "cat": span["cat"], "ph": "X", "pid": pid, "tid": tid,
            "ts": _us(span["start"], origin), "dur": max(0.0, _us(span["end"], span["start"])), "args": args}


def _flow(phase: str, flow: int, pid: int, tid: int, ts: float) -> dict:
    event = {"name": "launch", "cat": "flow", "ph": phase, "id": flow, "pid": pid, "tid": tid, "ts": ts}
    if phase == "f":
        event["bp"] = "e"
    return event


def trace_events(timeline) -> list[dict]:
    """The events of `timeline` (host tracks first, then each device's streams)."""
    origin = timeline.bounds()[0]
    threads = {ident: n for n, ident in enumerate(sorted({s["tid"] for s in timeline.host}), start=1)}
    streams = {key: n for n, key in enumerate(sorted({(s["device"], s["stream"]) for s in timeline.device}), start=1)}
    flows = {s["flow"] for s in timeline.device if s["flow"] is not None}
    events = [_meta("process_name", HOST_PID, None, f"host ({timeline.driver or 'lowlevel'})")]
    for ident, tid in threads.items():
        events.append(_meta("thread_name", HOST_PID, tid, timeline.threads.get(ident, f"thread {ident}")))
    modelled = " (modelled times)" if timeline.modelled else ""
    for device in sorted({d for d, _ in streams}):
        events.append(_meta("process_name", DEVICE_PID + device, None, f"device {device}{modelled}"))
    for (device, stream), tid in streams.items():
        events.append(_meta("thread_name", DEVICE_PID + device, tid, stream_label(stream)))
    timed = []
    for span in timeline.host:
        tid = threads[span["tid"]]
        timed.append(_complete(span, HOST_PID, tid, origin))
        if span["flow"] in flows:           # the call's device span was measured: draw the arrow
            middle = (span["start"] + span["end"]) // 2
            timed.append(_flow("s", span["flow"], HOST_PID, tid, _us(middle, origin)))
    for span in timeline.device:
        pid, tid = DEVICE_PID + span["device"], streams[(span["device"], span["stream"])]
        event = _complete(span, pid, tid, origin)
        timed.append(event)
        if span["flow"] is not None:
            timed.append(_flow("f", span["flow"], pid, tid, event["ts"]))
    # Per track in time order; at one ts the longer span first (it encloses the shorter), the
    # flow events after the slice they bind to.
    timed.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], e["ph"] != "X", -e.get("dur", 0)))
    return events + timed


def export(timeline, path) -> None:
    """Write `timeline` to `path` as a Chrome trace (open it in ui.perfetto.dev)."""
    document = {"traceEvents": trace_events(timeline), "displayTimeUnit": "ns",
                "otherData": {"driver": timeline.driver, "device times": _device_times(timeline),
                              "notes": list(timeline.notes)}}
    with open(path, "w") as f:
        json.dump(document, f, indent=None, separators=(",", ":"))


def _device_times(timeline) -> str:
    if timeline.modelled:
        return f"MODELLED by the emulated GPU's time model: {timeline.timing}"
    return f"measured with CUDA events ({timeline.timing or 'the driver did not say'})"

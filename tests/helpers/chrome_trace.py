"""Checks of an exported Chrome trace (the trace event format's JSON object form) that any
test of a profile can use: `check(document)` asserts the format and returns what it found."""
from collections import Counter, defaultdict

REQUIRED = ("name", "ph", "ts", "pid", "tid")


def check(document: dict) -> dict:
    """Assert `document` is a well-formed trace; returns {"spans": [...X events], "threads":
    {(pid, tid): name}, "processes": {pid: name}, "flows": {id: (start, finish)}}."""
    assert set(document) >= {"traceEvents", "displayTimeUnit"}, sorted(document)
    assert document["displayTimeUnit"] in ("ms", "ns")
    events = document["traceEvents"]
    assert isinstance(events, list) and events
    threads, processes, spans = {}, {}, []
    flow_events = defaultdict(list)
    open_spans = defaultdict(list)
    last_ts = {}
    for e in events:
        if e["ph"] == "M":
            assert {"name", "pid", "args"} <= set(e), e
            if e["name"] == "thread_name":
                threads[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e["name"] == "process_name":
                processes[e["pid"]] = e["args"]["name"]
            continue
        missing = [k for k in REQUIRED if k not in e]
        assert not missing, f"{e} lacks {missing}"
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        track = (e["pid"], e["tid"])
        if e["ph"] in ("X", "B"):
            # Slices of a track come in time order (what the viewers need to nest them).
            assert e["ts"] >= last_ts.get(track, 0), f"ts goes back on track {track}: {e}"
            last_ts[track] = e["ts"]
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            spans.append(e)
        elif e["ph"] == "B":
            open_spans[track].append(e)
        elif e["ph"] == "E":
            assert open_spans[track], f"an E without its B on track {track}: {e}"
            open_spans[track].pop()
        elif e["ph"] in ("s", "f"):
            assert "id" in e, e
            if e["ph"] == "f":
                assert e.get("bp") == "e", e
            flow_events[e["id"]].append(e)
        else:
            raise AssertionError(f"unexpected phase {e['ph']!r}: {e}")
    assert not any(open_spans.values()), f"unbalanced B/E spans: {dict(open_spans)}"
    flows = {}
    for flow_id, pair in flow_events.items():
        phases = Counter(e["ph"] for e in pair)
        assert phases == Counter({"s": 1, "f": 1}), f"flow {flow_id}: {pair}"
        start, finish = sorted(pair, key=lambda e: e["ph"] != "s")
        flows[flow_id] = (start, finish)
    for start, finish in flows.values():
        assert _inside(start, spans) and _inside(finish, spans), (start, finish)
    for pid, tid in {(e["pid"], e["tid"]) for e in spans}:
        assert (pid, tid) in threads, f"track {(pid, tid)} has no thread_name"
        assert pid in processes, f"process {pid} has no process_name"
    return {"spans": spans, "threads": threads, "processes": processes, "flows": flows}


def _inside(event: dict, spans: list[dict]) -> bool:
    """Whether a flow event lies in a slice of its own track (what it binds to)."""
    return any(s["pid"] == event["pid"] and s["tid"] == event["tid"] and s["ts"] <= event["ts"] <= s["ts"] + s["dur"]
               for s in spans)

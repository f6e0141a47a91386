"""The modelled device timeline (LOWLEVEL_EMU_TIMING=model): when each device operation of a
context would start and end on the modelled H200, for the real host submission times.

Every work item the streams run is an Op: its real submission time (when the host called
the driver function that queued it; time.perf_counter_ns, the host's clock: modelled times
are on the same clock), the ops it must follow (its
stream's previous op, the legacy default stream's implicit dependencies, the events it
waits for) and, once the emulator ran it, its Segments (timemodel.py). An op starts at

    max(submission + launch latency, the modelled end of every op it follows,
        the time its resource has room for it)

and its segments (a graph replay has one per node) run one after the other.

Resources: each copy direction is one copy engine (H2D and D2H copies overlap each other
and kernels; two copies in one direction serialise); kernels, memsets and device-to-device
copies share the SMs: each uses a share of them (a small grid: the fraction of the device
it fills; a large one: all), and ops run side by side while their shares add up to at most
1, else the later one waits for room (no op is slowed by another: "roughly share" is
modelled as packing). Host functions occupy only their stream, from when the model
reaches them until the later of that plus the real time they ran and the real time they
returned (what follows one on a GPU cannot start before it returned). Running ops are never
preempted.

Placement is lazy: an op is placed once the emulator has run it and something asks for
modelled times (cuEventElapsedTime), or enough ops are waiting. Among the ops ready when a
resource has room, the one of the higher-priority stream (the lower number, as
cuStreamCreateWithPriority takes it) goes first, then the earlier ready: as the block
scheduler hands freed SMs to the higher-priority stream's kernel.

Once placed, an op's times never change (an event's time is fixed once reported).
"""
from __future__ import annotations

import itertools
import math
import os
import threading
import time

from .h200 import H200, DeviceFigures

PLACE_WHEN_WAITING = 256      # ops completed but unplaced that trigger placement anyway
_RESOURCE_HISTORY = 1024      # placed intervals kept per resource (older ones ended long ago)

ENV = "LOWLEVEL_EMU_TIMING"
MODES = ("cpu", "model")


def mode_from_env() -> str:
    """LOWLEVEL_EMU_TIMING: "model" for the time model, "cpu" (or unset) for the emulator's
    own times; read when a context is created (the first cuDevicePrimaryCtxRetain of a
    device, and again after cuDevicePrimaryCtxReset)."""
    value = os.environ.get(ENV, "").strip().lower() or "cpu"
    if value not in MODES:
        raise ValueError(f"{ENV}={os.environ.get(ENV)!r}: expected 'model' (the H200 time model) or 'cpu'")
    return value


class Op:
    """One work item of a stream, as the model sees it."""

    __slots__ = ("timeline", "seq", "label", "priority", "submit_ns", "after", "segments", "completed", "start_ns",
                 "end_ns")

    def __init__(self, timeline, seq: int, label: str, priority: int, after: list):
        self.timeline = timeline
        self.seq = seq
        self.label = label
        self.priority = priority
        self.submit_ns = time.perf_counter_ns()
        self.after = after
        self.segments: list = []
        self.completed = False
        self.start_ns: int | None = None
        self.end_ns: int | None = None

    @property
    def placed(self) -> bool:
        return self.end_ns is not None


class Resource:
    """A resource of capacity 1 and the intervals placed on it: (start, end, share)."""

    def __init__(self):
        self.intervals: list[tuple[int, int, float]] = []

    def earliest(self, ready: int, duration: int, share: float) -> int:
        """The first time >= ready when `share` of the resource is free for `duration`."""
        live = [iv for iv in self.intervals if iv[1] > ready]       # what ended before is no matter
        if share + sum(sh for _, _, sh in live) <= 1.0 + 1e-9:
            return ready
        for t in sorted({ready, *(e for _, e, _ in live)}):
            if _usage(live, t, t + max(duration, 1)) + share <= 1.0 + 1e-9:
                return t
        return max(e for _, e, _ in live)

    def add(self, start: int, end: int, share: float) -> None:
        self.intervals.append((start, end, share))
        if len(self.intervals) > _RESOURCE_HISTORY:
            self.intervals.sort(key=lambda iv: iv[1])
            del self.intervals[: len(self.intervals) - _RESOURCE_HISTORY]


def _usage(intervals, t0: int, t1: int) -> float:
    """The most of a resource that `intervals` use at any time in [t0, t1)."""
    overlapping = [(s, e, sh) for s, e, sh in intervals if s < t1 and e > t0]
    points = [t0, *(s for s, _, _ in overlapping if s > t0)]
    return max((sum(sh for s, e, sh in overlapping if s <= p < e) for p in points), default=0.0)


class DeviceTimeline:
    """The modelled timeline of one context's device work."""

    description = "modelled (H200 time model)"

    def __init__(self, figures: DeviceFigures = H200):
        self.figures = figures
        self.lock = threading.Lock()          # stream workers complete ops concurrently
        self.resources = {name: Resource() for name in ("sm", "h2d", "d2h", "peer")}
        self.waiting: list[Op] = []           # completed, not placed yet
        self._seq = itertools.count()

    def new_op(self, label: str, priority: int, after, submit_ns: int | None = None) -> Op:
        """An op submitted at `submit_ns` (None: now), following the ops `after` (None: none).
        Ops of another device's timeline are left out (a synchronous peer copy waits for
        the other device's work in the emulator, not in the model)."""
        op = Op(self, next(self._seq), label, priority, [a for a in after if a is not None and a.timeline is self])
        if submit_ns is not None:
            op.submit_ns = submit_ns
        return op

    def completed(self, op: Op) -> None:
        """The emulator has run `op` (its segments are noted); called before its stream
        lets anything after it run."""
        with self.lock:
            op.completed = True
            self.waiting.append(op)
            if len(self.waiting) >= PLACE_WHEN_WAITING:
                self._place_waiting()

    def times(self, op: Op) -> tuple[int, int]:
        """(start, end) of a completed op on the modelled timeline, in perf_counter ns."""
        with self.lock:
            if not op.placed:
                self._place_waiting()
            return op.start_ns, op.end_ns

    def event_time_ns(self, op: Op) -> int:
        """When the stream reached an event record, rounded up to the event resolution."""
        step = int(self.figures.event_resolution_s * 1e9)
        return math.ceil(self.times(op)[1] / step) * step

    # ---- placement ------------------------------------------------------------------------
    def _ready(self, op: Op) -> int | None:
        """When `op` may start (None: an op it follows is not placed yet)."""
        if any(not a.placed for a in op.after):
            return None
        latency = int(self.figures.launch_latency_s * 1e9)
        return max([op.submit_ns + latency, *(a.end_ns for a in op.after)])

    def _first_start(self, op: Op, ready: int) -> int:
        if _resource(op) is None:
            return ready
        seg = op.segments[0]
        return self.resources[seg.resource].earliest(ready, int(seg.seconds * 1e9), seg.share)

    def _place_waiting(self) -> None:
        while self.waiting:
            ready = {id(op): r for op in self.waiting if (r := self._ready(op)) is not None}
            candidates = [op for op in self.waiting if id(op) in ready]
            if not candidates:          # every waiting op follows one still running
                return
            first = min(candidates, key=lambda op: (ready[id(op)], op.seq))
            start = self._first_start(first, ready[id(first)])
            kind = _resource(first)
            # Ops that need no resource (event records, waits, host functions) and are ready
            # by then come first: what follows them may be a rival for the resource.
            free = [op for op in candidates if _resource(op) is None and ready[id(op)] <= start]
            # else a higher-priority op ready by then, for the same resource, goes first
            rivals = [op for op in candidates if ready[id(op)] <= start and op.priority < first.priority
                      and _resource(op) == kind]
            if free:
                first = min(free, key=lambda op: (ready[id(op)], op.seq))
            elif rivals:
                first = min(rivals, key=lambda op: (op.priority, ready[id(op)], op.seq))
            self._place(first, ready[id(first)])
            self.waiting.remove(first)

    def _place(self, op: Op, ready: int) -> None:
        t = ready
        op.start_ns = None
        for i, seg in enumerate(op.segments):
            if i:                       # the next node of a graph replay
                t += int(self.figures.graph_node_s * 1e9)
            duration = int(seg.seconds * 1e9)
            if seg.resource == "host":
                # a host function holds its stream until it really returned: where the
                # model reached it before the emulator did, it ends then, not `duration` on
                start = t
                end = max(start + duration, seg.returned_ns or 0)
            else:
                resource = self.resources[seg.resource]
                start = resource.earliest(t, duration, seg.share)
                end = start + duration
                resource.add(start, end, seg.share)
            if op.start_ns is None:
                op.start_ns = start
            t = end
        op.start_ns = t if op.start_ns is None else op.start_ns
        op.end_ns = t
        op.after = []                   # placed: the ops it followed are no longer needed


def _resource(op: Op) -> str | None:
    """The resource `op` needs first (None: none, it only takes time on its stream)."""
    if not op.segments or op.segments[0].resource == "host":
        return None
    return op.segments[0].resource


def timeline_from_env() -> DeviceTimeline | None:
    """A timeline for a new context when LOWLEVEL_EMU_TIMING=model, else None."""
    return DeviceTimeline() if mode_from_env() == "model" else None


__all__ = ["ENV", "DeviceTimeline", "Op", "Resource", "mode_from_env", "timeline_from_env"]

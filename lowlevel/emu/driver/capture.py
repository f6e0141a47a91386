"""Stream capture in the emulated driver: the capture sequence, graphs, their nodes.

While a stream captures, work queued on it does not run: it becomes a node of the capture's
graph, depending on what the stream's previous work was (its `frontier`). An event recorded
on a capturing stream holds that frontier; a stream that waits for it joins the capture
(cross-stream capture, fork and join by events). Plain event record and wait are
dependencies, not nodes, as on the driver.

What the driver forbids during a capture fails with its code and invalidates the capture
(`invalidate`); cuStreamEndCapture then reports CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. The
"potentially unsafe" calls (cuMemAlloc, synchronous copies, cuCtxSynchronize, ...) are
refused by the mode rules of cuStreamBeginCapture: a thread may not make them while it has
a capture of its own not begun in relaxed mode, nor while any thread has a global one.
"""
import itertools
import threading

from ...capi.constants import GRAPH_NODE_TYPE, STREAM_CAPTURE_MODE
from .errors import EmuError

GLOBAL = STREAM_CAPTURE_MODE["CU_STREAM_CAPTURE_MODE_GLOBAL"]
THREAD_LOCAL = STREAM_CAPTURE_MODE["CU_STREAM_CAPTURE_MODE_THREAD_LOCAL"]
RELAXED = STREAM_CAPTURE_MODE["CU_STREAM_CAPTURE_MODE_RELAXED"]

# A queued operation's label (Context.submit) -> the type of node it becomes in a capture.
# cuBLAS runs kernels on a GPU: captured, each call is a kernel node.
_NODE_TYPES = {"kernel": "KERNEL", "memcpy": "MEMCPY", "memset": "MEMSET", "host function": "HOST",
               "graph launch": "GRAPH", "cuBLAS": "KERNEL"}
_capture_ids = itertools.count(1)


def node_type(label: str) -> int:
    for prefix, name in _NODE_TYPES.items():
        if label.startswith(prefix):
            return GRAPH_NODE_TYPE[f"CU_GRAPH_NODE_TYPE_{name}"]
    raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", f"{label} is not captured by the emulated driver")


class Node:
    """One operation of a graph: `run` does it (kernel parameters were copied at capture);
    `deps` are the nodes it waits for; `key` says what an update may not change (the
    kernel)."""

    __slots__ = ("handle", "type", "run", "deps", "label", "key")

    def __init__(self, handle, type_, run, deps, label, key):
        self.handle, self.type, self.run, self.deps, self.label, self.key = handle, type_, run, deps, label, key


class Graph:
    """A captured graph: its nodes in capture order, which is a dependency order."""

    def __init__(self, handle: int):
        self.handle = handle
        self.nodes: list[Node] = []


class GraphExec:
    """An instantiated graph: a snapshot of the nodes' operations, run in order as one work
    item (`last`: the previous launch, which the next one follows)."""

    def __init__(self, handle: int, graph: Graph):
        self.handle = handle
        self.nodes = list(graph.nodes)
        self.runs = [n.run for n in self.nodes]
        self.last = None

    def work(self):
        """One launch: the operations as they are now (a later update does not change it)."""
        runs = tuple(self.runs)

        def run_all():
            for run in runs:
                run()
        return run_all


class Capture:
    """One capture sequence, begun on `origin` by the thread `thread`."""

    def __init__(self, mode: int, origin, graph: Graph):
        self.id = next(_capture_ids)
        self.mode = mode
        self.origin = origin
        self.graph = graph
        self.thread = threading.get_ident()
        self.invalid: str | None = None       # why it was invalidated
        self.frontier = {origin: []}           # stream -> the nodes its next work depends on
        self.info_array = None                 # keeps cuStreamGetCaptureInfo's array alive

    def invalidate(self, why: str) -> None:
        if self.invalid is None:
            self.invalid = why

    def check_valid(self) -> None:
        if self.invalid is not None:
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", f"the capture was invalidated: {self.invalid}")

    def add(self, ctx, stream, run, label: str, key=None) -> None:
        """`run` queued on capturing `stream` becomes a node after the stream's frontier."""
        self.check_valid()
        try:
            kind = node_type(label)
        except EmuError as exc:
            self.invalidate(exc.details)
            raise
        node = Node(ctx.new_handle(), kind, run, list(self.frontier[stream]), label, key or label)
        self.graph.nodes.append(node)
        ctx.graph_nodes[node.handle] = node
        self.frontier[stream] = [node]

    def join(self, stream, nodes) -> None:
        """`stream` waits for `nodes` of this capture: it joins it, or adds them."""
        current = self.frontier.setdefault(stream, [])
        current.extend(n for n in nodes if n not in current)
        stream.capture = self

    def unjoined(self) -> list:
        """Streams whose last captured work the origin stream does not end after."""
        reached, todo = set(), list(self.frontier[self.origin])
        while todo:
            node = todo.pop()
            if id(node) not in reached:
                reached.add(id(node))
                todo.extend(node.deps)
        return [s for s, nodes in self.frontier.items()
                if s is not self.origin and any(id(n) not in reached for n in nodes)]

    def finish(self, ctx) -> None:
        """The capture ends on every stream it joined."""
        for stream in self.frontier:
            stream.capture = None
        if self in ctx.captures:
            ctx.captures.remove(self)


# Each thread's own interaction mode (cuThreadExchangeStreamCaptureMode), GLOBAL by default.
_thread_mode = threading.local()


def exchange_thread_mode(mode: int) -> int:
    """Set the calling thread's capture interaction mode; return the one it had."""
    previous = getattr(_thread_mode, "mode", GLOBAL)
    _thread_mode.mode = mode
    return previous


def refuse_unsafe(ctx, call: str) -> None:
    """Fail `call` (a potentially unsafe API) if a capture's mode forbids it to this thread,
    invalidating those captures, as the driver does. By the thread's own mode: GLOBAL
    heeds its own captures not begun relaxed and other threads' global ones, THREAD_LOCAL
    only its own, RELAXED none."""
    me = threading.get_ident()
    mine = getattr(_thread_mode, "mode", GLOBAL)
    if mine == RELAXED:
        return
    with ctx.lock:
        forbidding = [c for c in ctx.captures
                      if (c.thread == me and c.mode != RELAXED) or (mine == GLOBAL and c.mode == GLOBAL)]
        for c in forbidding:
            c.invalidate(f"{call} was called during the capture")
    if forbidding:
        raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
                       f"{call} is not permitted while a stream is capturing (capture mode "
                       f"{'global' if forbidding[0].mode == GLOBAL else 'thread-local'})")


def refuse_capturing(stream, call: str) -> None:
    """`call` (a synchronisation or query) on a capturing stream fails and invalidates."""
    capture = stream.capture
    if capture is not None:
        capture.invalidate(f"{call} on a capturing stream")
        raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", f"{call} is not permitted on a capturing stream")


def refuse_implicit(ctx, call: str) -> None:
    """Work on the legacy stream would wait for a capturing blocking stream: it fails with
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates that capture."""
    capturing = ctx.capturing_blocking_streams()
    for s in capturing:
        s.capture.invalidate(f"{call} on the legacy stream while a blocking stream captured")
    if capturing:
        raise EmuError("CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
                       f"{call}: the legacy stream would synchronise with a capturing blocking stream")

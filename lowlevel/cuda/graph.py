"""CUDA graphs: work captured from a stream once, replayed as one unit.

    with cuda.capture(stream) as graph:      # cuStreamBeginCapture ... cuStreamEndCapture
        kernel.launch(..., stream=stream)    # queued into the graph, not run
    replay = graph.instantiate()             # a GraphExec
    replay.launch(stream)                    # runs the captured work, in dependency order

While a stream captures, what it is given does not run: kernels (with the parameter values
they had), copies, memsets and host callbacks become the graph's nodes. Another stream
joins the capture by waiting for an event recorded on a capturing one, and must be joined
back (the capturing stream waits for an event recorded on it) before the capture ends.
A replay reuses the captured addresses: the memory must stay allocated while the graph can
run. What the driver forbids during a capture (synchronising the stream, cuMemAlloc in the
global mode, ...) raises its CudaError and invalidates the capture; leaving the block then
raises CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
"""
import ctypes
import os
import tempfile

from ..capi.constants import GRAPH_EXEC_UPDATE_RESULT, GRAPH_NODE_TYPE, STREAM_CAPTURE_MODE
from .context import ContextBound, ContextResource, capture_began, capture_ended
from .errors import CudaError
from .stream import Stream, captured_callbacks, current_stream

_MODES = {"global": "GLOBAL", "thread_local": "THREAD_LOCAL", "relaxed": "RELAXED"}
_NODE_TYPE_NAMES = {v: k.removeprefix("CU_GRAPH_NODE_TYPE_").lower() for k, v in GRAPH_NODE_TYPE.items()}
_UPDATE_RESULT_NAMES = {v: k for k, v in GRAPH_EXEC_UPDATE_RESULT.items()}

# The streams lowlevel's own captures run on (handle -> the capture): what the tensor layer
# asks before an op that would wait for the GPU or read host memory, one dict lookup
# rather than a driver call per op.
_capturing: dict = {}


def is_current_stream_capturing() -> bool:
    """Whether this thread's current stream is capturing a graph (begun by lowlevel)."""
    if not _capturing:
        return False
    s = current_stream()
    return s is not None and s.handle in _capturing


def refuse_while_capturing(op: str, why: str = "it waits for the GPU to hand values to the host") -> None:
    """Raise a RuntimeError naming `op` if the current stream is capturing: called before
    an op that cannot be part of a graph, so that the driver never sees it (it would fail
    the call and invalidate the capture)."""
    if is_current_stream_capturing():
        raise RuntimeError(
            f"{op} is not allowed while the current stream ({current_stream()!r}) is capturing a CUDA graph: "
            f"{why}, and a captured stream runs nothing until the graph is replayed. Do it outside the "
            f"capture (before it, or after a replay)")


class Graph(ContextResource):
    """A captured graph (CUgraph). Inside `with cuda.capture(...) as graph:` it is still
    being captured; it can be used once the block has ended."""

    handle = ContextBound("_handle")

    def __init__(self):
        self._adopt()
        self.handle = None
        self.callbacks: list = []          # the C callbacks of its host nodes, kept alive

    def ended_handle(self, what: str) -> int:
        """Its CUgraph; RuntimeError naming `what` while the capture has not ended."""
        if self.handle is None:
            raise RuntimeError(f"Graph.{what}: the capture has not ended (use the graph after the with block)")
        return self.handle

    def nodes(self) -> list[str]:
        """The type of each node, in capture order: "kernel", "memcpy", "memset", "host", ..."""
        handle = self.ended_handle("nodes")
        count = ctypes.c_size_t()
        self._drv.cuGraphGetNodes(handle, None, ctypes.byref(count))
        nodes = (ctypes.c_void_p * max(1, count.value))()
        self._drv.cuGraphGetNodes(handle, nodes, ctypes.byref(count))
        types = []
        for node in nodes[:count.value]:
            kind = ctypes.c_int()
            self._drv.cuGraphNodeGetType(node, ctypes.byref(kind))
            types.append(_NODE_TYPE_NAMES.get(kind.value, str(kind.value)))
        return types

    def to_dot(self) -> str:
        """The graph in Graphviz DOT, as the driver prints it (cuGraphDebugDotPrint)."""
        handle = self.ended_handle("to_dot")
        fd, path = tempfile.mkstemp(suffix=".dot", prefix="lowlevel-graph-")
        os.close(fd)
        try:
            self._drv.cuGraphDebugDotPrint(handle, path.encode(), 0)
            with open(path) as f:
                return f.read()
        finally:
            os.unlink(path)

    def instantiate(self) -> "GraphExec":
        """The executable graph, ready to launch (cuGraphInstantiateWithFlags)."""
        return GraphExec(self)

    def _release(self) -> None:
        if self._handle is not None:
            self._drv.cuGraphDestroy(self._handle)


class GraphExec(ContextResource):
    """An instantiated graph (CUgraphExec): `launch(stream)` replays it."""

    handle = ContextBound("_handle")

    def __init__(self, graph: Graph):
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphExec: expected a Graph, got {type(graph).__name__}")
        self._adopt()
        h = ctypes.c_void_p()
        self._drv.cuGraphInstantiateWithFlags(ctypes.byref(h), graph.ended_handle("instantiate"), 0)
        self.handle = h.value
        self.callbacks = list(graph.callbacks)     # its host nodes call these

    def launch(self, stream: Stream | None = None) -> None:
        """Queue one replay on `stream` (None: the legacy default stream); returns at once.
        It runs after the work queued there before and after this graph's previous launch."""
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"GraphExec.launch: stream must be a Stream or None, got {type(stream).__name__}")
        self._drv.cuGraphLaunch(self.handle, 0 if stream is None else stream.handle)

    def update(self, graph: Graph) -> None:
        """Take the parameters (pointers, values) of `graph`, captured with the same shape:
        the same nodes, dependencies and kernels (cuGraphExecUpdate). Raises a CudaError
        (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) saying why if the shape differs."""
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphExec.update: expected a Graph, got {type(graph).__name__}")
        info = (ctypes.c_uint64 * 3)()        # CUgraphExecUpdateResultInfo: result, errorNode, errorFromNode
        code = self._drv.cuGraphExecUpdate.unchecked(self.handle, graph.ended_handle("update"), info)
        if code != 0:
            error = self._drv.error(code, "cuGraphExecUpdate_v2")
            result = _UPDATE_RESULT_NAMES.get(info[0] & 0xFFFFFFFF, str(info[0]))
            raise CudaError(error.code, error.function, error.description,
                            details=f"{result}\n{error.details}".strip())
        self.callbacks = self.callbacks + list(graph.callbacks)

    def _release(self) -> None:
        self._drv.cuGraphExecDestroy(self.handle)


class capture:
    """`with cuda.capture(stream, mode="global") as graph:` captures what is queued on
    `stream` (and on streams it forks to) into `graph` instead of running it.

    mode: "global" (the default: while any thread captures in this mode, no thread may make
    potentially unsafe calls such as cuMemAlloc), "thread_local" (only the capturing
    thread may not) or "relaxed" (no such rule; the capture may also end on another thread).
    """

    def __init__(self, stream: Stream, mode: str = "global"):
        if not isinstance(stream, Stream) or stream.handle == 0:
            raise TypeError(f"cuda.capture: stream must be a Stream other than the legacy default stream, "
                            f"got {stream!r}")
        if mode not in _MODES:
            raise ValueError(f"cuda.capture: mode must be one of {sorted(_MODES)}, got {mode!r}")
        self.stream = stream
        self.mode = STREAM_CAPTURE_MODE[f"CU_STREAM_CAPTURE_MODE_{_MODES[mode]}"]

    def __enter__(self) -> Graph:
        self.graph = Graph()
        drv = self.graph.driver
        capture_began()                     # releases of garbage wait until the capture ends
        try:
            drv.cuStreamBeginCapture(self.stream.handle, self.mode)
        except BaseException:
            capture_ended()
            raise
        self.ident = self.stream.capture_status()[1]
        _capturing[self.stream.handle] = self
        return self.graph

    def __exit__(self, exc_type, exc, tb):
        drv = self.graph.driver
        h = ctypes.c_void_p()
        try:
            code = drv.cuStreamEndCapture.unchecked(self.stream.handle, ctypes.byref(h))
        finally:
            _capturing.pop(self.stream.handle, None)
            capture_ended()
        self.graph.callbacks = captured_callbacks.pop(self.ident, [])
        self.graph.handle = h.value if code == 0 else None
        if code != 0 and exc_type is None:      # an error in the block is the one to see
            raise drv.error(code, "cuStreamEndCapture")
        return False

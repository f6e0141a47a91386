"""CUDA graphs for ops on tensors: capture once, replay with one driver call.

    g = lowlevel.cuda.CUDAGraph()          # or: with lowlevel.cuda.graph() as g:
    with lowlevel.cuda.graph(g):
        y = (x @ w + b).relu()             # captured: nothing runs yet
    x.copy_(new_values)                    # inputs: tensors made before the capture
    g.replay()                             # y now holds the result for the new x

As torch.cuda.graph does, the block runs its ops on a side stream that captures them:

  - at entry the side stream waits for the current stream (the inputs' work comes first),
    and at exit the current stream waits for the side stream;
  - the caching allocator takes the memory of everything allocated in the block from the
    graph's private pool (allocator.GraphPool): the replays write those addresses, so
    neither eager work nor another graph is given them while the graph lives. Tensors made
    in the block (its outputs) are what each replay fills in again; the pool goes back to
    the driver when the graph is dropped and its outputs with it;
  - replay() queues the whole graph on the current stream, after the work queued there.

What would wait for the GPU inside the block (item(), numpy(), printing a tensor, ...)
raises a RuntimeError naming the op before the driver sees it (graph.refuse_while_capturing):
on a capturing stream nothing has run yet. Run each op once before capturing it (a warm-up):
the first call loads kernels and makes cuBLAS's handle, which must not happen in a capture.
"""
import functools

from .allocator import GraphPool, get_allocator
from .context import release_later
from .graph import GraphExec, capture
from .stream import Event, Stream, current_stream, stream as use_stream


class CUDAGraph:
    """A graph of tensor ops captured by `with lowlevel.cuda.graph(g):`; `replay()` runs it."""

    def __init__(self):
        self.graph = None                  # the cuda.Graph, once captured
        self.exec: GraphExec | None = None
        self.pool = GraphPool()
        self.allocator = None              # the caching allocator its pool belongs to
        self.capturing = False

    def __repr__(self):
        state = "capturing" if self.capturing else ("captured" if self.exec is not None else "empty")
        return f"<CUDAGraph {state}, {self.pool.reserved} bytes of private memory>"

    def replay(self) -> None:
        """Queue one run of the captured ops on the current stream; returns at once."""
        if self.exec is None:
            raise RuntimeError("CUDAGraph.replay: nothing has been captured yet (capture with "
                               "`with lowlevel.cuda.graph(g):`, replay after the block)")
        self.exec.launch(current_stream())

    def nodes(self) -> list[str]:
        """The type of each captured node ("kernel", "memcpy", "memset", ...)."""
        if self.graph is None:
            raise RuntimeError("CUDAGraph.nodes: nothing has been captured yet")
        return self.graph.nodes()

    def __del__(self):
        # At the next safe point (see cuda.context.release_later): the executable graph goes
        # first, then the pool (its cuMemFree waits for replays still running).
        if self.allocator is not None:
            try:
                release_later(functools.partial(_release, self.exec, self.graph, self.allocator, self.pool))
            except Exception:           # at interpreter teardown the modules may be gone
                pass


def _release(graph_exec: GraphExec | None, graph, allocator, pool: GraphPool) -> None:
    for resource in (graph_exec, graph):         # None: the capture failed
        if resource is not None:
            resource.release()
    allocator.release_pool(pool)


class graph:
    """`with lowlevel.cuda.graph() as g:` captures the tensor ops of the block into `g` (a
    CUDAGraph; pass one to capture into it). `stream`: the side stream to capture on (a new
    non-blocking one by default); `mode`: the driver's capture mode ("global", the
    default, "thread_local" or "relaxed"; see cuda.capture)."""

    def __init__(self, cuda_graph: CUDAGraph | None = None, stream: Stream | None = None, mode: str = "global"):
        if cuda_graph is not None and not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"cuda.graph: expected a CUDAGraph, got {type(cuda_graph).__name__}")
        if stream is not None and (not isinstance(stream, Stream) or stream.handle == 0):
            raise TypeError(f"cuda.graph: stream must be a Stream other than the legacy default stream, "
                            f"got {stream!r}")
        self.cuda_graph = CUDAGraph() if cuda_graph is None else cuda_graph
        self.side = stream
        self.mode = mode

    def __enter__(self) -> CUDAGraph:
        g = self.cuda_graph
        if g.capturing or g.exec is not None:
            raise RuntimeError("cuda.graph: this CUDAGraph has been captured already; make a new one")
        side = self.side if self.side is not None else Stream(non_blocking=True)
        self.outer = current_stream()
        side.wait(Event(timing=False).record(self.outer))    # the inputs' work comes first
        self.capture = capture(side, self.mode)
        self.allocator = g.allocator = get_allocator()
        self.allocator.begin_pool(side, g.pool)
        self.current = use_stream(side)
        self.current.__enter__()
        try:
            g.graph = self.capture.__enter__()
        except BaseException:
            self._leave()
            raise
        g.capturing = True
        return g

    def _leave(self) -> None:
        self.current.__exit__(None, None, None)
        self.allocator.end_pool(self.capture.stream)

    def __exit__(self, exc_type, exc, tb):
        g = self.cuda_graph
        g.capturing = False
        try:
            self.capture.__exit__(exc_type, exc, tb)      # raises what invalidated the capture
        finally:
            self._leave()
        if exc_type is None:
            g.exec = g.graph.instantiate()
            side = self.capture.stream
            (self.outer or Stream.legacy()).wait(Event(timing=False).record(side))
        return False

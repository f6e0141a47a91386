"""The emulated driver's stream-capture and graph functions (capture.py holds the objects).

cuGraphLaunch queues the whole instantiated graph as one work item on its stream: it runs
after the work queued there before, and after the previous launch of the same graph; its
nodes run in capture order, a dependency order, with the addresses and kernel parameters
captured.
"""
import ctypes
import threading

from ...capi.constants import GRAPH_EXEC_UPDATE_RESULT, GRAPH_NODE_TYPE, STREAM_CAPTURE_STATUS
from .capture import GLOBAL, RELAXED, THREAD_LOCAL, Capture, Graph, GraphExec, exchange_thread_mode
from .context import Context, api, current, forget_handle, lookup_handle
from .entry import write_out
from .errors import EmuError
from .launch import check_config, kernel_run, param_buffer
from .launch_ex import launch_grouping
from .modules import function_of

_STATUS = {name.rsplit("_", 1)[1]: v for name, v in STREAM_CAPTURE_STATUS.items()}


def _graph(ctx: Context, handle: int) -> Graph:
    return lookup_handle(ctx.graphs, handle, "graph")


def _exec(ctx: Context, handle: int) -> GraphExec:
    return lookup_handle(ctx.graph_execs, handle, "graph exec")


# ---- capture --------------------------------------------------------------------------------
@api
def cuStreamBeginCapture(stream_handle, mode):
    ctx = current()
    stream = ctx.stream(stream_handle)
    if mode not in (GLOBAL, THREAD_LOCAL, RELAXED):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown stream capture mode {mode}")
    if stream is ctx.legacy:
        raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the legacy stream cannot be captured")
    with ctx.lock:
        if stream.capture is not None:
            raise EmuError("CUDA_ERROR_ILLEGAL_STATE", "the stream is already capturing")
        stream.capture = Capture(mode, stream, Graph(ctx.new_handle()))
        ctx.captures.append(stream.capture)


@api
def cuStreamEndCapture(stream_handle, graph_out):
    ctx = current()
    stream = ctx.stream(stream_handle)
    with ctx.lock:
        capture = stream.capture
        if capture is None:
            raise EmuError("CUDA_ERROR_ILLEGAL_STATE", "the stream is not capturing")
        if capture.origin is not stream:
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "the capture was not begun on this stream")
        if capture.mode != RELAXED and capture.thread != threading.get_ident():
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
                           "a capture not begun in relaxed mode must end on the thread that began it")
        capture.finish(ctx)                 # on every stream, whatever the outcome
        write_out(ctypes.c_void_p, graph_out, None)
        capture.check_valid()
        unjoined = capture.unjoined()
        if unjoined:
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
                           f"{len(unjoined)} stream(s) forked into the capture were not joined back "
                           f"into the stream that began it")
        ctx.graphs[capture.graph.handle] = capture.graph
    write_out(ctypes.c_void_p, graph_out, capture.graph.handle)


@api
def cuThreadExchangeStreamCaptureMode(mode_inout):
    """The calling thread's interaction mode with captures (what it may call while one
    runs) becomes *mode; *mode becomes the previous one."""
    if not mode_inout:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "mode is NULL")
    mode = ctypes.c_int.from_address(mode_inout).value
    if mode not in (GLOBAL, THREAD_LOCAL, RELAXED):
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"unknown stream capture mode {mode}")
    write_out(ctypes.c_int, mode_inout, exchange_thread_mode(mode))


def _status(ctx: Context, stream) -> int:
    if stream is ctx.legacy:
        if ctx.capturing_blocking_streams():
            raise EmuError("CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
                           "the legacy stream is asked while a blocking stream is capturing")
        return _STATUS["NONE"]
    if stream.capture is None:
        return _STATUS["NONE"]
    return _STATUS["INVALIDATED" if stream.capture.invalid else "ACTIVE"]


@api
def cuStreamIsCapturing(stream_handle, status_out):
    ctx = current()
    write_out(ctypes.c_int, status_out, _status(ctx, ctx.stream(stream_handle)))


@api
def cuStreamGetCaptureInfo(stream_handle, status_out, id_out, graph_out, deps_out, edges_out, count_out):
    ctx = current()
    stream = ctx.stream(stream_handle)
    with ctx.lock:
        status = _status(ctx, stream)
        write_out(ctypes.c_int, status_out, status)
        if status != _STATUS["ACTIVE"]:
            return                              # the rest is defined only while active
        capture = stream.capture
        nodes = capture.frontier[stream]
        # The array stays valid until the next call that changes the capture (here: longer).
        capture.info_array = (ctypes.c_void_p * max(1, len(nodes)))(*[n.handle for n in nodes])
        if id_out:
            write_out(ctypes.c_uint64, id_out, capture.id)
        if graph_out:
            write_out(ctypes.c_void_p, graph_out, capture.graph.handle)
        if deps_out:
            write_out(ctypes.c_void_p, deps_out, ctypes.addressof(capture.info_array))
        if edges_out:
            write_out(ctypes.c_void_p, edges_out, None)      # every edge is a default one
        if count_out:
            write_out(ctypes.c_size_t, count_out, len(nodes))


# ---- graphs ---------------------------------------------------------------------------------
@api
def cuGraphDestroy(handle):
    ctx = current(check_sticky=False)
    graph = forget_handle(ctx.graphs, handle, "graph")
    for node in graph.nodes:
        ctx.graph_nodes.pop(node.handle, None)


@api
def cuGraphGetNodes(graph_handle, nodes_out, count_inout):
    ctx = current()
    graph = _graph(ctx, graph_handle)
    if not count_inout:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "numNodes is NULL")
    if nodes_out:
        room = ctypes.c_size_t.from_address(count_inout).value
        for i in range(room):
            handle = graph.nodes[i].handle if i < len(graph.nodes) else None
            ctypes.c_void_p.from_address(nodes_out + 8 * i).value = handle
        write_out(ctypes.c_size_t, count_inout, min(room, len(graph.nodes)))
    else:
        write_out(ctypes.c_size_t, count_inout, len(graph.nodes))


@api
def cuGraphNodeGetType(node_handle, type_out):
    ctx = current()
    write_out(ctypes.c_int, type_out, lookup_handle(ctx.graph_nodes, node_handle, "graph node").type)


def dot_text(graph: Graph) -> str:
    """The graph in Graphviz DOT: a box per node (its type and operation), an edge per dependency."""
    type_names = {v: k.removeprefix("CU_GRAPH_NODE_TYPE_") for k, v in GRAPH_NODE_TYPE.items()}
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    lines = [f'digraph "graph_{graph.handle:#x}" {{', "  node [shape=box];"]
    for i, n in enumerate(graph.nodes):
        label = f"{type_names[n.type]}\\n{n.label}".replace('"', "'")
        lines.append(f'  n{i} [label="{label}"];')
    for i, n in enumerate(graph.nodes):
        lines.extend(f"  n{index[id(d)]} -> n{i};" for d in n.deps)
    return "\n".join([*lines, "}", ""])


@api
def cuGraphDebugDotPrint(graph_handle, path, flags):
    ctx = current()
    graph = _graph(ctx, graph_handle)
    if not path:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "path is NULL")
    try:
        with open(ctypes.string_at(path).decode(), "w") as f:
            f.write(dot_text(graph))
    except OSError as exc:
        raise EmuError("CUDA_ERROR_OPERATING_SYSTEM", f"cannot write the DOT file: {exc}")


# ---- executable graphs ----------------------------------------------------------------------
@api
def cuGraphInstantiateWithFlags(exec_out, graph_handle, flags):
    ctx = current()
    graph = _graph(ctx, graph_handle)
    if flags != 0:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"instantiate flags {flags:#x} are not emulated (only 0)")
    handle = ctx.new_handle()
    ctx.graph_execs[handle] = GraphExec(handle, graph)
    write_out(ctypes.c_void_p, exec_out, handle)


@api
def cuGraphExecDestroy(handle):
    ctx = current(check_sticky=False)
    forget_handle(ctx.graph_execs, handle, "graph exec")


@api
def cuGraphLaunch(exec_handle, stream_handle):
    ctx = current()
    graph_exec = _exec(ctx, exec_handle)
    stream = ctx.stream(stream_handle)
    with ctx.lock:
        item = ctx.submit(stream, graph_exec.work(), "graph launch", extra_deps=[graph_exec.last])
        if item is not None:                  # None: captured into another graph
            graph_exec.last = item


def _update_mismatch(old: list, new: list) -> tuple[str, object]:
    """Why the nodes `new` cannot replace `old` in place ("" if they can), and the node."""
    if len(old) != len(new):
        return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED", None
    where = {id(n): i for i, n in enumerate(old)}
    where_new = {id(n): i for i, n in enumerate(new)}
    for a, b in zip(old, new):
        if sorted(where[id(d)] for d in a.deps) != sorted(where_new[id(d)] for d in b.deps):
            return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED", b
        if a.type != b.type:
            return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED", b
        if a.key != b.key and a.label.startswith("kernel"):
            return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED", b
    return "", None


@api
def cuGraphExecUpdate(exec_handle, graph_handle, result_info):
    """Replace the operations of an instantiated graph by those of a graph of the same
    shape (same nodes, types, dependencies and kernels), e.g. recaptured with new pointers."""
    ctx = current()
    graph_exec, graph = _exec(ctx, exec_handle), _graph(ctx, graph_handle)
    if not result_info:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "resultInfo is NULL")
    why, node = _update_mismatch(graph_exec.nodes, graph.nodes)
    # CUgraphExecUpdateResultInfo: the result (an enum), errorNode, errorFromNode.
    ctypes.c_int.from_address(result_info).value = GRAPH_EXEC_UPDATE_RESULT[why or "CU_GRAPH_EXEC_UPDATE_SUCCESS"]
    ctypes.c_void_p.from_address(result_info + 8).value = node.handle if node is not None else None
    ctypes.c_void_p.from_address(result_info + 16).value = None
    if why:
        raise EmuError("CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", f"cuGraphExecUpdate: {why}")
    with ctx.lock:                        # a launch queued already keeps the operations it had
        graph_exec.runs = [n.run for n in graph.nodes]


@api
def cuGraphExecKernelNodeSetParams(exec_handle, node_handle, params_ptr):
    """New launch parameters (grid, block, shared memory, argument values) for one kernel
    node of an instantiated graph; the graph itself keeps its own."""
    ctx = current()
    graph_exec = _exec(ctx, exec_handle)
    index = next((i for i, n in enumerate(graph_exec.nodes) if n.handle == node_handle), None)
    if index is None:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"node {node_handle:#x} is not in the graph this exec was made from")
    node = graph_exec.nodes[index]
    if not params_ptr:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "nodeParams is NULL")
    if node.type != GRAPH_NODE_TYPE["CU_GRAPH_NODE_TYPE_KERNEL"]:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", f"node {node_handle:#x} is a {node.label} node, not a kernel")
    # CUDA_KERNEL_NODE_PARAMS_v2: func; grid x y z, block x y z, sharedMemBytes (uint);
    # kernelParams at 40, extra at 48.
    func = ctypes.c_void_p.from_address(params_ptr).value or 0
    dims = (ctypes.c_uint * 7).from_address(params_ptr + 8)
    kernel_params = ctypes.c_void_p.from_address(params_ptr + 40).value or 0
    extra = ctypes.c_void_p.from_address(params_ptr + 48).value or 0
    if ("kernel", func) != node.key[:2]:
        raise EmuError("CUDA_ERROR_INVALID_VALUE", "the node's function cannot be changed (not emulated)")
    f = function_of(ctx, func)
    grid, block, shared = tuple(dims[0:3]), tuple(dims[3:6]), dims[6]
    check_config(f, grid, block, shared)
    # The node keeps its launch attributes (cluster shape, cooperative): checked anew for the new grid.
    cluster, cooperative = launch_grouping(f, grid, block, shared, *node.key[2:])
    run = kernel_run(ctx, f, grid, block, shared, param_buffer(f.kernel, kernel_params, extra), cluster, cooperative)
    with ctx.lock:                        # a launch queued already keeps the operations it had
        runs = list(graph_exec.runs)
        runs[index] = run
        graph_exec.runs = runs

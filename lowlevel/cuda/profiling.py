"""What a profile records at the ctypes boundary: each driver and cuBLAS call as a host span
of the active timeline (lowlevel/trace/timeline.py), and each device operation (kernel, copy,
memset, host function, graph launch, cuBLAS call) as a span on its stream, measured by two
CUDA events recorded around it on that stream.

Nothing here runs unless a timeline is active: driver.py and cublas.py call it only on their
slow path, which a plain call never takes. The events are recorded through the C functions
directly (not the checked, traced ones) and never waited for until the profile closes:
`DeviceClock.resolve` then synchronises on each end event and reads the times.

Device times onto the host clock: at the first device operation of a context, an anchor
event is recorded on a non-blocking stream of the profiler's own (nothing else is queued
there, so it does not wait for the user's work) and waited for at once; the host time of
the anchor is taken as the midpoint of [the record call's start, the wait's return], and
every device time t is placed at anchor_host + (t - anchor_device), from cuEventElapsedTime.
The error is at most half that interval (measured, shown in the report), plus the events'
resolution (about 0.5 us on a GPU) and float32's rounding of the elapsed milliseconds (about
1 us after 10 s). A start event on an idle stream completes before the work is even queued,
so a device span is made to begin no earlier than the call that queued it. Inside a stream capture no event is recorded (its times would be those of
no execution): the captured call is marked, and the graph's launch is one device span.
"""
import threading
import time
from ctypes import byref, c_float, c_int, c_void_p

from ..capi.constants import CURESULT_NAME
from ..trace import nvtx_ranges

FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, FUNC_ATTRIBUTE_NUM_REGS = 1, 4
CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_STATUS_NONE = 0
ANCHOR_TRIES = 3

# The driver's device operations: the binding name -> (category, index of the stream argument;
# None: the legacy default stream, on which the synchronous copies and memsets run).
DEVICE_OPS = {
    "cuLaunchKernel": ("kernel", 8), "cuLaunchCooperativeKernel": ("kernel", 8), "cuLaunchKernelEx": ("kernel", -1),
    "cuMemcpyHtoDAsync": ("copy", 3), "cuMemcpyDtoHAsync": ("copy", 3), "cuMemcpyDtoDAsync": ("copy", 3),
    "cuMemcpyPeerAsync": ("copy", 5), "cuMemcpy2DAsync": ("copy", 1), "cuMemcpy3DAsync": ("copy", 1),
    "cuMemcpyHtoD": ("copy", None), "cuMemcpyDtoH": ("copy", None), "cuMemcpyDtoD": ("copy", None),
    "cuMemcpy2D": ("copy", None), "cuMemcpy3D": ("copy", None),
    "cuMemsetD8Async": ("memset", 3), "cuMemsetD16Async": ("memset", 3), "cuMemsetD32Async": ("memset", 3),
    "cuMemsetD2D32Async": ("memset", 5),
    "cuMemsetD8": ("memset", None), "cuMemsetD16": ("memset", None), "cuMemsetD32": ("memset", None),
    "cuMemsetD2D32": ("memset", None),
    "cuLaunchHostFunc": ("host function", 0), "cuGraphLaunch": ("graph", 1),
}
# The size argument of the 1-D copies (the 2-D/3-D ones carry theirs in a struct).
COPY_BYTES = {"cuMemcpyHtoDAsync": 2, "cuMemcpyDtoHAsync": 2, "cuMemcpyDtoDAsync": 2, "cuMemcpyHtoD": 2,
              "cuMemcpyDtoH": 2, "cuMemcpyDtoD": 2, "cuMemcpyPeerAsync": 4}
# cuBLAS calls that queue work on the handle's stream (the others only set or read state).
CUBLAS_WORK = ("gemm", "axpy", "dot", "gemv")

_kernels: dict[int, tuple[str, str]] = {}      # CUfunction -> (kernel name, image kind)
_MAX_KERNELS = 1 << 16


def remember_kernel(handle: int, name: str, image: str) -> None:
    """Called by Module.get_function: the name and image kind the trace shows for a CUfunction."""
    if len(_kernels) >= _MAX_KERNELS:
        _kernels.clear()
    _kernels[handle] = (name, image)


def image_description(kind: str, image_kind: str) -> str:
    """What a loaded image runs: "PTX JIT", "cubin (SASS)", "fatbin (SASS)", "fatbin (PTX JIT)"."""
    runs = "SASS" if image_kind == "sass" else "PTX JIT"
    return "PTX JIT" if kind == "ptx" else f"{kind} ({runs})"


def _value(arg) -> int:
    """A handle argument as an int (it arrives as an int, None, or a ctypes c_void_p)."""
    value = getattr(arg, "value", arg)
    return int(value or 0)


class DeviceClock:
    """A profile's CUDA events: a pool per context, an anchor per context, the pending spans."""

    def __init__(self, timeline, capturing=lambda: False):
        self.contexts: dict[tuple, dict] = {}      # (driver id, CUcontext) -> anchor, stream, events
        self.pending: list[tuple] = []             # (span, context entry, start event, end event)
        # Whether this thread's stream is capturing: then no wait may happen (a wait inside
        # a capture fails and invalidates it), so anchors and reading the times are put off.
        self.capturing = capturing
        self.lock = threading.RLock()

    # -- recording ---------------------------------------------------------------------------
    def context(self, drv, timeline) -> dict | None:
        """The current context's events and anchor (anchored on first use outside a capture)."""
        ctx = c_void_p()
        if drv.cuCtxGetCurrent.cfunc(byref(ctx)) != 0 or not ctx.value:
            return None
        key = (id(drv), ctx.value)
        with self.lock:
            return self._entry(key, drv, timeline)

    def _entry(self, key, drv, timeline) -> dict:
        entry = self.contexts.get(key)
        if entry is None:
            entry = self.contexts[key] = {"drv": drv, "free": [], "all": [], "stream": None, "event": None,
                                          "host": None, "device": 0, "anchored": False}
            device = c_int()
            if drv.cuCtxGetDevice.cfunc(byref(device)) == 0:
                entry["device"] = device.value
        if not entry["anchored"] and not self.capturing():
            entry["anchored"] = True        # tried once: a driver that refuses is not asked again
            self._anchor(entry, timeline)
        return entry

    def _anchor(self, entry: dict, timeline) -> None:
        """Record the anchor event on a stream of its own and wait for it (see the module doc).
        Events recorded before it are placed as well: their elapsed times are negative."""
        drv = entry["drv"]
        stream = c_void_p()
        if drv.cuStreamCreate.cfunc(byref(stream), CU_STREAM_NON_BLOCKING) != 0:
            return
        entry["stream"] = stream.value
        best = None
        for _ in range(ANCHOR_TRIES):       # the tightest of a few: a new stream's first use is slow
            event = self.event(entry)
            before = time.perf_counter_ns()
            if event is None or drv.cuEventRecord.cfunc(event, stream.value) != 0 \
                    or drv.cuEventSynchronize.cfunc(event) != 0:
                break
            after = time.perf_counter_ns()
            if best is None or after - before < best[2] - best[1]:
                if best is not None:
                    entry["free"].append(best[0])
                best = (event, before, after)
            else:
                entry["free"].append(event)
        if best is None:
            return
        event, before, after = best
        entry["event"], entry["host"] = event, (before + after) // 2
        timeline.notes.append(f"device {entry['device']}: device times placed on the host clock by an anchor "
                              f"event, error up to +-{(after - before) / 2000:.1f} us")
        if timeline.is_recording():         # an anchor made inside the profile took host time there
            timeline.host_span("profiler anchor event", "profiler", before, after)

    def event(self, entry: dict) -> int | None:
        with self.lock:                     # threads launching at once share the pool
            if entry["free"]:
                return entry["free"].pop()
        event = c_void_p()
        if entry["drv"].cuEventCreate.cfunc(byref(event), 0) != 0:
            return None
        entry["all"].append(event.value)
        return event.value

    def begin(self, drv, timeline, stream: int) -> tuple | None:
        """Record the start event of a device operation on `stream`; None if it cannot be timed."""
        entry = self.context(drv, timeline)
        if entry is None or (entry["anchored"] and entry["event"] is None):
            return None                     # no context, or a driver that could not anchor
        status = c_int()
        if drv.cuStreamIsCapturing.cfunc(stream, byref(status)) != 0 or status.value != CU_STREAM_CAPTURE_STATUS_NONE:
            return ("captured",)
        start = self.event(entry)
        if start is None:
            return None
        if drv.cuEventRecord.cfunc(start, stream) != 0:
            entry["free"].append(start)
            return None
        return (entry, stream, start)

    def end(self, token: tuple, ok: bool, span: dict) -> None:
        """Record the end event after the operation was queued, and keep the pair for later."""
        entry, stream, start = token
        end = self.event(entry) if ok else None
        if end is None or entry["drv"].cuEventRecord.cfunc(end, stream) != 0:
            entry["free"].append(start)
            if end is not None:
                entry["free"].append(end)
            return
        self.pending.append((span, entry, start, end))

    # -- closing -----------------------------------------------------------------------------
    def resolve(self, timeline) -> None:
        """Wait for each pending end event and place its span on the host clock (not while
        this thread captures: the waits would break the capture; read later)."""
        if self.pending and self.capturing():
            return
        pending, self.pending = self.pending, []
        for span, entry, start, end in pending:
            drv = entry["drv"]
            if not entry["anchored"]:       # its context was first used inside a capture
                entry["anchored"] = True
                self._anchor(entry, timeline)
            times = []
            if entry["event"] is None:
                timeline.notes.append(f"a {span['name']} span was lost: no anchor event")
                entry["free"] += [start, end]
                continue
            for event in (start, end):
                ms = c_float()
                code = drv.cuEventSynchronize.cfunc(event)
                if code == 0:
                    code = drv.cuEventElapsedTime.cfunc(byref(ms), entry["event"], event)
                if code != 0:
                    timeline.notes.append(f"a {span['name']} span was lost: {CURESULT_NAME.get(code, code)}")
                    break
                times.append(entry["host"] + round(ms.value * 1e6))
            entry["free"] += [start, end]
            if len(times) == 2:
                # The start event completes when the stream reaches it, which on an idle
                # stream is before the work is even queued: no work begins before its call.
                start_ns = max(times[0], span["args"]["issued at"])
                span["start"], span["end"] = start_ns, max(start_ns, times[1])
                timeline.device.append(span)

    def release(self) -> None:
        for entry in self.contexts.values():
            drv = entry["drv"]
            for event in entry["all"]:
                drv.cuEventDestroy.cfunc(event)
            if entry["stream"]:
                drv.cuStreamDestroy.cfunc(entry["stream"])
        self.contexts.clear()


# -- what driver.py and cublas.py call on their slow path -------------------------------------
def device_stream(name: str, args) -> int | None:
    """The stream a driver call queues device work on, or None if it queues none."""
    op = DEVICE_OPS.get(name)
    if op is None:
        return None
    index = op[1]
    if index is None:
        return 0
    if index == -1:                         # cuLaunchKernelEx: the stream is in the config
        config = getattr(args[0], "_obj", None)
        return _value(getattr(config, "hStream", 0))
    return _value(args[index])


def kernel_args(name: str, drv, args) -> dict:
    """What the trace shows of a launch: the kernel, grid, block, registers, shared memory, image."""
    if name == "cuLaunchKernelEx":
        c = getattr(args[0], "_obj", None)
        if c is None:
            return {}
        function = _value(args[1])
        grid, block = (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ)
        dynamic = c.sharedMemBytes
    else:
        function = _value(args[0])
        grid, block, dynamic = tuple(args[1:4]), tuple(args[4:7]), args[7]
    kernel, image = _kernels.get(function, (f"CUfunction {function:#x}", "unknown"))
    info = {"kernel": kernel, "grid": list(map(_value, grid)), "block": list(map(_value, block)),
            "dynamic shared bytes": _value(dynamic), "image": image}
    for key, attribute in (("registers", FUNC_ATTRIBUTE_NUM_REGS), ("static shared bytes",
                                                                   FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)):
        value = c_int()
        if drv.cuFuncGetAttribute.cfunc(byref(value), attribute, function) == 0:
            info[key] = value.value
    return info


def begin_call(timeline, drv, name: str, args):
    """Before a driver call, while a timeline is active: the device span's start event."""
    if timeline.nvtx:
        nvtx_ranges.push(name, "ctypes")
    clock = timeline.device_clock
    stream = device_stream(name, args)
    if clock is None or stream is None:
        return None
    return clock.begin(drv, timeline, stream), stream


def end_call(timeline, drv, name: str, symbol: str, args, pending, start: int, end: int,
             shown: str, result: str, library: str) -> None:
    """After a driver or cuBLAS call: its host span, and its device span's end event."""
    if timeline.nvtx:
        nvtx_ranges.pop()
    token, stream = pending if pending is not None else (None, None)
    span_args = {"args": shown, "result": result}
    flow = None
    if token is not None and token[0] == "captured":
        span_args["captured"] = "recorded into a graph: no device span until the graph is launched"
        token = None
    if token is not None:
        flow = timeline.new_flow()
    timeline.host_span(symbol, library, start, end, span_args, flow)
    if token is None:
        return
    category = DEVICE_OPS[name][0] if name in DEVICE_OPS else "cublas"
    device_args = {"call": symbol, "issued by thread": timeline.thread(), "issued at": start}
    label = symbol
    if category == "kernel":
        device_args.update(kernel_args(name, drv, args))
        label = device_args.get("kernel", symbol)
    elif name in COPY_BYTES:
        device_args["bytes"] = _value(args[COPY_BYTES[name]])
    span = {"name": label, "cat": category, "device": token[0]["device"], "stream": stream, "start": 0, "end": 0,
            "args": device_args, "flow": flow}
    clock = timeline.device_clock
    if clock is not None:                   # None: the profile closed while this call ran
        clock.end(token, result in ("CUDA_SUCCESS", "CUBLAS_STATUS_SUCCESS"), span)


def cublas_stream(functions: dict, name: str, args) -> int | None:
    """The stream of the handle a cuBLAS call that queues work uses (cublasGetStream_v2)."""
    if not any(word in name.lower() for word in CUBLAS_WORK) or not args:
        return None
    stream = c_void_p()
    if functions["cublasGetStream_v2"](args[0], byref(stream)) != 0:
        return None
    return stream.value or 0


def begin_cublas(timeline, drv, functions: dict, name: str, args):
    if timeline.nvtx:
        nvtx_ranges.push(name, "ctypes")
    clock = timeline.device_clock
    if clock is None or drv is None:
        return None
    stream = cublas_stream(functions, name, args)
    if stream is None:
        return None
    return clock.begin(drv, timeline, stream), stream


__all__ = ["DeviceClock", "begin_call", "begin_cublas", "end_call", "image_description", "remember_kernel"]

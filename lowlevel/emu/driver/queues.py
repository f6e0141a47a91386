"""Streams and events of the emulated GPU: real queues served by real threads.

Each stream is a FIFO of work items served by its own worker thread, so a launch or an async
copy returns to the caller before the work is done, exactly as on a GPU. A work item may
depend on items of other streams (the legacy default stream's implicit synchronisation,
cuStreamWaitEvent); the worker waits for those before running it.

A fault raised by a work item (a kernel's illegal address) is recorded on the context as a
sticky error; from then on every work item is skipped and every call reports the error.

At interpreter exit the queued work is abandoned, as a driver abandons it at process
teardown: workers skip what is still queued, and nothing waits for them to finish it.
Host math that runs long inside BLAS (the emulated cuBLAS's GEMMs) goes in bounded pieces,
each inside host_math(): the exit handler waits for the piece in flight (at most
EXIT_WAIT_S), and no piece starts after it. A process must not reach the C library's exit
(OpenBLAS's own exit code joins its threads) while a worker is inside BLAS: a Ctrl-C or
sys.exit() during a GEMM could hang there.
"""
import atexit
import queue
import threading
import time
import traceback

from ..engine.faults import KernelFault
from ..tools import timemodel
from .entry import call_started_ns

_abandoned = threading.Event()
_host_math = threading.Condition()
_in_host_math = [0]             # pieces of host math running now, on any worker
EXIT_WAIT_S = 10.0              # far above one piece (cublas.PANEL_MACS), never a hang


class WorkAbandoned(Exception):
    """Raised by host_math() once exit has begun: the work item stops where it is."""


class host_math:
    """`with host_math():` around one bounded piece of a work item's numpy/BLAS math; raises
    WorkAbandoned instead of starting it once the process exits."""

    def __enter__(self):
        with _host_math:
            if _abandoned.is_set():
                raise WorkAbandoned
            _in_host_math[0] += 1

    def __exit__(self, *exc):
        with _host_math:
            _in_host_math[0] -= 1
            _host_math.notify_all()
        return False


def abandon_queued_work() -> None:
    """From now on every queued work item is skipped (marked done without running), and no
    piece of host math starts; returns once none runs (or after EXIT_WAIT_S)."""
    with _host_math:
        _abandoned.set()
        _host_math.wait_for(lambda: _in_host_math[0] == 0, timeout=EXIT_WAIT_S)


atexit.register(abandon_queued_work)


class WorkItem:
    """One operation in a stream; `done` is set once it has run (or been skipped)."""

    __slots__ = ("run", "deps", "done", "label", "model")

    def __init__(self, run, deps, label):
        self.run = run
        self.deps = deps
        self.done = threading.Event()
        self.label = label
        self.model = None               # its devicetime.Op, under LOWLEVEL_EMU_TIMING=model


class Stream:
    """A queue and its worker thread. `flags` holds CU_STREAM_NON_BLOCKING (1) or 0."""

    NON_BLOCKING = 0x1

    def __init__(self, context, flags: int, name: str):
        self.context = context
        self.flags = flags
        self.name = name
        self.last: WorkItem | None = None
        self.capture = None                   # the capture.Capture this stream is part of
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name=f"lowlevel-emu-{name}", daemon=True)
        self._thread.start()

    @property
    def blocking(self) -> bool:
        return not (self.flags & self.NON_BLOCKING)

    def submit(self, run, deps=(), label="") -> WorkItem:
        item = WorkItem(run, [d for d in deps if d is not None and not d.done.is_set()], label)
        with self.context.lock:             # `last` and the queue order agree across host threads
            timeline = self.context.timeline
            if timeline is not None:        # the model follows done work too: it may end later
                after = [w.model for w in (self.last, *deps) if w is not None]
                item.model = timeline.new_op(label, getattr(self, "priority", 0), after, call_started_ns())
            self.last = item
            self._queue.put(item)
        return item

    def idle(self) -> bool:
        last = self.last
        return last is None or last.done.is_set()

    def synchronize(self) -> None:
        last = self.last
        if last is not None:
            last.done.wait()

    def close(self) -> None:
        """Finish the queued work, then stop the worker (once, whoever calls first)."""
        with self.context.lock:
            if not self._closing:
                self._closing = True
                self._queue.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            for dep in item.deps:
                dep.done.wait()
            if item.model is not None:
                timemodel.begin(item.model)   # what it does is noted on its op
            try:
                if self.context.sticky is None and not _abandoned.is_set():
                    item.run()
            except WorkAbandoned:             # exit began: what is left is not done
                pass
            except KernelFault as fault:
                self.context.set_sticky(fault.code_name, fault.message)
            except Exception as exc:          # an emulator bug must not hang the stream
                self.context.set_sticky("CUDA_ERROR_UNKNOWN",
                                        f"internal error in the emulated GPU while running {item.label}: "
                                        f"{exc!r}\n{traceback.format_exc()}")
            finally:
                if item.model is not None:
                    timemodel.end()
                    self.context.timeline.completed(item.model)
                item.done.set()


class Event:
    """A marker recorded into a stream; it holds the time the stream reached it."""

    DISABLE_TIMING = 0x2

    def __init__(self, flags: int):
        self.flags = flags
        self.item: WorkItem | None = None     # the pending record, if any
        self.time_ns: int | None = None
        self.captured = None                  # (Capture, nodes) if last recorded in a capture
        self._record = None                   # identifies the current record
        self._lock = threading.Lock()

    @property
    def timing(self) -> bool:
        return not (self.flags & self.DISABLE_TIMING)

    def record_into(self, stream: Stream, deps) -> None:
        """Record the event into `stream`; a record it supersedes no longer sets its time."""
        record = object()

        def stamp():
            now = time.perf_counter_ns()
            with self._lock:
                if self._record is record:
                    self.time_ns = now
        with self._lock:
            self._record = record
            self.time_ns = None
        self.item = stream.submit(stamp, deps, label="event record")

    def complete(self) -> bool:
        return self.item is None or self.item.done.is_set()

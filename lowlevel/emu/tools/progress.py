"""Progress of long launches on an interactive terminal: "CTAs done of total".

The emulated GPU runs a big grid in batches of CTAs (engine/scheduler.py); a launch can
take many seconds where an H200 takes microseconds. When stderr is a terminal
(tools.enabled()), each launch is watched by one shared daemon thread that, once the
launch has run `after_s` seconds, rewrites one status line every `every_s` seconds:

    [emulated GPU] kernel sgemm_tiled: 1536 of 4096 CTAs done (12.3 s)

The thread reads the launch's batch position (`first_cta`: CTAs of the finished batches)
and touches nothing else, so the engine pays nothing per batch or instruction: the tool
subscribes to no events (tools/base.py). A launch that ends before `after_s` prints
nothing; one that ran longer ends its line with the total.
"""
import sys
import threading
import time

from .base import Tool


class Progress(Tool):
    def __init__(self, stream=None, after_s: float = 2.0, every_s: float = 0.5):
        self.stream = stream if stream is not None else sys.stderr
        self.after_s, self.every_s = after_s, every_s
        self.launch = None
        self.started = 0.0
        self.shown = False          # a status line is on the terminal: finish() completes it

    def initialize(self, launch) -> None:
        self.launch, self.started = launch, time.monotonic()
        WATCHER.add(self)

    def finish(self, stats) -> None:
        WATCHER.remove(self)
        if self.shown or time.monotonic() - self.started >= self.after_s:
            self.write(self.launch.n_ctas, end="\n")

    def poll(self, now: float) -> None:
        """Called by the watcher thread: show the position once the launch has run long enough."""
        if now - self.started >= self.after_s:
            self.write(self.launch.first_cta)

    def write(self, done: int, end: str = "") -> None:
        launch = self.launch
        seconds = time.monotonic() - self.started
        self.stream.write(f"\r[emulated GPU] kernel {launch.name}: {done} of {launch.n_ctas} CTAs done "
                          f"({seconds:.1f} s){end}")
        self.stream.flush()
        self.shown = not end


class _Watcher:
    """One daemon thread for every watched launch (launches on several streams run at once)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.watched: list[Progress] = []
        self.thread = None

    def add(self, tool: Progress) -> None:
        with self.lock:
            self.watched.append(tool)
            if self.thread is None:
                self.thread = threading.Thread(target=self.loop, name="lowlevel-emu-progress", daemon=True)
                self.thread.start()

    def remove(self, tool: Progress) -> None:
        with self.lock:
            # under the lock: a poll in flight completes first, and none follows
            if tool in self.watched:
                self.watched.remove(tool)

    def loop(self) -> None:
        while True:
            with self.lock:
                tools = list(self.watched)
                now = time.monotonic()
                for tool in tools:
                    tool.poll(now)
                wait = min((t.every_s for t in tools), default=0.5)
            time.sleep(wait)


WATCHER = _Watcher()

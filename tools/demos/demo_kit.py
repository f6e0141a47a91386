"""What the demos share: their options, one small kernel, timing, and how they report.

Each demo (tools/demos/NAME.py, also `lowlevel demo NAME`) measures one thing about
synchronous and asynchronous execution, then prints

  - what it measured: the host's wall clock and the device's events, side by side, with ratios
  - the timeline of what ran (lowlevel.profile()'s report)
  - where the Chrome trace of it was written, and how to open it

On the emulated GPU, --model turns on the H200 time model (LOWLEVEL_EMU_TIMING=model,
read when the emulated driver starts): device times are then what an H200 would take for
the work done. Without it they are the emulator's own CPU time, which can mislead: a
small kernel takes milliseconds where a 16 MB copy takes less.
"""
import argparse
import os
import tempfile
import threading
import time

import numpy as np

# One kernel for every demo: each thread reads x[i], runs `iters` dependent FMAs on it and
# writes it back, so its cost grows with n * iters, on the emulator and on a GPU alike.
WORK_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry work(.param .u64 x, .param .u32 n, .param .u32 iters)
{
    .reg .u32 %r<8>; .reg .u64 %d<4>; .reg .f32 %f<2>; .reg .pred %p<2>;
    mov.u32 %r0, %tid.x; mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x;
    mad.lo.u32 %r3, %r1, %r2, %r0;
    ld.param.u32 %r4, [n];
    setp.ge.u32 %p0, %r3, %r4;
    @%p0 bra DONE;
    ld.param.u64 %d0, [x]; mul.wide.u32 %d1, %r3, 4; add.u64 %d2, %d0, %d1;
    ld.global.f32 %f0, [%d2];
    ld.param.u32 %r5, [iters]; mov.u32 %r6, 0;
LOOP:
    setp.ge.u32 %p1, %r6, %r5;
    @%p1 bra STORE;
    fma.rn.f32 %f0, %f0, 0f3F7FF972, 0f3C23D70A;
    add.u32 %r6, %r6, 1;
    bra LOOP;
STORE:
    st.global.f32 [%d2], %f0;
DONE:
    ret;
}
"""
BLOCK = 256


def parse(name: str, doc: str, argv=None) -> argparse.Namespace:
    """The options every demo takes; --model is set in the environment before the driver starts."""
    parser = argparse.ArgumentParser(prog=f"lowlevel demo {name}", description=doc.split("\n\n")[0])
    parser.add_argument("--model", action="store_true",
                        help="on the emulated GPU: report modelled H200 device times (LOWLEVEL_EMU_TIMING=model)")
    parser.add_argument("--trace", metavar="T.JSON", default=os.path.join(tempfile.gettempdir(),
                                                                         f"lowlevel-demo-{name}.json"),
                        help="where the Chrome trace is written (default: in the temporary directory)")
    args = parser.parse_args(argv)
    if args.model:
        os.environ["LOWLEVEL_EMU_TIMING"] = "model"
    return args


def work_kernel():
    """The demos' kernel, loaded on the current device (lowlevel.cuda imported here, after --model is set)."""
    from lowlevel import cuda
    return cuda.Module.from_ptx(WORK_PTX).get_function("work")


def launch(kernel, buf, n: int, iters: int, stream) -> None:
    kernel.launch((-(-n // BLOCK),), (BLOCK,), (buf, np.uint32(n), np.uint32(iters)), stream=stream)


def timing_mode() -> str:
    """'gpu', 'model' or 'emulator': what the device times are, as the driver says
    (lowlevel.cuda.get_driver().timing), not as the environment asked."""
    from lowlevel import cuda
    timing = cuda.get_driver().timing
    if timing.startswith("measured"):
        return "gpu"
    return "model" if timing.startswith("modelled") else "emulator"


def header(title: str, sizes: str) -> None:
    mode = timing_mode()
    print(f"== {title}")
    print(f"   sizes: {sizes}")
    if mode == "gpu":
        print("   device times: measured on a real GPU (CUDA events)")
    elif mode == "model":
        print("   device times: MODELLED for an H200 (LOWLEVEL_EMU_TIMING=model), from the work these sizes do;")
        print("   the host's wall clock is still the emulator's: what an H200 would show is the device column")
    else:
        print("   device times: the EMULATED GPU's own CPU time (no time model). They can mislead: the")
        print("   emulator runs kernels slowly and copies fast, the reverse of a GPU. Run with --model for")
        print("   what an H200 would show for the same work.")


class Clock:
    """Host wall clock and device events around a block of work on one or more streams:
    `with Clock(s1, s2) as c: ...` then c.host_ms, c.device_ms(). The other streams wait for
    the begin event on the first, and the first waits for them before its end event, so
    the device span covers all of their work (and adds no host synchronisation)."""

    def __init__(self, *streams):
        from lowlevel import cuda
        self.streams = streams
        self.begin, self.end = cuda.Event(), cuda.Event()
        self.joins = [cuda.Event(timing=False) for _ in streams[1:]]

    def __enter__(self):
        first = self.streams[0]
        self.begin.record(first)
        for other in self.streams[1:]:
            other.wait(self.begin)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.host_ms = (time.perf_counter() - self.t0) * 1e3
        first = self.streams[0]
        for other, join in zip(self.streams[1:], self.joins):
            first.wait(join.record(other))
        self.end.record(first)
        return False

    def device_ms(self) -> float:
        self.end.synchronize()
        return self.begin.elapsed_ms(self.end)


class Gate:
    """Holds `stream` back while the block queues work on it: a host function that waits
    (stream.add_callback) is queued first and released on leaving the block, so the device
    starts on work that is all queued. The device's timeline is then its own, not the
    host's pace of submitting (the emulator's host is slow: without a gate a modelled
    device mostly waits for it). Nothing in the block may wait for the stream."""

    def __init__(self, stream):
        self.stream, self.started, self.open = stream, threading.Event(), threading.Event()

    def hold(self) -> None:
        """The host function: no CUDA call in it, as the driver requires."""
        self.started.set()
        self.open.wait()

    def __enter__(self):
        self.stream.add_callback(self.hold)
        # the work is queued once the stream is held: the gate's (real, so modelled) time
        # then covers all of the queueing
        self.started.wait(timeout=60)
        return self

    def __exit__(self, *exc):
        self.open.set()
        return False


def table(rows, note: str = "") -> None:
    """rows: (what, host ms, device ms or None); each ratio is against the column's first figure."""
    print(f"\n   {'':50s} {'host wall ms':>12s} {'device ms':>10s} {'host x':>7s} {'device x':>8s}")
    base_host = next((r[1] for r in rows if r[1]), 1e-9)
    base_dev = next((r[2] for r in rows if r[2]), 1e-9)
    for what, host, dev in rows:
        device = "-" if dev is None else f"{dev:.3f}"
        ratio = "-" if dev is None else f"{dev / base_dev:.2f}"
        print(f"   {what:50s} {host:12.3f} {device:>10s} {host / base_host:7.2f} {ratio:>8s}")
    if note:
        print(f"   {note}")


def finish(profile, trace_path: str, shows: dict) -> None:
    """The timeline, the trace file, and what the run's timing mode shows."""
    print("\n-- timeline (lowlevel.profile().report())")
    print(profile.report())
    profile.export_chrome_trace(trace_path)
    print(f"\n-- trace written to {trace_path}")
    print("   open it in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)")
    print(f"\n-- what this shows ({timing_mode()} times)")
    print("   " + shows[timing_mode() if timing_mode() in shows else "gpu"])

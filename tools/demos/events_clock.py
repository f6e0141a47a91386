"""Events against the wall clock.

Three ways to time one kernel: the host's clock around the launch alone (it measures the
launch, not the kernel: the launch returns at once), the host's clock around launch and
synchronize (the kernel plus the launch, the wait and whatever else the host did), and
two events recorded on the stream around the kernel (`Event.elapsed_ms`): the device's
own time for it, with no host in it.

    python tools/demos/events_clock.py [--model] [--trace t.json]      (or: lowlevel demo events_clock)
"""
import sys
import time

import demo_kit as kit

N, ITERS = 1 << 15, 32          # 32768 threads x 32 FMAs


def main(argv=None) -> int:
    args = kit.parse("events_clock", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel, stream = kit.work_kernel(), cuda.Stream(non_blocking=True)
    x = cuda.mem_alloc(4 * N)
    kit.launch(kernel, x, N, ITERS, stream)
    stream.synchronize()

    kit.header("events against the wall clock", f"one kernel of {N} threads x {ITERS} FMAs")
    begin, end = cuda.Event(), cuda.Event()
    with ll.profile() as p:
        t0 = time.perf_counter()
        begin.record(stream)
        kit.launch(kernel, x, N, ITERS, stream)
        end.record(stream)
        launch_ms = (time.perf_counter() - t0) * 1e3
        stream.synchronize()
        synced_ms = (time.perf_counter() - t0) * 1e3
    kit.table([("host clock around the launch only", launch_ms, None),
               ("host clock around launch + synchronize", synced_ms, None),
               ("events around the kernel (elapsed_ms)", synced_ms, begin.elapsed_ms(end))],
              "the last row's host figure is the wall clock of the same run, beside the events' time")
    kit.finish(p, args.trace, {
        "emulator": "the events time the emulator's CPU work on the kernel, far longer than a GPU's",
        "model": "the events give what an H200 takes for the kernel (microseconds); the host clock "
                 "still counts the emulator, so only the events are H200 figures",
        "gpu": "the launch-only clock misses the kernel; the synced clock adds host time; events don't"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

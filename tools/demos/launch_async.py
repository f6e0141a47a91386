"""A launch returns before the kernel ends.

`kernel.launch(...)` queues the kernel on a stream and returns: what the host waits for
is the driver taking the launch, a few microseconds on a GPU. The kernel runs afterwards;
`stream.query()` right after the launch says it has not finished, and
`stream.synchronize()` is where the host waits for it.

    python tools/demos/launch_async.py [--model] [--trace t.json]      (or: lowlevel demo launch_async)
"""
import sys
import time

import demo_kit as kit

N, ITERS = 1 << 15, 64          # 32768 threads, 64 dependent FMAs each


def main(argv=None) -> int:
    args = kit.parse("launch_async", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel, stream = kit.work_kernel(), cuda.Stream(non_blocking=True)
    x = cuda.mem_alloc(4 * N)
    kit.launch(kernel, x, N, ITERS, stream)         # warm-up: the first launch of a module costs more
    stream.synchronize()

    kit.header("a launch returns before the kernel ends", f"{N} threads x {ITERS} FMAs, one kernel")
    with ll.profile() as p:
        with kit.Clock(stream) as clock:                 # events just before and after the kernel
            t0 = time.perf_counter()
            kit.launch(kernel, x, N, ITERS, stream)
            returned_ms = (time.perf_counter() - t0) * 1e3
        finished_at_return = stream.query()
        stream.synchronize()
        waited_ms = (time.perf_counter() - t0) * 1e3
    kit.table([("launch(): until the call returned", returned_ms, None),
               ("launch() + synchronize(): until the kernel ended", waited_ms, clock.device_ms())])
    print(f"\n   had the kernel finished when launch() returned? {finished_at_return}")
    kit.finish(p, args.trace, {
        "emulator": "the launch returns at once while the emulator runs the kernel on a worker thread; "
                    "the kernel's time is the emulator's (far slower than a GPU)",
        "model": "an H200 takes the launch in microseconds and runs this kernel in about the device time "
                 "above: the host is free for all of it",
        "gpu": "the host got control back long before the kernel ended: that gap is what async buys"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The legacy default stream serialises against blocking streams, not non-blocking ones.

Work on the legacy default stream (handle 0, `Stream.legacy()`, where a launch goes when
no stream is given) waits for all earlier work on every blocking stream of the context,
and later work on blocking streams waits for it. Kernel A on stream 1, a tiny kernel on
the legacy stream, kernel B on stream 2: with blocking streams (`Stream()`) B cannot start
until A has ended; with `Stream(non_blocking=True)` the legacy stream's kernel ignores
them and A and B run at the same time.

    python tools/demos/default_stream.py [--model] [--trace t.json]      (or: lowlevel demo default_stream)
"""
import sys

import demo_kit as kit

N, ITERS = 1 << 14, 64          # kernels A and B: 16384 threads x 64 FMAs


def a_legacy_b(kernel, xa, xb, xs, s1, s2) -> None:
    kit.launch(kernel, xa, N, ITERS, s1)             # A
    kit.launch(kernel, xs, 32, 1, None)              # a tiny kernel on the legacy default stream
    kit.launch(kernel, xb, N, ITERS, s2)             # B


def main(argv=None) -> int:
    args = kit.parse("default_stream", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel = kit.work_kernel()
    xa, xb, xs = cuda.mem_alloc(4 * N), cuda.mem_alloc(4 * N), cuda.mem_alloc(4 * 32)
    kit.launch(kernel, xa, N, ITERS, None)
    cuda.synchronize()

    kit.header("the legacy default stream", f"kernels A and B of {N} threads x {ITERS} FMAs, a 32-thread one between")
    rows = []
    with ll.profile() as p:
        for what, non_blocking in (("blocking streams: A, legacy, B in order", False),
                                   ("non-blocking streams: A and B overlap", True)):
            s1, s2 = cuda.Stream(non_blocking=non_blocking), cuda.Stream(non_blocking=non_blocking)
            with kit.Gate(s1), kit.Clock(s1, s2) as clock:          # the device starts once all is queued
                a_legacy_b(kernel, xa, xb, xs, s1, s2)
            rows.append((what, clock.host_ms, clock.device_ms()))
            cuda.synchronize()
    kit.table(rows, "device ms: from A's start to the end of both A and B")
    kit.finish(p, args.trace, {
        "emulator": "the emulator keeps the legacy stream's order; with non-blocking streams its worker "
                    "threads run A and B at once (sharing the CPU's cores, so not quite twice as fast)",
        "model": "on an H200 A and B each fill a fraction of the 132 SMs, so without the legacy stream "
                 "between them they run side by side: a fraction of the blocking span",
        "gpu": "the blocking case runs A then B; the non-blocking case runs them at once"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Stream priorities: urgent work ahead of queued bulk work.

A low-priority stream is given a batch of long kernels; just after, a short kernel is
queued on a second stream. When the GPU's SMs are busy with the bulk work, the block
scheduler starts the blocks of a higher-priority stream's kernel before the remaining
blocks of lower-priority ones (`Stream(priority=p)`: lower numbers are more urgent,
`lowlevel.cuda.stream_priority_range()` gives the range). The demo times the short
kernel's end from the moment the bulk work was queued, once with the second stream at the
same low priority, once at the highest.

    python tools/demos/priorities.py [--model] [--trace t.json]      (or: lowlevel demo priorities)
"""
import sys

import demo_kit as kit

BULK, BULK_N, BULK_ITERS = 4, 1 << 15, 32      # 4 bulk kernels of 32768 threads x 32 FMAs
SHORT_N, SHORT_ITERS = 1 << 10, 8              # the urgent one: 1024 threads x 8 FMAs


def main(argv=None) -> int:
    args = kit.parse("priorities", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel = kit.work_kernel()
    least, greatest = cuda.stream_priority_range()
    bulk, urgent = cuda.mem_alloc(4 * BULK_N), cuda.mem_alloc(4 * SHORT_N)
    kit.launch(kernel, bulk, BULK_N, BULK_ITERS, None)
    cuda.synchronize()

    kit.header("stream priorities", f"{BULK} bulk kernels of {BULK_N} threads x {BULK_ITERS} FMAs, then one of "
               f"{SHORT_N} x {SHORT_ITERS}; priorities {least} (least) to {greatest} (greatest)")
    rows = []
    with ll.profile() as p:
        for what, priority in ((f"urgent stream at {least}, as the bulk", least),
                               (f"urgent stream at {greatest}, the greatest", greatest)):
            low, second = cuda.Stream(non_blocking=True, priority=least), cuda.Stream(non_blocking=True, priority=priority)
            short_done = cuda.Event()
            with kit.Gate(low), kit.Clock(low, second) as clock:     # the device starts once all is queued
                for _ in range(BULK):
                    kit.launch(kernel, bulk, BULK_N, BULK_ITERS, low)
                kit.launch(kernel, urgent, SHORT_N, SHORT_ITERS, second)
                short_done.record(second)
            total = clock.device_ms()
            rows.append((what + ": short kernel ends", clock.host_ms, clock.begin.elapsed_ms(short_done)))
            rows.append(("    and all the work ends", clock.host_ms, total))
    kit.table(rows, "device ms: from queuing the bulk work to the short kernel's end, and to the end of all")
    kit.finish(p, args.trace, {
        "emulator": "the emulated GPU records priorities but schedules its streams' worker threads alike: "
                    "the short kernel ends at about the same time in both cases",
        "model": "the modelled device shares its SMs between the streams' kernels as they come; it does "
                 "not model priorities (see the README's time model), so both cases come out alike",
        "gpu": "at the greatest priority the short kernel's blocks start ahead of the bulk's remaining blocks"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

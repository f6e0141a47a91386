"""The cost of a sync: synchronize after every op, against once at the end.

The same K small kernels, queued twice: first with `stream.synchronize()` after each (the
host waits for every kernel before it launches the next, so the GPU idles while the host
launches), then with one synchronize at the end (the host queues all K while the GPU
works through them). The device time between two events around each run shows the idle
gaps; the host's wall clock shows what the waits cost the program.

    python tools/demos/sync_cost.py [--model] [--trace t.json]      (or: lowlevel demo sync_cost)
"""
import sys

import demo_kit as kit

N, ITERS, K = 1 << 12, 16, 20          # 20 small kernels of 4096 threads x 16 FMAs


def main(argv=None) -> int:
    args = kit.parse("sync_cost", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel, stream = kit.work_kernel(), cuda.Stream(non_blocking=True)
    x = cuda.mem_alloc(4 * N)
    kit.launch(kernel, x, N, ITERS, stream)
    stream.synchronize()

    kit.header("the cost of a sync", f"{K} kernels of {N} threads x {ITERS} FMAs")
    with ll.profile() as p:
        with kit.Clock(stream) as every:
            for _ in range(K):
                kit.launch(kernel, x, N, ITERS, stream)
                stream.synchronize()                     # the host waits for each kernel
        with kit.Clock(stream) as once:
            for _ in range(K):
                kit.launch(kernel, x, N, ITERS, stream)
            stream.synchronize()                         # one wait, for all of them
    kit.table([(f"synchronize after each of the {K} kernels", every.host_ms, every.device_ms()),
               ("synchronize once at the end", once.host_ms, once.device_ms())],
              "device ms: from the first kernel's start to the last one's end, idle gaps included")
    kit.finish(p, args.trace, {
        "emulator": "the emulator's kernels are slow against its launch and sync, so the gaps barely show; "
                    "with --model the idle gaps a GPU has between synced kernels appear",
        "model": "each modelled kernel takes microseconds, but the modelled device starts each one when "
                 "the emulator's host has submitted it (about a millisecond per launch, a GPU's host takes "
                 "microseconds): both spans are the host's pace, and the sync after each adds its round trip",
        "gpu": "each sync makes the GPU idle while the host launches the next kernel"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

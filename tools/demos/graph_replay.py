"""Eager launches against a CUDA graph replay.

K small kernels launched one by one cost the host K launches (each a driver call, and on a
GPU a few microseconds of launch latency between kernels). Captured once into a CUDA graph
(`with lowlevel.cuda.capture(stream) as g:`; `lowlevel.cuda.graph()` does the same for
tensor ops), they replay with one call, `g.instantiate().launch(stream)`, and the device
runs them back to back.

    python tools/demos/graph_replay.py [--model] [--trace t.json]      (or: lowlevel demo graph_replay)
"""
import sys

import demo_kit as kit

N, ITERS, K = 1 << 12, 8, 20          # 20 kernels of 4096 threads x 8 FMAs


def launch_all(kernel, x, stream) -> None:
    for _ in range(K):
        kit.launch(kernel, x, N, ITERS, stream)


def main(argv=None) -> int:
    args = kit.parse("graph_replay", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    kernel, stream = kit.work_kernel(), cuda.Stream(non_blocking=True)
    x = cuda.mem_alloc(4 * N)
    launch_all(kernel, x, stream)
    with cuda.capture(stream) as graph:                  # queued into the graph, not run
        launch_all(kernel, x, stream)
    replay = graph.instantiate()
    replay.launch(stream)                                # warm-up replay
    stream.synchronize()

    kit.header("eager launches against a graph replay", f"{K} kernels of {N} threads x {ITERS} FMAs")
    with ll.profile() as p:
        with kit.Clock(stream) as eager:
            launch_all(kernel, x, stream)
        eager_ms = eager.device_ms()
        with kit.Clock(stream) as replayed:
            replay.launch(stream)
        replay_ms = replayed.device_ms()
    kit.table([(f"eager: {K} launch calls", eager.host_ms, eager_ms),
               (f"graph: one replay of the {K} captured kernels", replayed.host_ms, replay_ms)],
              "host ms: until the calls returned; device ms: from the first kernel's start to the last's end")
    kit.finish(p, args.trace, {
        "emulator": "the host saves K-1 launch calls; the emulator's kernels are so slow that the device "
                    "span is the same either way",
        "model": "the eager kernels start as the emulator's host submits them (its launches are slow), "
                 "the replay's back to back, 1 us apart: the device span shrinks as it would on an H200, "
                 "where the eager gaps are the launch latency",
        "gpu": "one call instead of K, and the kernels run back to back"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

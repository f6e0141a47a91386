"""Pageable against pinned copies.

`memcpy_htod_async` from a plain numpy array (pageable memory) cannot be a DMA from that
memory: the driver stages it through a pinned buffer of its own, and the call returns only
once the data is staged, so it is not asynchronous for the host, and PCIe runs slower.
From page-locked memory (`lowlevel.cuda.pinned_empty`) the copy engine reads the array
directly: the call returns at once and the copy runs at full PCIe bandwidth.

    python tools/demos/pinned_copies.py [--model] [--trace t.json]      (or: lowlevel demo pinned_copies)
"""
import sys

import numpy as np

import demo_kit as kit

N, REPEAT = 1 << 22, 4          # 16 MB of float32, copied 4 times


def main(argv=None) -> int:
    args = kit.parse("pinned_copies", __doc__, argv)
    import lowlevel as ll
    from lowlevel import cuda
    stream = cuda.Stream(non_blocking=True)
    device = cuda.mem_alloc(4 * N)
    pageable = np.ones(N, np.float32)
    pinned = cuda.pinned_empty(N, np.float32)
    pinned[:] = 1.0
    cuda.memcpy_htod_async(device, pinned, stream)
    stream.synchronize()

    kit.header("pageable against pinned copies", f"{REPEAT} host-to-device copies of {4 * N >> 20} MB")
    rows = []
    with ll.profile() as p:
        for what, host in (("from pageable memory (numpy)", pageable), ("from pinned memory (pinned_empty)", pinned)):
            with kit.Clock(stream) as clock:
                for _ in range(REPEAT):
                    cuda.memcpy_htod_async(device, host, stream)
            rows.append((what + ": the calls", clock.host_ms, clock.device_ms()))
    kit.table(rows, "host ms: until the async calls returned (not waited for); device ms: the copies")
    gb = REPEAT * 4 * N / 1e9
    for what, _, dev in rows:
        print(f"   {what}: {gb / (dev / 1e3):.1f} GB/s" if dev else f"   {what}: -")
    kit.finish(p, args.trace, {
        "emulator": "the emulator copies with memcpy at host-memory speed: both kinds look alike and far "
                    "faster than PCIe; with --model the two copy paths of a GPU show",
        "model": "the pinned copies run at the modelled PCIe 5 bandwidth of an H200; the pageable calls "
                 "hold the host until the data is staged, as on a GPU, but the emulator's staging is far "
                 "slower than a GPU's, and the modelled copies wait for it: their figure is the emulator's host",
        "gpu": "pinned copies return at once and run at PCIe bandwidth; pageable ones stall the host"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

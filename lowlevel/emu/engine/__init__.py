"""Running decoded PTX on numpy: decode, schedule, memory.

    decode.py     PTX kernels -> Python basic blocks (the families of isa/ write the code);
                  load_ptx: parse, inline calls, decode
    scheduler.py  run_kernel: batches of CTAs, the converged and divergent paths, barriers,
                  the watchdog, and the events tools observe
    batch_specials.py  %tid, %ctaid, %laneid ... of a batch of CTAs
    spaces.py     shared, local and generic accesses, module variables, atomics' dispatch
    memory.py     the device memory arena (global memory) and its bounds checks
    hostwindow.py the arena as a memfd with a host window at the device addresses (unified
                  addressing), the address-space view, host ranges kernels may reach
    atomics.py    atomic read-modify-write on memory
    stats.py      LaunchStats, and the grid/block shapes run_kernel takes
    waits.py      mbarrier waits: parking, yielding looping warps, deadlock reports
    warpwait.py   lanes parked at a *.sync warp instruction until the lanes their mask names arrive
    faults.py     KernelFault: what goes wrong while a kernel runs
"""

"""What a launch reports (LaunchStats), and the grid/block shapes run_kernel takes."""
from dataclasses import dataclass, field


@dataclass
class LaunchStats:
    thread_instructions: int = 0    # sum over executed instructions of active threads
    block_steps: int = 0            # basic-block executions (each over many threads)
    divergent_steps: int = 0        # of those, how many ran on a gathered subset
    batches: int = 0
    ctas: int = 0
    threads: int = 0
    races: list = field(default_factory=list)   # racecheck reports (LOWLEVEL_EMU_RACECHECK=1)
    printed: str = ""                # printf output, in thread order (isa/printf.py)
    block_lanes: list = field(default_factory=list)   # per basic block: lanes that ran it
    cpu_s: float = 0.0               # the emulator's CPU seconds (tools/timemodel.KernelTime)
    modelled_us: float | None = None    # its duration on the modelled H200 (LOWLEVEL_EMU_TIMING=model)


def launch_dims(v, what) -> tuple[int, int, int]:
    """An int or 1 to 3 positive ints as (x, y, z) (the engine used directly; the driver
    checks cuLaunchKernel's against the device first)."""
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise ValueError(f"{what} must be 1 to 3 positive integers, got {v}")
    return v + (1,) * (3 - len(v))

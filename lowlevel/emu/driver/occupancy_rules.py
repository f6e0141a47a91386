"""The occupancy calculator's rules (cuda_occupancy.h), for compute capabilities 8.x and 9.0.

How many CTAs of a kernel fit on one SM at once is the least of five limits:
- warps: the SM's warp slots (2048 threads = 64 warps) over the CTA's warps (rounded up);
- registers: each warp gets its registers in units of 256 (registers per thread x 32,
  rounded up); the register file is split among 4 sub-partitions, and a CTA's warps are
  spread over them, so a CTA is counted with its warps rounded up to a multiple of 4
  against the per-block limit, and the SM holds (registers per sub-partition / registers
  per warp) warps in each sub-partition;
- shared memory: a CTA takes its static + dynamic shared memory plus the 1 KB the system
  reserves per CTA, rounded up to 128 bytes; the SM's shared memory is the carveout (by
  default all of it), itself rounded up to one of the sizes the hardware configures
  (0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KB on sm_90);
- CTA slots: 32 on sm_80 and sm_90 (16 on sm_86, 24 on sm_89);
- block barriers (sm_90): two per CTA slot, one per CTA: never the limit here.
"""
from dataclasses import dataclass

KB = 1024
REGISTER_UNIT = 256                  # registers are allocated to a warp in these units
SHARED_UNIT = 128                    # and shared memory to a CTA in these (sm_80+)
SUB_PARTITIONS = 4
MAX_REGISTERS_PER_THREAD = 256       # the calculator's per-thread cap (cudaOccRegAllocationMaxPerThread)


@dataclass(frozen=True)
class SmProperties:
    """What the calculator needs to know about one SM of a device."""
    major: int
    minor: int
    sms: int
    max_threads_per_sm: int = 2048
    max_threads_per_block: int = 1024
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    warp: int = 32
    shared_per_sm: int = 228 * KB
    shared_per_block: int = 48 * KB
    shared_per_block_optin: int = 227 * KB
    reserved_shared_per_block: int = 1 * KB
    shared_configs_kb: tuple = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


SM_80 = SmProperties(8, 0, sms=108, shared_per_sm=164 * KB, shared_per_block_optin=163 * KB,
                     shared_configs_kb=(0, 8, 16, 32, 64, 100, 132, 164))
SM_86 = SmProperties(8, 6, sms=84, max_threads_per_sm=1536, max_blocks_per_sm=16, shared_per_sm=100 * KB,
                     shared_per_block_optin=99 * KB, shared_configs_kb=(0, 8, 16, 32, 64, 100))
SM_90 = SmProperties(9, 0, sms=132)


@dataclass(frozen=True)
class KernelResources:
    """What the calculator needs to know about one kernel."""
    registers: int                   # per thread
    static_shared: int = 0           # bytes per CTA
    max_dynamic_shared: int = 48 * KB
    max_threads_per_block: int = 1024
    carveout: int = -1               # percent of the SM's shared memory, -1: the default


@dataclass(frozen=True)
class Occupancy:
    blocks: int                      # active CTAs per SM
    limits: dict                     # resource -> the CTAs that resource alone allows
    block_size: int

    @property
    def warps(self) -> int:
        return self.blocks * -(-self.block_size // 32)

    @property
    def limiting(self) -> list[str]:
        """The resources that set the number (all those tied at the minimum)."""
        return [name for name, n in self.limits.items() if n == self.blocks]


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def shared_config(sm: SmProperties, nbytes: int) -> int | None:
    """The smallest shared memory configuration that holds `nbytes` (None: none does)."""
    for size in sm.shared_configs_kb:
        if nbytes <= size * KB:
            return size * KB
    return None


def carveout_bytes(sm: SmProperties, carveout: int) -> int | None:
    """The SM's shared memory for a carveout preference (-1: all of it)."""
    wanted = sm.shared_per_sm if carveout == -1 else carveout * sm.shared_per_sm // 100
    return shared_config(sm, wanted)


def warp_limit(sm: SmProperties, k: KernelResources, block_size: int) -> int:
    if block_size > min(sm.max_threads_per_block, k.max_threads_per_block):
        return 0
    return (sm.max_threads_per_sm // sm.warp) // -(-block_size // sm.warp)


def register_limit(sm: SmProperties, k: KernelResources, block_size: int) -> int:
    warps = -(-block_size // sm.warp)
    per_warp = _round_up(k.registers * sm.warp, REGISTER_UNIT)
    if per_warp == 0:
        return 1 << 31
    assumed = per_warp * _round_up(warps, SUB_PARTITIONS)      # the hardware's view of a CTA
    if assumed > sm.registers_per_block or per_warp * warps > sm.registers_per_block \
            or k.registers > MAX_REGISTERS_PER_THREAD:
        return 0
    warps_per_partition = (sm.registers_per_sm // SUB_PARTITIONS) // per_warp
    return warps_per_partition * SUB_PARTITIONS // warps


def shared_limit(sm: SmProperties, k: KernelResources, dynamic: int) -> int:
    static = k.static_shared + sm.reserved_shared_per_block
    per_cta = _round_up(static + dynamic, SHARED_UNIT)
    # cudaOccSMemPerBlock with the opt-in configuration: the larger per-block limit applies
    # when the kernel may use more than the default (it compares without the reserve).
    opted_in = static + k.max_dynamic_shared > sm.shared_per_block
    per_block_limit = (sm.shared_per_block_optin if opted_in else sm.shared_per_block) + sm.reserved_shared_per_block
    if dynamic > k.max_dynamic_shared or per_cta > per_block_limit:
        return 0
    preferred = carveout_bytes(sm, k.carveout) or 0
    per_sm = preferred if preferred >= per_cta else shared_config(sm, per_cta)
    if per_sm is None:
        return 0
    return per_sm // per_cta


def max_threads_for_registers(sm: SmProperties, registers: int) -> int:
    """The largest block whose registers fit the register file (whole warps, counted in
    groups of 4 as the sub-partitions see them): what cuFuncGetAttribute's
    MAX_THREADS_PER_BLOCK reports, and beyond which a launch is out of resources."""
    per_warp = _round_up(max(registers, 1) * sm.warp, REGISTER_UNIT)
    warps = sm.registers_per_block // per_warp // SUB_PARTITIONS * SUB_PARTITIONS
    return min(sm.max_threads_per_block, warps * sm.warp)


def max_active_blocks(sm: SmProperties, k: KernelResources, block_size: int, dynamic: int = 0) -> Occupancy:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor, by the calculator's rules."""
    limits = {
        "warps": warp_limit(sm, k, block_size),
        "registers": register_limit(sm, k, block_size),
        "shared memory": shared_limit(sm, k, dynamic),
        "blocks": sm.max_blocks_per_sm,
    }
    return Occupancy(min(limits.values()), limits, block_size)


def max_potential_block_size(sm: SmProperties, k: KernelResources, dynamic_for, limit: int = 0) -> tuple[int, int]:
    """(min grid size, block size) that maximise the threads resident per SM, the largest
    block size winning ties; `dynamic_for(block_size)` is the dynamic shared memory."""
    block_limit = min(sm.max_threads_per_block, k.max_threads_per_block)
    if limit > 0:
        block_limit = min(block_limit, limit)
    best_size = best_blocks = best_threads = 0
    for aligned in range(_round_up(block_limit, sm.warp), 0, -sm.warp):
        size = min(block_limit, aligned)
        blocks = max_active_blocks(sm, k, size, dynamic_for(size)).blocks
        if size * blocks > best_threads:
            best_size, best_blocks, best_threads = size, blocks, size * blocks
        if best_threads == sm.max_threads_per_sm:
            break
    return best_blocks * sm.sms, best_size


def available_dynamic_shared(sm: SmProperties, k: KernelResources, blocks: int, block_size: int) -> int | None:
    """cuOccupancyAvailableDynamicSMemPerBlock: the most dynamic shared memory per CTA
    that still lets `blocks` CTAs of `block_size` threads share one SM (None: they never do)."""
    if blocks <= 0 or max_active_blocks(sm, k, block_size, 0).blocks < blocks:
        return None
    per_block_limit = sm.shared_per_block_optin + sm.reserved_shared_per_block
    if blocks == 1:
        per_sm = per_block_limit
    else:
        per_sm = carveout_bytes(sm, k.carveout) or shared_config(sm, 1)
    available = min(per_sm // blocks // SHARED_UNIT * SHARED_UNIT, per_block_limit)
    available -= k.static_shared + sm.reserved_shared_per_block
    return max(0, min(available, k.max_dynamic_shared))

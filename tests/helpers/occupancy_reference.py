"""An occupancy calculator written for the tests from cuda_occupancy.h (CUDA 13), apart
from lowlevel's: cudaOccMaxActiveBlocksPerMultiprocessor and its helpers, for compute
capability 8.0 and 9.0, followed step by step (partitioned global caching does not exist
on these; one block barrier per CTA, the header's default)."""
KB = 1024
INT_MAX = 2**31 - 1

# cudaOccDeviceProp for an A100 (sm_80) and an H100/H200 (sm_90)
DEVICES = {
    80: dict(major=8, minor=0, numSms=108, maxThreadsPerBlock=1024, maxThreadsPerMultiprocessor=2048,
             regsPerBlock=65536, regsPerMultiprocessor=65536, warpSize=32, sharedMemPerBlock=48 * KB,
             sharedMemPerMultiprocessor=164 * KB, sharedMemPerBlockOptin=163 * KB, reservedSharedMemPerBlock=KB),
    90: dict(major=9, minor=0, numSms=132, maxThreadsPerBlock=1024, maxThreadsPerMultiprocessor=2048,
             regsPerBlock=65536, regsPerMultiprocessor=65536, warpSize=32, sharedMemPerBlock=48 * KB,
             sharedMemPerMultiprocessor=228 * KB, sharedMemPerBlockOptin=227 * KB, reservedSharedMemPerBlock=KB),
}
# cudaOccAlignUpShmemSizeVoltaPlus: the shared memory configurations, KB
SHMEM_SIZES = {80: [0, 8, 16, 32, 64, 100, 132, 164], 90: [0, 8, 16, 32, 64, 100, 132, 164, 196, 228]}


def divide_round_up(x, y):
    return (x + y - 1) // y


def round_up(x, y):
    return divide_round_up(x, y) * y


def align_up_shmem(cc, size):
    for kb in SHMEM_SIZES[cc]:
        if size <= kb * KB:
            return kb * KB
    raise ValueError("CUDA_OCC_ERROR_INVALID_INPUT")


def smem_preference(cc, prop, carveout):
    if carveout == -1:
        size = prop["sharedMemPerMultiprocessor"]
    else:
        size = carveout * prop["sharedMemPerMultiprocessor"] // 100
    return align_up_shmem(cc, size)


def smem_per_block_limit(prop, smem_per_cta):
    # FUNC_SHMEM_LIMIT_OPTIN
    limit = prop["sharedMemPerBlockOptin"] if smem_per_cta > prop["sharedMemPerBlock"] else prop["sharedMemPerBlock"]
    return limit + prop["reservedSharedMemPerBlock"]


def blocks_warps(prop, fn, block_size):
    if block_size > prop["maxThreadsPerBlock"]:
        return 0
    return (prop["maxThreadsPerMultiprocessor"] // prop["warpSize"]) // divide_round_up(block_size, prop["warpSize"])


def blocks_regs(prop, fn, block_size):
    warps = divide_round_up(block_size, prop["warpSize"])
    regs_per_warp = round_up(fn["numRegs"] * prop["warpSize"], 256)
    per_cta = regs_per_warp * warps
    assumed = regs_per_warp * round_up(warps, 4)
    if prop["regsPerBlock"] < assumed or prop["regsPerBlock"] < per_cta or fn["numRegs"] > 256:
        return 0
    if regs_per_warp == 0:
        return INT_MAX
    warps_per_sub_partition = (prop["regsPerMultiprocessor"] // 4) // regs_per_warp
    return warps_per_sub_partition * 4 // warps


def blocks_smem(cc, prop, fn, dynamic):
    static = fn["sharedSizeBytes"] + prop["reservedSharedMemPerBlock"]
    allocated = round_up(static + dynamic, 128)
    if dynamic > fn["maxDynamicSharedSizeBytes"]:
        return 0
    if allocated > smem_per_block_limit(prop, static + fn["maxDynamicSharedSizeBytes"]):
        return 0
    preference = smem_preference(cc, prop, fn["carveout"])
    per_sm = preference if preference >= allocated else align_up_shmem(cc, allocated)
    return per_sm // allocated if allocated > 0 else INT_MAX


def max_active_blocks(cc, fn, block_size, dynamic=0):
    """(active blocks per SM, {limit: blocks}) for kernel `fn` (numRegs, sharedSizeBytes,
    maxDynamicSharedSizeBytes, carveout)."""
    prop = DEVICES[cc]
    limits = {"warps": blocks_warps(prop, fn, block_size), "registers": blocks_regs(prop, fn, block_size),
              "shared memory": blocks_smem(cc, prop, fn, dynamic), "blocks": 32}
    active = min(limits.values())
    barriers = 2 * limits["blocks"]          # sm_80 and sm_90: two block barriers per CTA slot
    return min(active, barriers), limits


def max_potential_block_size(cc, fn, dynamic_for, limit=0):
    prop = DEVICES[cc]
    block_limit = min(prop["maxThreadsPerBlock"], fn.get("maxThreadsPerBlock", 1024))
    if limit > 0:
        block_limit = min(block_limit, limit)
    best = (0, 0, 0)
    size = round_up(block_limit, 32)
    while size > 0:
        tried = min(block_limit, size)
        blocks = max_active_blocks(cc, fn, tried, dynamic_for(tried))[0]
        if tried * blocks > best[2]:
            best = (tried, blocks, tried * blocks)
        if best[2] == prop["maxThreadsPerMultiprocessor"]:
            break
        size -= 32
    return best[1] * prop["numSms"], best[0]


def available_dynamic_smem(cc, fn, blocks, block_size):
    prop = DEVICES[cc]
    if blocks <= 0 or max_active_blocks(cc, fn, block_size, 0)[0] < blocks:
        return None
    limit = smem_per_block_limit(prop, prop["sharedMemPerMultiprocessor"])
    per_sm = limit if blocks == 1 else (smem_preference(cc, prop, fn["carveout"]) or align_up_shmem(cc, 1))
    available = min(per_sm // blocks // 128 * 128, limit)
    available -= fn["sharedSizeBytes"] + prop["reservedSharedMemPerBlock"]
    return min(available, fn["maxDynamicSharedSizeBytes"])


# The SMs of each GPC of an H100 SXM5 / H200 (132 SMs in 8 GPCs): a cluster's CTAs are
# placed in one GPC, so a cluster is as large as the CTAs the largest GPC holds at once.
GPC_SMS = {90: (18, 18, 16, 16, 16, 16, 16, 16)}
PORTABLE_CLUSTER_SIZE, MAX_CLUSTER_SIZE = 8, 16


def max_potential_cluster_size(cc, fn, block_size, dynamic=0, non_portable=False, max_cluster_rank=0,
                               required=None):
    """cuOccupancyMaxPotentialClusterSize: the required cluster's size when the kernel has
    one; else the portable 8 (16 with non-portable sizes allowed), at most the kernel's
    .maxclusterrank, as far as the largest GPC holds that many CTAs at once."""
    if required:
        x, y, z = required
        return x * y * z
    limit = MAX_CLUSTER_SIZE if non_portable else PORTABLE_CLUSTER_SIZE
    if max_cluster_rank:
        limit = min(limit, max_cluster_rank)
    per_sm = max_active_blocks(cc, fn, block_size, dynamic)[0]
    return min(limit, per_sm * max(GPC_SMS[cc]))

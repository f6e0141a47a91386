// cuda_occupancy.h as an oracle: one line of input per case (major minor threadsPerSm smemPerSm optin numSms
// regs block static dynamic maxDynamic carveout), one line out: active blocks per SM (or "error N").
#include <cstdio>
#include "cuda_occupancy.h"
int main() {
    int major, minor, threadsPerSm, numSms, regs, block, maxThreads, carveout;
    size_t smemPerSm, optin, stat, dyn, maxDyn;
    while (std::scanf("%d %d %d %zu %zu %d %d %d %zu %zu %zu %d", &major, &minor, &threadsPerSm, &smemPerSm,
                      &optin, &numSms, &regs, &block, &stat, &dyn, &maxDyn, &carveout) == 12) {
        cudaOccDeviceProp prop;
        prop.computeMajor = major; prop.computeMinor = minor;
        prop.maxThreadsPerBlock = 1024; prop.maxThreadsPerMultiprocessor = threadsPerSm;
        prop.regsPerBlock = 65536; prop.regsPerMultiprocessor = 65536; prop.warpSize = 32;
        prop.sharedMemPerBlock = 48 * 1024; prop.sharedMemPerMultiprocessor = smemPerSm;
        prop.numSms = numSms; prop.sharedMemPerBlockOptin = optin; prop.reservedSharedMemPerBlock = 1024;
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = maxThreads = 1024; attr.numRegs = regs; attr.sharedSizeBytes = stat;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF; attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = maxDyn; attr.numBlockBarriers = 1; attr.virtualResourceCount = 0;
        cudaOccDeviceState state;
        state.carveoutConfig = carveout;
        cudaOccResult result;
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, block, dyn);
        if (err != CUDA_OCC_SUCCESS) std::printf("error %d\n", (int)err);
        else std::printf("%d\n", result.activeBlocksPerMultiprocessor);
        (void)maxThreads;
    }
    return 0;
}

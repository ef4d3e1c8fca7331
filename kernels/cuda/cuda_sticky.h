/* Which CUDA errors leave the device unusable for the whole process
 * (backend_ctx.device_fault, docs/gpu.md "Sticky device faults"). Apart
 * from the CUDA headers it needs nothing, so a CPU-only test can check it. */
#ifndef PARLE_CUDA_STICKY_H
#define PARLE_CUDA_STICKY_H

#include <driver_types.h>

/* 1 for the errors that driver_types.h (CUDA 13) documents as leaving "the
 * process in an inconsistent state" where "any further CUDA work will return
 * the same error" and "the process must be terminated and relaunched", plus
 * those after which the device cannot be trusted either: an uncorrectable
 * ECC or NVLink error, and cudaErrorUnknown (nothing says what state it left;
 * a new process is the only safe answer). Everything else (out of memory, a
 * bad argument, a missing device) fails one call and the context goes on. */
static inline int cuda_error_sticky(cudaError_t rc)
{
    switch (rc) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorContained:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorUnknown:
        return 1;
    default:
        return 0;
    }
}

#endif

/* Which CUDA errors mark a device faulted for the process (cuda_sticky.h,
 * docs/gpu.md "Sticky device faults"): the enum's values only, so it runs
 * on a machine without a GPU. */
#include "cuda_sticky.h"
#include "testutil.h"

int main(void)
{
    test_init("cuda_sticky");
    static const cudaError_t sticky[] = {
        cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorECCUncorrectable,
        cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
        cudaErrorInvalidAddressSpace, cudaErrorInvalidPc, cudaErrorAssert, cudaErrorUnknown,
        cudaErrorLaunchTimeout, cudaErrorContained, cudaErrorTensorMemoryLeak,
        cudaErrorNvlinkUncorrectable, cudaErrorMpsClientTerminated, cudaErrorExternalDevice,
    };
    for (size_t i = 0; i < sizeof sticky / sizeof sticky[0]; i++)
        CHECK(cuda_error_sticky(sticky[i]), "error %d is not sticky", (int)sticky[i]);
    /* One call fails; the context goes on. */
    static const cudaError_t passing[] = {
        cudaSuccess, cudaErrorNotReady, cudaErrorMemoryAllocation, cudaErrorInvalidValue,
        cudaErrorInvalidDevice, cudaErrorNoDevice, cudaErrorInvalidConfiguration,
        cudaErrorLaunchOutOfResources, cudaErrorPeerAccessAlreadyEnabled,
        cudaErrorInsufficientDriver,
    };
    for (size_t i = 0; i < sizeof passing / sizeof passing[0]; i++)
        CHECK(!cuda_error_sticky(passing[i]), "error %d is sticky", (int)passing[i]);
    return test_main_end();
}

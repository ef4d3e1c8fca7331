#include "device_cuda.h"
#include "cuda_check.h"

extern "C" int cuda_probe(int inject, int *count, int *cc, int max, int ver[2], char *text, size_t len)
{
    *count = 0;
    ver[0] = ver[1] = 0;
    (void)cudaRuntimeGetVersion(&ver[0]);
    (void)cudaDriverGetVersion(&ver[1]); /* 0 when no driver is loaded */
    cudaError_t rc = inject ? (cudaError_t)inject : cudaGetDeviceCount(count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError(); /* answered here, not an error to keep */
        *count = 0;
        snprintf(text, len, "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
        return (int)rc;
    }
    for (int i = 0; i < *count && i < max; i++) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i) != cudaSuccess)
            (void)cudaGetLastError(); /* unknown: taken as unusable (0) */
        cc[i] = major * 10 + minor;
    }
    return 0;
}

extern "C" int cuda_set_device(int device, char *err, size_t errlen)
{
    CUDA_CHECK(cudaSetDevice(device));
    return 0;
}

extern "C" int cuda_alloc(void **ptr, size_t bytes, char *err, size_t errlen)
{
    *ptr = NULL;
    CUDA_CHECK(cudaMalloc(ptr, bytes));
    return 0;
}

/* Freeing has no one to report to; a failure here shows up at the next check. */
extern "C" void cuda_free(void *ptr) { (void)cudaFree(ptr); }

extern "C" int cuda_copy(void *dst, const void *src, size_t bytes, cudaStream_t s, char *err,
                         size_t errlen)
{
    /* Unified addressing (every 64-bit CUDA platform) lets the runtime tell
     * host from device pointers, so one copy serves all directions. */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    return 0;
}

extern "C" int cuda_stream_sync(cudaStream_t s, char *err, size_t errlen)
{
    CUDA_CHECK(cudaStreamSynchronize(s));
    return 0;
}

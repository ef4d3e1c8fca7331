#include "device_cuda.h"
#include "cuda_check.h"

extern "C" int cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error to keep */
        return 0;
    }
    return count;
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

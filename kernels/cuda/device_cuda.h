/* Host helpers for CUDA devices and device memory. Callable from C. Every
 * function that can fail returns 0 / -1 and fills err. */
#ifndef PARLE_DEVICE_CUDA_H
#define PARLE_DEVICE_CUDA_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The driver's devices (cudaGetDeviceCount; inject, when not 0, is taken for
 * its result), each one's compute capability (major * 10 + minor, the first
 * `max`) and the CUDA versions of the runtime (ver[0]) and the driver (ver[1];
 * 1000 * major + 10 * minor, 0 when no driver is loaded): 0, or the CUDA
 * error, *count 0 and the runtime's words and name for it in text. */
int cuda_probe(int inject, int *count, int *cc, int max, int ver[2], char *text, size_t len);
/* Make `device` current for the calling thread. */
int cuda_set_device(int device, char *err, size_t errlen);
int cuda_alloc(void **ptr, size_t bytes, char *err, size_t errlen);
void cuda_free(void *ptr);
/* Copy in any direction (host/device, device/device), ordered on stream s. */
int cuda_copy(void *dst, const void *src, size_t bytes, cudaStream_t s, char *err, size_t errlen);
/* Wait for stream s; reports errors of kernels that failed after launch. */
int cuda_stream_sync(cudaStream_t s, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif

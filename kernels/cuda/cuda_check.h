/* Error checks for CUDA, cuBLAS and cuDNN calls, two styles:
 *
 * CUDA_CHECK(call): the 0 / -1 + err buffer style of device.cu and vecops.cu;
 * returns -1 from the enclosing function, which must have `char *err, size_t
 * errlen` in scope, with "file:line: function: call: cudaErrorName
 * (description)" in err.
 *
 * CUDA_OK(ctx, call), CUBLAS_OK(ctx, call), CUDNN_OK(ctx, call): the backend
 * context's style; an expression that is 1 when the call succeeded and
 * otherwise 0, with "file:line: function: STATUS_NAME (message)" recorded as
 * the context's sticky error (backend_fail keeps the first; the call is
 * named by its function alone, so that long argument lists cannot push the
 * status out of ctx->err). Nothing is printed, nothing exits: the op returns
 * and the caller sees backend_failed(). A status that leaves the device
 * unusable for the process (cuda_sticky.h) also sets ctx->device_fault; a
 * cuBLAS or cuDNN failure asks the runtime whether that is what lies under it. */
#ifndef PARLE_CUDA_CHECK_H
#define PARLE_CUDA_CHECK_H

#include <stdio.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "backend.h"
#include "cuda_sticky.h"

static inline int cuda_fail(char *err, size_t errlen, const char *file, int line, const char *func,
                            const char *call, cudaError_t rc)
{
    (void)cudaGetLastError(); /* as cuda_ok_: the next launch check must not report it again */
    snprintf(err, errlen, "%s:%d: %s: %s: %s (%s)", file, line, func, call, cudaGetErrorName(rc),
             cudaGetErrorString(rc));
    return -1;
}

/* The called function's name: the call's text up to its argument list. */
#define CALL_NAME_LEN(call) ((int)strcspn((call), "("))

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t cuda_check_rc_ = (call);                                                \
        if (cuda_check_rc_ != cudaSuccess)                                                  \
            return cuda_fail(err, errlen, __FILE__, __LINE__, __func__, #call, cuda_check_rc_); \
    } while (0)

/* The one message shape of every library's failure. Returns 0. */
static inline int library_fail_(backend_ctx *ctx, const char *file, int line, const char *call,
                                const char *status, const char *why)
{
    backend_fail(ctx, "%s:%d: %.*s: %s (%s)", file, line, CALL_NAME_LEN(call), call, status, why);
    return 0;
}

static inline int cuda_ok_(backend_ctx *ctx, cudaError_t rc, const char *file, int line,
                           const char *call)
{
    if (rc == cudaSuccess)
        return 1;
    /* Clear the thread's last-error slot, or the next cudaGetLastError()
     * after a kernel launch (of this or another context) would report this
     * failure again. A device fault stays sticky in the driver regardless. */
    (void)cudaGetLastError();
    ctx->device_fault |= cuda_error_sticky(rc);
    return library_fail_(ctx, file, line, call, cudaGetErrorName(rc), cudaGetErrorString(rc));
}

/* A call whose CUDA status is not ours to see (cuBLAS, cuDNN, NCCL, an
 * err-buffer helper of vecops.cu) failed: was it because the device is gone
 * for this process? A sticky error is returned by every later runtime call,
 * so a query that waits for nothing answers it. Only on failure paths. */
static inline void cuda_probe_device(backend_ctx *ctx)
{
    cudaError_t rc = cudaStreamQuery(0);
    if (rc != cudaSuccess && rc != cudaErrorNotReady)
        (void)cudaGetLastError();
    ctx->device_fault |= cuda_error_sticky(rc);
}

static inline int cublas_ok_(backend_ctx *ctx, cublasStatus_t rc, const char *file, int line,
                             const char *call)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return 1;
    cuda_probe_device(ctx);
    return library_fail_(ctx, file, line, call, cublasGetStatusName(rc),
                         cublasGetStatusString(rc));
}

static inline int cudnn_ok_(backend_ctx *ctx, cudnnStatus_t rc, const char *file, int line,
                            const char *call)
{
    if (rc == CUDNN_STATUS_SUCCESS)
        return 1;
    cuda_probe_device(ctx);
    /* cudnnGetErrorString gives the status's name; the last error string,
     * when cuDNN kept one, says what was wrong with the arguments. */
    char why[200] = "";
    cudnnGetLastErrorString(why, sizeof why);
    return library_fail_(ctx, file, line, call, cudnnGetErrorString(rc),
                         why[0] ? why : "no details");
}

#define CUDA_OK(ctx, call) cuda_ok_((ctx), (call), __FILE__, __LINE__, #call)
#define CUBLAS_OK(ctx, call) cublas_ok_((ctx), (call), __FILE__, __LINE__, #call)
#define CUDNN_OK(ctx, call) cudnn_ok_((ctx), (call), __FILE__, __LINE__, #call)

#endif

/* Error reporting for CUDA runtime calls, in the project's 0 / -1 + err buffer
 * style: CUDA_CHECK(call) returns -1 from the enclosing function, which must
 * have `char *err, size_t errlen` in scope, with "file:line: function: call:
 * cudaErrorName (description)" in err. */
#ifndef PARLE_CUDA_CHECK_H
#define PARLE_CUDA_CHECK_H

#include <stdio.h>
#include <cuda_runtime_api.h>

static inline int cuda_fail(char *err, size_t errlen, const char *file, int line, const char *func,
                            const char *call, cudaError_t rc)
{
    snprintf(err, errlen, "%s:%d: %s: %s: %s (%s)", file, line, func, call, cudaGetErrorName(rc),
             cudaGetErrorString(rc));
    return -1;
}

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t cuda_check_rc_ = (call);                                                \
        if (cuda_check_rc_ != cudaSuccess)                                                  \
            return cuda_fail(err, errlen, __FILE__, __LINE__, __func__, #call, cuda_check_rc_); \
    } while (0)

#endif

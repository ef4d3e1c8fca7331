/* Activations in the kernels (CUDA C++ only): a context stores them as float
 * or, at bf16 precision, as __nv_bfloat16 (ctx->act). Kernels are templates
 * over that element type T; they read every activation as float, compute in
 * float (or double where they did), and round each result to T once, to
 * nearest even. ACT_DISPATCH calls a template with the type of the context. */
#ifndef PARLE_ACT_CUH
#define PARLE_ACT_CUH

#include <cuda_bf16.h>

#include "backend.h"

__device__ __forceinline__ float act_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float act_ld(const __nv_bfloat16 *p, size_t i)
{
    return __bfloat162float(p[i]);
}
__device__ __forceinline__ void act_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void act_st(__nv_bfloat16 *p, size_t i, float v)
{
    p[i] = __float2bfloat16_rn(v);
}

/* fn<T>(args...) with T the context's activation type; the template casts
 * its activation arguments (passed as they came, float pointers) to T. */
#define ACT_DISPATCH(ctx, fn, ...)                                                 \
    ((ctx)->act == DTYPE_BF16 ? fn<__nv_bfloat16>(__VA_ARGS__) : fn<float>(__VA_ARGS__))

template <typename T> __host__ __device__ inline const T *act_in(const float *p)
{
    return reinterpret_cast<const T *>(p);
}
template <typename T> __host__ __device__ inline T *act_out(float *p)
{
    return reinterpret_cast<T *>(p);
}

#endif

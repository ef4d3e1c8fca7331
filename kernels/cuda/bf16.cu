/* fp32 <-> bf16 copies for the bf16 precision: the rest of parle keeps its
 * tensors in fp32, and the convolutions convert their operands into bf16
 * scratch around each cuDNN call (conv_cudnn.c). */
#include <cuda_bf16.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

/* Round to nearest, ties to even: the rounding the CPU reference in the
 * tests reproduces, and an unbiased one, so that rounding errors do not
 * drift in one direction over a long sum. */
extern "C" void cuda_to_bf16(backend_ctx *ctx, size_t n, const float *x, uint16_t *y)
{
    __nv_bfloat16 *out = reinterpret_cast<__nv_bfloat16 *>(y);
    auto f = [=] __device__(size_t i) { out[i] = __float2bfloat16_rn(x[i]); };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), n, f));
}

/* Exact: every bf16 value is a float. */
extern "C" void cuda_from_bf16(backend_ctx *ctx, size_t n, const uint16_t *x, float *y)
{
    const __nv_bfloat16 *in = reinterpret_cast<const __nv_bfloat16 *>(x);
    auto f = [=] __device__(size_t i) { y[i] = __bfloat162float(in[i]); };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), n, f));
}

/* fp32 <-> bf16 for the bf16 precision, where activations are bf16 and
 * everything else fp32: the staged batch into activations, the weights into
 * bf16 scratch for cuDNN and cuBLAS, and cuDNN's bf16 weight gradients back
 * (conv_cudnn.c, linear_cublas.c); and the sum of two activations. */
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

/* The ops of backend.h that only bf16 activations need. */
extern "C" void cuda_act_from_f32_op(backend_ctx *ctx, size_t n, const float *x, float *out)
{
    cuda_to_bf16(ctx, n, x, reinterpret_cast<uint16_t *>(out));
}

/* y += x, the sum in float rounded once. */
extern "C" void cuda_act_add_op(backend_ctx *ctx, size_t n, const float *x, float *y)
{
    const __nv_bfloat16 *a = reinterpret_cast<const __nv_bfloat16 *>(x);
    __nv_bfloat16 *b = reinterpret_cast<__nv_bfloat16 *>(y);
    auto f = [=] __device__(size_t i) {
        b[i] = __float2bfloat16_rn(__bfloat162float(b[i]) + __bfloat162float(a[i]));
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), n, f));
}

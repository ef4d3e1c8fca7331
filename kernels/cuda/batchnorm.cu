/* Batch normalisation over (n, hw) for each of c channels, x[i][ch][j], with
 * the maths of kernels/cpu/batchnorm.c. Training forward and backward give
 * each channel one block, which reduces the channel in double, then (having
 * the statistics in hand) writes the channel's outputs: one launch, no
 * global synchronisation. Two passes for the variance (the mean first, then
 * squared deviations from it) so that no cancellation can creep in whatever
 * the offset of the data. Reduction order is fixed by the launch shape:
 * repeated runs give the same bits. x, y, dy and dx are activations of the
 * context's type (act.cuh); parameters and statistics stay fp32. A context
 * with batchnorm_split trains with batchnorm_split.cu's kernels instead. */
#include <math.h>

#include "act.cuh"
#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

/* Wider blocks than the element-wise kernels': a block walks a whole channel
 * (n hw values, 131072 in WRN's first stage at batch 128). */
enum { BN_THREADS = 512 };

/* The sum over the block of v, in every thread. */
__device__ static double block_sum_all(double v)
{
    __shared__ double total;
    v = block_sum(v);
    if (threadIdx.x == 0)
        total = v;
    __syncthreads();
    v = total;
    __syncthreads(); /* total may be overwritten by the next call */
    return v;
}

/* Offset of element e (of the channel's n hw) of channel ch. */
__device__ static size_t bn_index(size_t e, int c, int hw, int ch)
{
    const size_t i = e / (size_t)hw, j = e % (size_t)hw;
    return (i * c + ch) * hw + j;
}

template <typename T>
__global__ void bn_train_kernel(int n, int c, int hw, const T *x, const float *gamma,
                                const float *beta, float *running_mean, float *running_var,
                                float momentum, float eps, T *y, float *save_mean,
                                float *save_invstd)
{
    const int ch = blockIdx.x;
    const size_t count = (size_t)n * hw;
    double s1 = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x)
        s1 += act_ld(x, bn_index(e, c, hw, ch));
    const double mean = block_sum_all(s1) / (double)count;
    double s2 = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const double dev = act_ld(x, bn_index(e, c, hw, ch)) - mean;
        s2 += dev * dev;
    }
    const double sq = block_sum_all(s2), var = sq / (double)count;
    /* The per-channel floats exactly as the CPU forms them from its sums. */
    const float m = (float)mean, invstd = (float)(1.0 / sqrt(var + eps));
    const float a = gamma[ch] * invstd, b = beta[ch] - a * m;
    if (threadIdx.x == 0) {
        save_mean[ch] = m;
        save_invstd[ch] = invstd;
        /* PyTorch tracks the unbiased variance (one value: nothing to correct). */
        const double unbiased = count > 1 ? sq / (double)(count - 1) : var;
        running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * m;
        running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
    }
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t at = bn_index(e, c, hw, ch);
        act_st(y, at, a * act_ld(x, at) + b);
    }
}

template <typename T>
static void bn_train(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *gamma,
                     const float *beta, float *running_mean, float *running_var, float momentum,
                     float eps, float *y, float *save_mean, float *save_invstd)
{
    bn_train_kernel<T><<<c, BN_THREADS, 0, cuda_stream_of(ctx)>>>(
        n, c, hw, act_in<T>(x), gamma, beta, running_mean, running_var, momentum, eps,
        act_out<T>(y), save_mean, save_invstd);
    CUDA_OK(ctx, cudaGetLastError());
}

extern "C" void cuda_batchnorm_forward_train_op(backend_ctx *ctx, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, float *running_mean,
                                                float *running_var, float momentum, float eps,
                                                float *y, float *save_mean, float *save_invstd)
{
    if (ctx->batchnorm_split) {
        cuda_bn_split_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean, running_var,
                                    momentum, eps, 0, y, save_mean, save_invstd);
        return;
    }
    if (c <= 0 || (size_t)n * hw == 0)
        return;
    ACT_DISPATCH(ctx, bn_train, ctx, n, c, hw, x, gamma, beta, running_mean, running_var,
                 momentum, eps, y, save_mean, save_invstd);
}

/* Split: one fused pass. Otherwise backend.c's composition, op for op. */
extern "C" void cuda_batchnorm_relu_forward_train_op(backend_ctx *ctx, int n, int c, int hw,
                                                     const float *x, const float *gamma,
                                                     const float *beta, float *running_mean,
                                                     float *running_var, float momentum,
                                                     float eps, float *y, float *save_mean,
                                                     float *save_invstd)
{
    if (ctx->batchnorm_split) {
        cuda_bn_split_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean, running_var,
                                    momentum, eps, 1, y, save_mean, save_invstd);
        return;
    }
    cuda_batchnorm_forward_train_op(ctx, n, c, hw, x, gamma, beta, running_mean, running_var,
                                    momentum, eps, y, save_mean, save_invstd);
    if (!ctx->failed)
        cuda_relu_forward_op(ctx, (size_t)n * c * hw, y, y);
}

template <typename T>
static void bn_infer(backend_ctx *ctx, int n, int c, int hw, const float *xv, const float *gamma,
                     const float *beta, const float *running_mean, const float *running_var,
                     float eps, float *yv)
{
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
    const size_t inner = (size_t)hw;
    auto f = [=] __device__(size_t i) {
        const int ch = (int)(i / inner % c);
        const float a = gamma[ch] / sqrtf(running_var[ch] + eps);
        const float b = beta[ch] - a * running_mean[ch];
        act_st(y, i, a * act_ld(x, i) + b);
    };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), (size_t)n * c * hw, f));
}

extern "C" void cuda_batchnorm_forward_infer_op(backend_ctx *ctx, int n, int c, int hw,
                                                const float *x, const float *gamma,
                                                const float *beta, const float *running_mean,
                                                const float *running_var, float eps, float *y)
{
    ACT_DISPATCH(ctx, bn_infer, ctx, n, c, hw, x, gamma, beta, running_mean, running_var, eps, y);
}

/* With xhat = (x - mean) invstd and N = n hw:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd (dy - dbeta / N - xhat dgamma / N) = k dy + a x + b,
 * the terms in x and the constants gathered, as the CPU does. */
template <typename T>
__global__ void bn_backward_kernel(int n, int c, int hw, const T *x, const T *dy,
                                   const float *gamma, const float *save_mean,
                                   const float *save_invstd, T *dx, float *dgamma, float *dbeta)
{
    const int ch = blockIdx.x;
    const size_t count = (size_t)n * hw;
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    double s1 = 0.0, s2 = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t at = bn_index(e, c, hw, ch);
        const float g = act_ld(dy, at);
        s1 += g;
        s2 += (double)g * (double)(act_ld(x, at) - mean);
    }
    s1 = block_sum_all(s1);
    s2 = block_sum_all(s2);
    const float db = (float)s1, dg = (float)(s2 * invstd);
    const float k = gamma[ch] * invstd, a = -k * dg * invstd / (float)count;
    const float b = -k * db / (float)count - a * mean;
    if (threadIdx.x == 0) {
        dbeta[ch] = db;
        dgamma[ch] = dg;
    }
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t at = bn_index(e, c, hw, ch);
        act_st(dx, at, k * act_ld(dy, at) + a * act_ld(x, at) + b);
    }
}

template <typename T>
static void bn_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                        const float *gamma, const float *save_mean, const float *save_invstd,
                        float *dx, float *dgamma, float *dbeta)
{
    bn_backward_kernel<T><<<c, BN_THREADS, 0, cuda_stream_of(ctx)>>>(
        n, c, hw, act_in<T>(x), act_in<T>(dy), gamma, save_mean, save_invstd, act_out<T>(dx),
        dgamma, dbeta);
    CUDA_OK(ctx, cudaGetLastError());
}

/* A backward with nothing to compute: no channels, or an empty batch, whose
 * sums are 0, as on the CPU. */
static int bn_backward_empty(backend_ctx *ctx, int n, int c, int hw, float *dgamma, float *dbeta)
{
    if (c <= 0)
        return 1;
    if ((size_t)n * hw > 0)
        return 0;
    cuda_zero_op(ctx, dgamma, (size_t)c * sizeof(float));
    cuda_zero_op(ctx, dbeta, (size_t)c * sizeof(float));
    return 1;
}

extern "C" void cuda_batchnorm_backward_op(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *save_mean, const float *save_invstd,
                                           float *dx, float *dgamma, float *dbeta)
{
    if (bn_backward_empty(ctx, n, c, hw, dgamma, dbeta))
        return;
    if (ctx->batchnorm_split) {
        cuda_bn_split_backward(ctx, n, c, hw, x, dy, gamma, NULL, save_mean, save_invstd, 0, dx,
                               dgamma, dbeta);
        return;
    }
    ACT_DISPATCH(ctx, bn_backward, ctx, n, c, hw, x, dy, gamma, save_mean, save_invstd, dx,
                 dgamma, dbeta);
}

extern "C" void cuda_batchnorm_relu_backward_op(backend_ctx *ctx, int n, int c, int hw,
                                                const float *x, const float *y, float *dy,
                                                const float *gamma, const float *beta,
                                                const float *save_mean,
                                                const float *save_invstd, float *dx,
                                                float *dgamma, float *dbeta)
{
    if (ctx->batchnorm_split) {
        if (!bn_backward_empty(ctx, n, c, hw, dgamma, dbeta))
            cuda_bn_split_backward(ctx, n, c, hw, x, dy, gamma, beta, save_mean, save_invstd, 1,
                                   dx, dgamma, dbeta);
        return;
    }
    cuda_relu_backward_op(ctx, (size_t)n * c * hw, y, dy, dy);
    if (!ctx->failed)
        cuda_batchnorm_backward_op(ctx, n, c, hw, x, dy, gamma, save_mean, save_invstd, dx,
                                   dgamma, dbeta);
}

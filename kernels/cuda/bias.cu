/* Per-channel bias of linear and convolution layers: broadcast forward, and
 * the gradient's reduction backward. A tensor of activations (the context's
 * type, act.cuh) is seen as [n][c][inner]; the bias and its gradient are fp32. */
#include "act.cuh"
#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

template <typename T>
static void bias_fill(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *yv)
{
    T *y = act_out<T>(yv);
    const size_t count = (size_t)n * c * inner;
    auto f = [=] __device__(size_t i) { act_st(y, i, b ? b[i / inner % c] : 0.0f); };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), count, f));
}

template <typename T>
static void bias_add(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *yv)
{
    T *y = act_out<T>(yv);
    const size_t count = (size_t)n * c * inner;
    auto f = [=] __device__(size_t i) { act_st(y, i, act_ld(y, i) + b[i / inner % c]); };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), count, f));
}

extern "C" void cuda_bias_fill(backend_ctx *ctx, int n, int c, size_t inner, const float *b,
                               float *y)
{
    ACT_DISPATCH(ctx, bias_fill, ctx, n, c, inner, b, y);
}

extern "C" void cuda_bias_add(backend_ctx *ctx, int n, int c, size_t inner, const float *b,
                              float *y)
{
    ACT_DISPATCH(ctx, bias_add, ctx, n, c, inner, b, y);
}

/* One block per channel: its threads stride over the channel's n * inner
 * values (rows of `inner` apart `c * inner`), summing in double, then the
 * block adds up its threads. Fixed order: the same bits every run. */
template <typename T>
__global__ void bias_grad_kernel(int n, int c, size_t inner, const T *dy, float *db)
{
    const int ch = blockIdx.x;
    const size_t count = (size_t)n * inner;
    double sum = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t i = e / inner, j = e % inner;
        sum += act_ld(dy, (i * c + ch) * inner + j);
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        db[ch] = (float)sum;
}

template <typename T>
static void bias_grad(backend_ctx *ctx, int n, int c, size_t inner, const float *dy, float *db)
{
    bias_grad_kernel<T><<<c, THREADS_PER_BLOCK, 0, cuda_stream_of(ctx)>>>(n, c, inner,
                                                                         act_in<T>(dy), db);
    CUDA_OK(ctx, cudaGetLastError());
}

extern "C" void cuda_bias_grad(backend_ctx *ctx, int n, int c, size_t inner, const float *dy,
                               float *db)
{
    if (c > 0)
        ACT_DISPATCH(ctx, bias_grad, ctx, n, c, inner, dy, db);
}

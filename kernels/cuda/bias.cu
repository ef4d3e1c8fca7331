/* Per-channel bias of linear and convolution layers: broadcast forward, and
 * the gradient's reduction backward. A tensor is seen as [n][c][inner]. */
#include "backend_cuda.h"
#include "cuda_check.h"
#include "launch.cuh"

extern "C" void cuda_bias_fill(backend_ctx *ctx, int n, int c, size_t inner, const float *b,
                               float *y)
{
    const size_t count = (size_t)n * c * inner;
    auto f = [=] __device__(size_t i) { y[i] = b ? b[i / inner % c] : 0.0f; };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), count, f));
}

extern "C" void cuda_bias_add(backend_ctx *ctx, int n, int c, size_t inner, const float *b,
                              float *y)
{
    const size_t count = (size_t)n * c * inner;
    auto f = [=] __device__(size_t i) { y[i] += b[i / inner % c]; };
    CUDA_OK(ctx, for_each_index(cuda_stream_of(ctx), count, f));
}

/* One block per channel: its threads stride over the channel's n * inner
 * values (rows of `inner` apart `c * inner`), summing in double, then the
 * block adds up its threads. Fixed order: the same bits every run. */
__global__ void bias_grad_kernel(int n, int c, size_t inner, const float *dy, float *db)
{
    const int ch = blockIdx.x;
    const size_t count = (size_t)n * inner;
    double sum = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t i = e / inner, j = e % inner;
        sum += dy[(i * c + ch) * inner + j];
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        db[ch] = (float)sum;
}

extern "C" void cuda_bias_grad(backend_ctx *ctx, int n, int c, size_t inner, const float *dy,
                               float *db)
{
    if (c <= 0)
        return;
    bias_grad_kernel<<<c, THREADS_PER_BLOCK, 0, cuda_stream_of(ctx)>>>(n, c, inner, dy, db);
    CUDA_OK(ctx, cudaGetLastError());
}

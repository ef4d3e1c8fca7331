/* ReLU and inverted dropout, element-wise over elementwise.h. */
#include "backend.h"
#include "cpu_util.h"
#include "elementwise.h"

CPU_HOT static void relu_range(size_t count, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < count; i++)
        y[i] = relu_elem(x[i]);
}

/* Not restrict: dx may alias dy, and each element is read before written. */
CPU_HOT static void relu_grad_range(size_t count, const float *y, const float *dy, float *dx)
{
    for (size_t i = 0; i < count; i++)
        dx[i] = relu_grad_elem(y[i], dy[i]);
}

void relu_forward(backend_ctx *ctx, size_t count, const float *x, float *y)
{
#pragma omp parallel num_threads(ctx->threads) if (count >= CPU_PARALLEL_MIN)
    {
        size_t lo, hi;
        cpu_slice(count, &lo, &hi);
        relu_range(hi - lo, x + lo, y + lo);
    }
}

void relu_backward(backend_ctx *ctx, size_t count, const float *y, const float *dy, float *dx)
{
#pragma omp parallel num_threads(ctx->threads) if (count >= CPU_PARALLEL_MIN)
    {
        size_t lo, hi;
        cpu_slice(count, &lo, &hi);
        relu_grad_range(hi - lo, y + lo, dy + lo, dx + lo);
    }
}

/* out[i] = dropout_elem(in[i], u_i, p) with u_i = philox_uniform_at(key,
 * counter, i), drawn a block of four at a time. Forward and backward are the
 * same map, so backward redraws the forward mask. */
static void dropout_apply(backend_ctx *ctx, size_t count, float p, philox_key key,
                          uint64_t counter, const float *in, float *out)
{
    const size_t blocks = (count + 3) / 4;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if (count >= CPU_PARALLEL_MIN)
    for (size_t blk = 0; blk < blocks; blk++) {
        const philox_out r = philox4x32(key, counter + blk);
        const size_t end = 4 * blk + 4 < count ? 4 * blk + 4 : count;
        for (size_t i = 4 * blk; i < end; i++)
            out[i] = dropout_elem(in[i], philox_uniform(r.v[i & 3]), p);
    }
}

void dropout_forward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                     const float *x, float *y)
{
    dropout_apply(ctx, count, p, key, counter, x, y);
}

void dropout_backward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                      const float *dy, float *dx)
{
    dropout_apply(ctx, count, p, key, counter, dy, dx);
}

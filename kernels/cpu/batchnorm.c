/* Batch normalisation over (n, hw) for each of c channels, x[i][ch][j].
 * Channels are independent, so threads split them; sums run in float over a
 * row of hw and in double across rows. With hw = 1 (after a linear layer) a
 * row is one element, so channels are taken CHANNEL_BLOCK at a time instead,
 * each sample's block contiguous.
 *
 * With `relu` the ReLU after it runs in the same passes (LeNet's conv1 maps
 * are 5.9 MB: each pass is a trip to L3). Backward then recomputes the ReLU's
 * mask from x, a x + b > 0 with forward's a and b, rather than read y. The
 * writes go element for element after the reads of the same index, so y may
 * alias x and dx may alias dy (model plans put them in one buffer). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bn_stats.h"
#include "cpu_ops.h"
#include "cpu_util.h"
#include "elementwise.h"

enum { CHANNEL_BLOCK = 64 };

/* y = a x + b over a row, the affine form of every BN output, then ReLU. */
static inline void row_affine(int count, float a, float b, int relu, const float *x, float *y)
{
    if (relu)
        for (int j = 0; j < count; j++)
            y[j] = relu_elem(a * x[j] + b);
    else
        for (int j = 0; j < count; j++)
            y[j] = a * x[j] + b;
}

/* Sums of dy and dy (x - mean) over a row, dy masked. */
static inline void row_grad_moments(int count, const float *x, const float *dy, float mean,
                                     bn_mask m, double *s1, double *s2)
{
    float s = 0.0f, sx = 0.0f;
#pragma omp simd reduction(+ : s, sx)
    for (int j = 0; j < count; j++) {
        const float g = masked(m, x[j], dy[j]);
        s += g;
        sx += g * (x[j] - mean);
    }
    *s1 += s;
    *s2 += sx;
}

/* dx = k dy + a x + b over a row, dy masked. */
static inline void row_grad_affine(int count, float k, float a, float b, bn_mask m,
                                    const float *x, const float *dy, float *dx)
{
    for (int j = 0; j < count; j++)
        dx[j] = k * masked(m, x[j], dy[j]) + a * x[j] + b;
}

/* hw = 1: channels [c0, c0 + cb) of every sample, rows of x[i * c + ch]. */
CPU_HOT static void bn_forward_block(int n, int c, int c0, int cb, const float *x,
                                     const float *gamma, const float *beta, float *running_mean,
                                     float *running_var, float momentum, float eps, int relu,
                                     float *y, float *save_mean, float *save_invstd)
{
    double sum[CHANNEL_BLOCK] = {0}, sum_sq[CHANNEL_BLOCK] = {0};
    float a[CHANNEL_BLOCK], b[CHANNEL_BLOCK];
    const float *shift = x + c0;
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * c + c0;
        for (int j = 0; j < cb; j++) {
            const float dev = xr[j] - shift[j];
            sum[j] += dev;
            sum_sq[j] += dev * dev;
        }
    }
    for (int j = 0; j < cb; j++) {
        const int ch = c0 + j;
        const bn_affine s = bn_channel_stats(sum[j], sum_sq[j], n, shift[j], gamma[ch], beta[ch],
                                             &running_mean[ch], &running_var[ch], momentum, eps);
        save_mean[ch] = s.mean;
        save_invstd[ch] = s.invstd;
        a[j] = s.a;
        b[j] = s.b;
    }
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * c + c0;
        float *yr = y + (size_t)i * c + c0;
        if (relu)
            for (int j = 0; j < cb; j++)
                yr[j] = relu_elem(a[j] * xr[j] + b[j]);
        else
            for (int j = 0; j < cb; j++)
                yr[j] = a[j] * xr[j] + b[j];
    }
}

/* One channel, rows x[i][ch][0..hw). */
CPU_HOT static void bn_forward_channel(int n, int c, int hw, int ch, const float *x,
                                       const float *gamma, const float *beta, float *running_mean,
                                       float *running_var, float momentum, float eps, int relu,
                                       float *y, float *save_mean, float *save_invstd)
{
    const bn_affine s = bn_channel_train(n, c, hw, ch, x, gamma, beta, running_mean, running_var,
                                         momentum, eps, save_mean, save_invstd);
    for (int i = 0; i < n; i++)
        row_affine(hw, s.a, s.b, relu, x + ((size_t)i * c + ch) * hw,
                   y + ((size_t)i * c + ch) * hw);
}

static void bn_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *running_mean,
                             float *running_var, float momentum, float eps, int relu, float *y,
                             float *save_mean, float *save_invstd)
{
    const int parallel = (size_t)n * c * hw >= CPU_PARALLEL_MIN;
    if (hw == 1) {
        const int blocks = (c + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (parallel)
        for (int blk = 0; blk < blocks; blk++) {
            const int c0 = blk * CHANNEL_BLOCK, cb = c - c0 < CHANNEL_BLOCK ? c - c0 : CHANNEL_BLOCK;
            bn_forward_block(n, c, c0, cb, x, gamma, beta, running_mean, running_var, momentum,
                             eps, relu, y, save_mean, save_invstd);
        }
        return;
    }
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (parallel)
    for (int ch = 0; ch < c; ch++)
        bn_forward_channel(n, c, hw, ch, x, gamma, beta, running_mean, running_var, momentum, eps,
                           relu, y, save_mean, save_invstd);
}

void cpu_batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, float *running_mean,
                                 float *running_var, float momentum, float eps, float *y,
                                 float *save_mean, float *save_invstd)
{
    bn_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean, running_var, momentum, eps, 0,
                     y, save_mean, save_invstd);
}

void cpu_batchnorm_relu_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                      const float *gamma, const float *beta,
                                      float *running_mean, float *running_var, float momentum,
                                      float eps, float *y, float *save_mean, float *save_invstd)
{
    bn_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean, running_var, momentum, eps, 1,
                     y, save_mean, save_invstd);
}

void cpu_batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float eps, float *y)
{
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * hw >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++) {
        const float a = gamma[ch] / sqrtf(running_var[ch] + eps);
        const float b = beta[ch] - a * running_mean[ch];
        for (int i = 0; i < n; i++)
            row_affine(hw, a, b, 0, x + ((size_t)i * c + ch) * hw,
                       y + ((size_t)i * c + ch) * hw);
    }
}

/* hw = 1: channels [c0, c0 + cb) of every sample; beta: the fused ReLU's
 * (NULL: none). */
CPU_HOT static void bn_backward_block(int n, int c, int c0, int cb, const float *x,
                                      const float *dy, const float *gamma, const float *beta,
                                      const float *save_mean, const float *save_invstd, float *dx,
                                      float *dgamma, float *dbeta)
{
    double sum[CHANNEL_BLOCK] = {0}, sum_x[CHANNEL_BLOCK] = {0};
    float k[CHANNEL_BLOCK], a[CHANNEL_BLOCK], b[CHANNEL_BLOCK];
    float ya[CHANNEL_BLOCK], yb[CHANNEL_BLOCK]; /* the masks, apart: they vectorise */
    const float *mean = save_mean + c0;
    for (int j = 0; j < cb; j++) {
        const bn_mask m = channel_mask(beta ? beta + c0 + j : NULL, gamma[c0 + j], mean[j],
                                       save_invstd[c0 + j]);
        ya[j] = m.ya;
        yb[j] = m.yb;
    }
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * c + c0, *gr = dy + (size_t)i * c + c0;
        for (int j = 0; j < cb; j++) {
            const float g = masked((bn_mask){ya[j], yb[j]}, xr[j], gr[j]);
            sum[j] += g;
            sum_x[j] += g * (xr[j] - mean[j]);
        }
    }
    for (int j = 0; j < cb; j++) {
        const int ch = c0 + j;
        const bn_grad g = bn_channel_grad(sum[j], sum_x[j], n, gamma[ch], mean[j],
                                          save_invstd[ch], &dgamma[ch], &dbeta[ch]);
        k[j] = g.k;
        a[j] = g.a;
        b[j] = g.b;
    }
    for (int i = 0; i < n; i++) {
        const float *xr = x + (size_t)i * c + c0, *gr = dy + (size_t)i * c + c0;
        float *dr = dx + (size_t)i * c + c0;
        for (int j = 0; j < cb; j++)
            dr[j] = k[j] * masked((bn_mask){ya[j], yb[j]}, xr[j], gr[j]) + a[j] * xr[j] + b[j];
    }
}

/* One channel, rows x[i][ch][0..hw). */
CPU_HOT static void bn_backward_channel(int n, int c, int hw, int ch, const float *x,
                                        const float *dy, const float *gamma, const float *beta,
                                        const float *save_mean, const float *save_invstd,
                                        float *dx, float *dgamma, float *dbeta)
{
    const bn_mask m = channel_mask(beta ? beta + ch : NULL, gamma[ch], save_mean[ch],
                                   save_invstd[ch]);
    double sum_dy = 0.0, sum_dy_xc = 0.0;
    for (int i = 0; i < n; i++) {
        const size_t row = ((size_t)i * c + ch) * hw;
        row_grad_moments(hw, x + row, dy + row, save_mean[ch], m, &sum_dy, &sum_dy_xc);
    }
    const bn_grad g = bn_channel_grad(sum_dy, sum_dy_xc, (double)n * hw, gamma[ch],
                                      save_mean[ch], save_invstd[ch], &dgamma[ch], &dbeta[ch]);
    for (int i = 0; i < n; i++) {
        const size_t row = ((size_t)i * c + ch) * hw;
        row_grad_affine(hw, g.k, g.a, g.b, m, x + row, dy + row, dx + row);
    }
}

static void bn_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                        const float *gamma, const float *beta, const float *save_mean,
                        const float *save_invstd, float *dx, float *dgamma, float *dbeta)
{
    const int parallel = (size_t)n * c * hw >= CPU_PARALLEL_MIN;
    if (hw == 1) {
        const int blocks = (c + CHANNEL_BLOCK - 1) / CHANNEL_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (parallel)
        for (int blk = 0; blk < blocks; blk++) {
            const int c0 = blk * CHANNEL_BLOCK, cb = c - c0 < CHANNEL_BLOCK ? c - c0 : CHANNEL_BLOCK;
            bn_backward_block(n, c, c0, cb, x, dy, gamma, beta, save_mean, save_invstd, dx,
                              dgamma, dbeta);
        }
        return;
    }
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (parallel)
    for (int ch = 0; ch < c; ch++)
        bn_backward_channel(n, c, hw, ch, x, dy, gamma, beta, save_mean, save_invstd, dx,
                            dgamma, dbeta);
}

void cpu_batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                            const float *gamma, const float *save_mean, const float *save_invstd,
                            float *dx, float *dgamma, float *dbeta)
{
    bn_backward(ctx, n, c, hw, x, dy, gamma, NULL, save_mean, save_invstd, dx, dgamma, dbeta);
}

/* y is not read: the mask comes from x (see the top). */
void cpu_batchnorm_relu_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *y, float *dy, const float *gamma, const float *beta,
                                 const float *save_mean, const float *save_invstd, float *dx,
                                 float *dgamma, float *dbeta)
{
    (void)y;
    bn_backward(ctx, n, c, hw, x, dy, gamma, beta, save_mean, save_invstd, dx, dgamma, dbeta);
}

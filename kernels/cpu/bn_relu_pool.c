/* Batch normalisation, ReLU and max pooling with tiling windows in one
 * (LeNet's conv1 -> BN -> ReLU -> 3x3 pool).
 *
 * Apart, the three move a conv1-sized map (5.9 MB at batch 128, a trip to
 * L3 each time) eight times a step: BN's statistics, its output, the pool's
 * read, the pool's dense dx, and BN's two backward passes over x and dy.
 * Fused, forward reads x twice (statistics, then the pooled windows of
 * relu(a x + b), never stored) and backward once (BN's gradient sums need
 * only the pooled positions, since dy is zero elsewhere) and writes dx once.
 * Channels are independent, so threads split them. */
#include "bn_stats.h"
#include "cpu_ops.h"
#include "cpu_util.h"
#include "maxpool_tiled.h"

/* Planes this size and larger gain (LeNet's conv1, 24 x 24): on conv2's
 * 4 x 4 the per-plane work outweighs the traffic saved. */
enum { BN_POOL_PLANE_MIN = 64 };

int cpu_fuses_bn_relu_maxpool(const pool2d_desc *pd)
{
    const int hw = pd->in_h * pd->in_w;
    return pd->stride == pd->k && pd->pad == 0 && hw >= BN_POOL_PLANE_MIN;
}

/* One plane's windows of relu(a x + b), k a constant where it is LeNet's;
 * inlined into forward_channel's clones. */
static inline __attribute__((always_inline)) void
pool_affine_plane(const pool2d_desc *pd, const float *xp, float a, float b, float *yp,
                  int32_t *ap)
{
    const int k = pd->k, W = pd->in_w, OH = pd->out_h, OW = pd->out_w;
    if (k == 2)
        maxpool_plane_tiled(2, W, OH, OW, xp, 1, a, b, yp, ap);
    else if (k == 3)
        maxpool_plane_tiled(3, W, OH, OW, xp, 1, a, b, yp, ap);
    else
        maxpool_plane_tiled(k, W, OH, OW, xp, 1, a, b, yp, ap);
}

CPU_HOT static void forward_channel(int n, const pool2d_desc *pd, int ch, const float *x,
                                    const float *gamma, const float *beta, float *running_mean,
                                    float *running_var, float momentum, float eps, float *y,
                                    int32_t *argmax, float *save_mean, float *save_invstd)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w, ohw = pd->out_h * pd->out_w;
    const bn_affine s = bn_channel_train(n, c, hw, ch, x, gamma, beta, running_mean, running_var,
                                         momentum, eps, save_mean, save_invstd);
    for (int i = 0; i < n; i++) {
        const size_t plane = (size_t)i * c + ch;
        pool_affine_plane(pd, x + plane * hw, s.a, s.b, y + plane * ohw, argmax + plane * ohw);
    }
}

void cpu_batchnorm_relu_maxpool_forward_train(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                              const float *x, const float *gamma,
                                              const float *beta, float *running_mean,
                                              float *running_var, float momentum, float eps,
                                              float *y, int32_t *argmax, float *save_mean,
                                              float *save_invstd)
{
    const int c = pd->c;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * pd->in_h * pd->in_w >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++)
        forward_channel(n, pd, ch, x, gamma, beta, running_mean, running_var, momentum, eps, y,
                        argmax, save_mean, save_invstd);
}

/* BN's gradient sums over the pooled positions (the rest of dy is 0), then
 * dx = k dy + a x + b: a x + b everywhere, the k dy term where a window's
 * maximum was. */
CPU_HOT static void backward_channel(int n, const pool2d_desc *pd, int ch, const float *x,
                                     const float *dy, const int32_t *argmax, const float *gamma,
                                     const float *beta, const float *save_mean,
                                     const float *save_invstd, float *dx, float *dgamma,
                                     float *dbeta)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w, ohw = pd->out_h * pd->out_w;
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    const bn_mask m = channel_mask(&beta[ch], gamma[ch], mean, invstd);
    double sum_dy = 0.0, sum_dy_xc = 0.0;
    for (int i = 0; i < n; i++) {
        const size_t plane = (size_t)i * c + ch;
        const float *xp = x + plane * hw, *dyp = dy + plane * ohw;
        const int32_t *ap = argmax + plane * ohw;
        float s = 0.0f, sx = 0.0f;
#pragma omp simd reduction(+ : s, sx)
        for (int j = 0; j < ohw; j++) {
            const float xv = xp[ap[j]], g = masked(m, xv, dyp[j]);
            s += g;
            sx += g * (xv - mean);
        }
        sum_dy += s;
        sum_dy_xc += sx;
    }
    const bn_grad g = bn_channel_grad(sum_dy, sum_dy_xc, (double)n * hw, gamma[ch], mean, invstd,
                                      &dgamma[ch], &dbeta[ch]);
    for (int i = 0; i < n; i++) {
        const size_t plane = (size_t)i * c + ch;
        const float *xp = x + plane * hw, *dyp = dy + plane * ohw;
        const int32_t *ap = argmax + plane * ohw;
        float *dxp = dx + plane * hw;
        for (int p = 0; p < hw; p++)
            dxp[p] = g.a * xp[p] + g.b;
        for (int j = 0; j < ohw; j++)
            dxp[ap[j]] = g.k * masked(m, xp[ap[j]], dyp[j]) + g.a * xp[ap[j]] + g.b;
    }
}

void cpu_batchnorm_relu_maxpool_backward(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                         const float *x, const float *dy, const int32_t *argmax,
                                         const float *gamma, const float *beta,
                                         const float *save_mean, const float *save_invstd,
                                         float *dx, float *dgamma, float *dbeta)
{
    const int c = pd->c;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * pd->in_h * pd->in_w >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++)
        backward_channel(n, pd, ch, x, dy, argmax, gamma, beta, save_mean, save_invstd, dx,
                         dgamma, dbeta);
}

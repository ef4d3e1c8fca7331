/* Batch normalisation, ReLU and max pooling with tiling windows in one
 * (LeNet's conv1 -> BN -> ReLU -> 3x3 pool).
 *
 * Apart, the three move a conv1-sized map (5.9 MB at batch 128, a trip to
 * L3 each time) eight times a step: BN's statistics, its output, the pool's
 * read, the pool's dense dx, and BN's two backward passes over x and dy.
 * Fused, forward reads x twice (statistics, then the pooled windows of
 * relu(a x + b), never stored) and backward once (BN's gradient sums need
 * only the pooled positions, since dy is zero elsewhere) and writes dx once.
 * Where BN's input comes from a thin convolution (conv_thin.c) that needs no
 * data gradient (a first layer), dx is not written at all: backward only
 * sums, and the convolution's filter gradient forms each image's dx planes
 * in cache and uses them at once (cpu_conv2d_backward_filter_bn_relu_maxpool).
 * Channels are independent, so threads split them; the filter gradient's
 * threads split the images. */
#include <string.h>

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

/* BN's gradient sums over the pooled positions (the rest of dy is 0): dgamma,
 * dbeta and dx's coefficients. */
CPU_HOT static bn_grad channel_grad(int n, const pool2d_desc *pd, int ch, const float *x,
                                    const float *dy, const int32_t *argmax, const float *gamma,
                                    bn_mask m, const float *save_mean, const float *save_invstd,
                                    float *dgamma, float *dbeta)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w, ohw = pd->out_h * pd->out_w;
    const float mean = save_mean[ch];
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
    return bn_channel_grad(sum_dy, sum_dy_xc, (double)n * hw, gamma[ch], mean, save_invstd[ch],
                           &dgamma[ch], &dbeta[ch]);
}

/* One plane of dx = k dy + a x + b: a x + b everywhere, the k dy term where
 * a window's maximum was. */
static inline __attribute__((always_inline)) void
dx_plane(int hw, int ohw, bn_grad g, bn_mask m, const float *xp, const float *dyp,
         const int32_t *ap, float *dxp)
{
    for (int p = 0; p < hw; p++)
        dxp[p] = g.a * xp[p] + g.b;
    for (int j = 0; j < ohw; j++)
        dxp[ap[j]] = g.k * masked(m, xp[ap[j]], dyp[j]) + g.a * xp[ap[j]] + g.b;
}

CPU_HOT static void backward_channel(int n, const pool2d_desc *pd, int ch, const float *x,
                                     const float *dy, const int32_t *argmax, const float *gamma,
                                     const float *beta, const float *save_mean,
                                     const float *save_invstd, float *dx, float *dgamma,
                                     float *dbeta)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w, ohw = pd->out_h * pd->out_w;
    const bn_mask m = channel_mask(&beta[ch], gamma[ch], save_mean[ch], save_invstd[ch]);
    const bn_grad g = channel_grad(n, pd, ch, x, dy, argmax, gamma, m, save_mean, save_invstd,
                                   dgamma, dbeta);
    for (int i = 0; dx && i < n; i++) {
        const size_t plane = (size_t)i * c + ch;
        dx_plane(hw, ohw, g, m, x + plane * hw, dy + plane * ohw, argmax + plane * ohw,
                 dx + plane * hw);
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

#if CONV_THIN
int cpu_fuses_conv_filter_bn(const conv2d_desc *cd, const pool2d_desc *pd)
{
    return conv_thin_fits(cd) && cpu_fuses_bn_relu_maxpool(pd) && cd->out_c == pd->c &&
           cd->out_h == pd->in_h && cd->out_w == pd->in_w;
}

/* Images [lo, hi): each one's dx planes, then their share of dw (gw) and db
 * (gb) while the planes are in cache. */
CPU_HOT static void filter_from_bn_slice(const conv2d_desc *cd, const float *x_conv,
                                         const pool2d_desc *pd, const float *x, const float *dy,
                                         const int32_t *argmax, const bn_grad *g,
                                         const bn_mask *m, size_t lo, size_t hi, float *planes,
                                         float *gw, float *gb)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w, ohw = pd->out_h * pd->out_w;
    const size_t in_size = (size_t)cd->in_c * cd->in_h * cd->in_w;
    memset(gw, 0, ((size_t)c * cd->in_c * cd->k * cd->k + c) * sizeof(float));
    for (size_t i = lo; i < hi; i++) {
        for (int ch = 0; ch < c; ch++) {
            const size_t plane = i * c + ch;
            dx_plane(hw, ohw, g[ch], m[ch], x + plane * hw, dy + plane * ohw,
                     argmax + plane * ohw, planes + (size_t)ch * hw);
            gb[ch] += cpu_row_sum((size_t)hw, planes + (size_t)ch * hw);
        }
        conv_thin_filter_image(cd, x_conv + i * in_size, planes, gw);
    }
}

/* Threads split the images, each summing into its own [dw | db] block; the
 * blocks are added in thread order, as conv.c does. */
void cpu_conv2d_backward_filter_bn_relu_maxpool(backend_ctx *ctx, int n, const conv2d_desc *cd,
                                                const float *x_conv, const pool2d_desc *pd,
                                                const float *x, const float *dy,
                                                const int32_t *argmax, const float *gamma,
                                                const float *beta, const float *save_mean,
                                                const float *save_invstd, const float *dgamma,
                                                const float *dbeta, float *dw, float *db)
{
    const int c = pd->c, hw = pd->in_h * pd->in_w;
    const size_t nw = (size_t)c * cd->in_c * cd->k * cd->k, block = (size_t)c * hw + nw + c;
    const int threads = cpu_batch_threads(ctx, n, (size_t)n * c * hw);
    /* Per channel: dx's coefficients and ReLU mask, then the threads' blocks. */
    const size_t head = (size_t)c * (sizeof(bn_grad) + sizeof(bn_mask)) / sizeof(float);
    float *ws = backend_workspace(ctx, head + block * threads);
    if (!ws)
        return;
    bn_grad *g = (bn_grad *)ws;
    bn_mask *m = (bn_mask *)(g + c);
    for (int ch = 0; ch < c; ch++) {
        g[ch] = bn_grad_coeffs(dbeta[ch], dgamma[ch], (double)n * hw, gamma[ch], save_mean[ch],
                               save_invstd[ch]);
        m[ch] = channel_mask(&beta[ch], gamma[ch], save_mean[ch], save_invstd[ch]);
    }
    float *blocks = ws + head;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        size_t lo, hi;
        cpu_slice((size_t)n, &lo, &hi);
        float *mine = blocks + block * omp_get_thread_num();
        filter_from_bn_slice(cd, x_conv, pd, x, dy, argmax, g, m, lo, hi, mine,
                             mine + (size_t)c * hw, mine + (size_t)c * hw + nw);
    }
    cpu_sum_thread_blocks(threads, blocks + (size_t)c * hw, block, nw, dw, (size_t)c, db);
}
#endif

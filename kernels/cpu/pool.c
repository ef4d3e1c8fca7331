/* Max and average pooling over NCHW planes, floor mode as PyTorch.
 * Windows are clipped to the input; with pad < k (PyTorch requires
 * pad <= k/2) every window holds at least one input element. */
#include <string.h>

#include "cpu_ops.h"
#include "cpu_util.h"
#include "maxpool_tiled.h"

void pool2d_desc_init(pool2d_desc *d, int c, int in_h, int in_w, int k, int stride, int pad)
{
    d->c = c;
    d->in_h = in_h;
    d->in_w = in_w;
    d->k = k;
    d->stride = stride;
    d->pad = pad;
    d->out_h = in_h + 2 * pad < k ? 0 : (in_h + 2 * pad - k) / stride + 1;
    d->out_w = in_w + 2 * pad < k ? 0 : (in_w + 2 * pad - k) / stride + 1;
}

/* The window of output o along one axis, clipped to [0, in). */
static void window(int o, int in, int k, int stride, int pad, int *lo, int *hi)
{
    int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > in ? in : start + k;
}

static size_t plane_count(const pool2d_desc *d, int n) { return (size_t)n * d->c; }

/* The general case: windows clipped to the plane, one window at a time. */
static void maxpool_plane(const pool2d_desc *d, const float *xp, float *yp, int32_t *ap)
{
    const int W = d->in_w;
    for (int oh = 0; oh < d->out_h; oh++) {
        int h0, h1;
        window(oh, d->in_h, d->k, d->stride, d->pad, &h0, &h1);
        for (int ow = 0; ow < d->out_w; ow++) {
            int w0, w1;
            window(ow, W, d->k, d->stride, d->pad, &w0, &w1);
            /* Selects, not branches: which element wins is random. */
            int best = h0 * W + w0;
            float best_v = xp[best];
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) {
                    const float v = xp[ih * W + iw];
                    best = v > best_v ? ih * W + iw : best;
                    best_v = v > best_v ? v : best_v;
                }
            yp[oh * d->out_w + ow] = best_v;
            ap[oh * d->out_w + ow] = best;
        }
    }
}

CPU_HOT static void maxpool_plane_tiled_any(int k, int W, int OH, int OW, const float *xp,
                                            float *yp, int32_t *ap)
{
    if (k == 2)
        maxpool_plane_tiled(2, W, OH, OW, xp, 0, 0.0f, 0.0f, yp, ap);
    else if (k == 3)
        maxpool_plane_tiled(3, W, OH, OW, xp, 0, 0.0f, 0.0f, yp, ap);
    else
        maxpool_plane_tiled(k, W, OH, OW, xp, 0, 0.0f, 0.0f, yp, ap);
}

void cpu_maxpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y,
                           int32_t *argmax)
{
    const size_t in_plane = (size_t)d->in_h * d->in_w, out_plane = (size_t)d->out_h * d->out_w;
    const size_t planes = plane_count(d, n);
    const int tiled = d->stride == d->k && d->pad == 0;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if (planes * in_plane >= CPU_PARALLEL_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_plane;
        float *yp = y + pl * out_plane;
        int32_t *ap = argmax + pl * out_plane;
        if (tiled)
            maxpool_plane_tiled_any(d->k, d->in_w, d->out_h, d->out_w, xp, yp, ap);
        else
            maxpool_plane(d, xp, yp, ap);
    }
}

void cpu_maxpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                            const int32_t *argmax, float *dx)
{
    const size_t in_plane = (size_t)d->in_h * d->in_w, out_plane = (size_t)d->out_h * d->out_w;
    const size_t planes = plane_count(d, n);
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if (planes * in_plane >= CPU_PARALLEL_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        memset(dxp, 0, in_plane * sizeof(float));
        for (size_t j = 0; j < out_plane; j++)
            dxp[argmax[pl * out_plane + j]] += dy[pl * out_plane + j];
    }
}

void cpu_avgpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y)
{
    const int H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    /* Floor mode never lets a window pass the padded border, so counting the
     * padding makes every divisor k * k. */
    const float scale = 1.0f / (float)(d->k * d->k);
    const size_t planes = plane_count(d, n);
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if (planes * H * W >= CPU_PARALLEL_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        float *yp = y + pl * OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            int h0, h1;
            window(oh, H, d->k, d->stride, d->pad, &h0, &h1);
            for (int ow = 0; ow < OW; ow++) {
                int w0, w1;
                window(ow, W, d->k, d->stride, d->pad, &w0, &w1);
                float sum = 0.0f;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        sum += xp[ih * W + iw];
                yp[oh * OW + ow] = sum * scale;
            }
        }
    }
}

void cpu_avgpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                            float *dx)
{
    const int H = d->in_h, W = d->in_w, OH = d->out_h, OW = d->out_w;
    const float scale = 1.0f / (float)(d->k * d->k);
    const size_t planes = plane_count(d, n);
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if (planes * H * W >= CPU_PARALLEL_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const float *dyp = dy + pl * OH * OW;
        float *dxp = dx + pl * H * W;
        memset(dxp, 0, (size_t)H * W * sizeof(float));
        for (int oh = 0; oh < OH; oh++) {
            int h0, h1;
            window(oh, H, d->k, d->stride, d->pad, &h0, &h1);
            for (int ow = 0; ow < OW; ow++) {
                int w0, w1;
                window(ow, W, d->k, d->stride, d->pad, &w0, &w1);
                const float g = dyp[oh * OW + ow] * scale;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        dxp[ih * W + iw] += g;
            }
        }
    }
}

/* Batch normalisation over (n, hw) for each of c channels, x[i][ch][j].
 * Channels are independent, so threads split them; sums run in float over a
 * row of hw and in double across rows. */
#include <math.h>

#include "backend.h"
#include "cpu_util.h"

/* Sums of (x - shift) and (x - shift)^2 over a row, in one pass. */
static void row_moments(size_t count, const float *x, float shift, float *s1, float *s2)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (size_t j = 0; j < count; j++) {
        const float dev = x[j] - shift;
        a += dev;
        b += dev * dev;
    }
    *s1 = a;
    *s2 = b;
}

/* y = a x + b over a row; the affine form of every BN output. */
static void row_affine(size_t count, float a, float b, const float *restrict x, float *restrict y)
{
    for (size_t j = 0; j < count; j++)
        y[j] = a * x[j] + b;
}

void batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *running_mean,
                             float *running_var, float momentum, float eps, float *y,
                             float *save_mean, float *save_invstd)
{
    const double count = (double)n * hw;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * hw >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++) {
        /* One pass over x: moments about the channel's first value, which
         * is near the mean, so the variance loses little to cancellation. */
        const float shift = x[(size_t)ch * hw];
        double sum = 0.0, sum_sq = 0.0;
        for (int i = 0; i < n; i++) {
            float s1, s2;
            row_moments(hw, x + ((size_t)i * c + ch) * hw, shift, &s1, &s2);
            sum += s1;
            sum_sq += s2;
        }
        const double mean_dev = sum / count, sq_dev = sum_sq - sum * mean_dev;
        const double sq = sq_dev > 0.0 ? sq_dev : 0.0, var = sq / count;
        const float mean = (float)(shift + mean_dev);
        const float invstd = (float)(1.0 / sqrt(var + eps));
        const float a = gamma[ch] * invstd, b = beta[ch] - a * mean;
        for (int i = 0; i < n; i++)
            row_affine(hw, a, b, x + ((size_t)i * c + ch) * hw, y + ((size_t)i * c + ch) * hw);
        save_mean[ch] = mean;
        save_invstd[ch] = invstd;
        /* PyTorch tracks the unbiased variance (one value: nothing to correct). */
        const double unbiased = count > 1.0 ? sq / (count - 1.0) : var;
        running_mean[ch] = (1.0f - momentum) * running_mean[ch] + momentum * mean;
        running_var[ch] = (1.0f - momentum) * running_var[ch] + momentum * (float)unbiased;
    }
}

void batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float eps, float *y)
{
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * hw >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++) {
        const float a = gamma[ch] / sqrtf(running_var[ch] + eps);
        const float b = beta[ch] - a * running_mean[ch];
        for (int i = 0; i < n; i++)
            row_affine(hw, a, b, x + ((size_t)i * c + ch) * hw, y + ((size_t)i * c + ch) * hw);
    }
}

/* With xhat = (x - mean) invstd and N = n hw:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd (dy - dbeta / N - xhat dgamma / N). */
void batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                        const float *gamma, const float *save_mean, const float *save_invstd,
                        float *dx, float *dgamma, float *dbeta)
{
    const double count = (double)n * hw;
#pragma omp parallel for schedule(static) num_threads(ctx->threads) \
    if ((size_t)n * c * hw >= CPU_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++) {
        const float mean = save_mean[ch], invstd = save_invstd[ch];
        double sum_dy = 0.0, sum_dy_xc = 0.0;
        for (int i = 0; i < n; i++) {
            const float *restrict xr = x + ((size_t)i * c + ch) * hw;
            const float *restrict gr = dy + ((size_t)i * c + ch) * hw;
            float s = 0.0f, sx = 0.0f;
#pragma omp simd reduction(+ : s, sx)
            for (int j = 0; j < hw; j++) {
                s += gr[j];
                sx += gr[j] * (xr[j] - mean);
            }
            sum_dy += s;
            sum_dy_xc += sx;
        }
        const float db = (float)sum_dy, dg = (float)(sum_dy_xc * invstd);
        dbeta[ch] = db;
        dgamma[ch] = dg;
        /* dx = k dy + a x + b, the terms in x and the constants gathered. */
        const float k = gamma[ch] * invstd;
        const float a = -k * dg * invstd / (float)count;
        const float b = -k * db / (float)count - a * mean;
        for (int i = 0; i < n; i++) {
            const float *restrict xr = x + ((size_t)i * c + ch) * hw;
            const float *restrict gr = dy + ((size_t)i * c + ch) * hw;
            float *restrict dr = dx + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++)
                dr[j] = k * gr[j] + a * xr[j] + b;
        }
    }
}

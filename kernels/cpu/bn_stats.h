/* Per-channel pieces of batch normalisation shared by batchnorm.c and the
 * fused BN + ReLU + max pooling of bn_relu_pool.c, so that both compute the
 * same statistics, masks and gradient coefficients. */
#ifndef PARLE_BN_STATS_H
#define PARLE_BN_STATS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Sums of (x - shift) and (x - shift)^2 over a row, in one pass. */
static inline void row_moments(int count, const float *x, float shift, double *s1, double *s2)
{
    float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
    for (int j = 0; j < count; j++) {
        const float dev = x[j] - shift;
        a += dev;
        b += dev * dev;
    }
    *s1 += a;
    *s2 += b;
}

/* dy where the forward's affine output ya x + yb was positive (the ReLU's
 * mask), else 0. Without a ReLU, ya = 0 and yb = 1 keep every dy (of a
 * finite x): one branch-free loop either way. */
typedef struct bn_mask {
    float ya, yb;
} bn_mask;

/* relu_grad_elem(ya x + yb, dy) as a bit mask: GCC branched on the select
 * where the loop stayed scalar. */
static inline float masked(bn_mask m, float x, float dy)
{
    uint32_t bits;
    memcpy(&bits, &dy, sizeof bits);
    bits &= -(uint32_t)(m.ya * x + m.yb > 0.0f);
    memcpy(&dy, &bits, sizeof dy);
    return dy;
}

/* The mask of a fused ReLU with shift beta (NULL: none), from the forward's
 * coefficients recomputed as bn_channel_stats did. */
static inline bn_mask channel_mask(const float *beta, float gamma, float mean, float invstd)
{
    bn_mask m = {0.0f, 1.0f};
    if (beta) {
        m.ya = gamma * invstd;
        m.yb = *beta - m.ya * mean;
    }
    return m;
}

/* Per-channel results of the forward statistics. */
typedef struct bn_affine {
    float mean, invstd, a, b;
} bn_affine;

/* From sums of deviations about `shift` (near the mean, so the variance loses
 * little to cancellation): save mean and 1/std, update the running averages,
 * and return y = a x + b's coefficients. */
static inline bn_affine bn_channel_stats(double sum, double sum_sq, double count, float shift,
                                  float gamma, float beta, float *running_mean,
                                  float *running_var, float momentum, float eps)
{
    const double mean_dev = sum / count, sq_dev = sum_sq - sum * mean_dev;
    const double sq = sq_dev > 0.0 ? sq_dev : 0.0, var = sq / count;
    bn_affine s;
    s.mean = (float)(shift + mean_dev);
    s.invstd = (float)(1.0 / sqrt(var + eps));
    s.a = gamma * s.invstd;
    s.b = beta - s.a * s.mean;
    /* PyTorch tracks the unbiased variance (one value: nothing to correct). */
    const double unbiased = count > 1.0 ? sq / (count - 1.0) : var;
    *running_mean = (1.0f - momentum) * *running_mean + momentum * s.mean;
    *running_var = (1.0f - momentum) * *running_var + momentum * (float)unbiased;
    return s;
}

/* Channel ch's statistics over its n rows x[i][ch][0..hw): saved, the
 * running averages updated, y = a x + b's coefficients returned. */
static inline bn_affine bn_channel_train(int n, int c, int hw, int ch, const float *x,
                                         const float *gamma, const float *beta,
                                         float *running_mean, float *running_var,
                                         float momentum, float eps, float *save_mean,
                                         float *save_invstd)
{
    const float shift = x[(size_t)ch * hw];
    double sum = 0.0, sum_sq = 0.0;
    for (int i = 0; i < n; i++)
        row_moments(hw, x + ((size_t)i * c + ch) * hw, shift, &sum, &sum_sq);
    const bn_affine s = bn_channel_stats(sum, sum_sq, (double)n * hw, shift, gamma[ch], beta[ch],
                                         &running_mean[ch], &running_var[ch], momentum, eps);
    save_mean[ch] = s.mean;
    save_invstd[ch] = s.invstd;
    return s;
}

/* With xhat = (x - mean) invstd and N = n hw:
 *   dbeta = sum dy, dgamma = sum dy xhat,
 *   dx = gamma invstd (dy - dbeta / N - xhat dgamma / N) = k dy + a x + b,
 * the terms in x and the constants gathered. */
typedef struct bn_grad {
    float k, a, b;
} bn_grad;

/* dx's coefficients from dbeta (db) and dgamma (dg) as stored. */
static inline bn_grad bn_grad_coeffs(float db, float dg, double count, float gamma, float mean,
                                     float invstd)
{
    bn_grad g;
    g.k = gamma * invstd;
    g.a = -g.k * dg * invstd / (float)count;
    g.b = -g.k * db / (float)count - g.a * mean;
    return g;
}

/* dgamma and dbeta stored from the sums of dy and dy (x - mean), and dx's
 * coefficients (rounded from the stored floats, so that bn_grad_coeffs
 * gives them again from dgamma and dbeta). */
static inline bn_grad bn_channel_grad(double sum_dy, double sum_dy_xc, double count, float gamma,
                                      float mean, float invstd, float *dgamma, float *dbeta)
{
    *dbeta = (float)sum_dy;
    *dgamma = (float)(sum_dy_xc * invstd);
    return bn_grad_coeffs(*dbeta, *dgamma, count, gamma, mean, invstd);
}

#endif

/* The plan of the split batch norm (kernels/cuda/batchnorm_split.cu, a
 * context's batchnorm_split): each channel's N = n hw values are cut into
 * `parts` chunks, one block each, so that the grid fills a GPU whatever the
 * channel count. A block sums its chunk in fp32 and writes one partial per
 * sum; every block of the channel then merges the channel's partials in
 * double, in part order, so every run and every block gets the same bits.
 * The plan depends on the shape only (not on the device), so a job's bits do
 * not depend on the GPU's size either.
 *
 * Forward sums deviations from a shift, the channel's first value (as the
 * CPU does, kernels/cpu/bn_stats.h): data whose mean is far from 0 keep
 * their variance in fp32 instead of cancelling in sum x^2 - (sum x)^2 / N.
 * Backward sums dy and dy (x - mean), already centred.
 *
 * Host and device functions: the unit tests run the same index maths and
 * replay the kernels' reduction (tests/unit/test_bn_split.c). */
#ifndef PARLE_BN_SPLIT_H
#define PARLE_BN_SPLIT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "hostdevice.h"

/* Threads a block; enough blocks for several per SM of the largest GPUs;
 * at least this many values a block, so small maps keep one block a
 * channel; at most this many parts (the merge loops over them in every
 * thread). */
enum {
    BN_SPLIT_THREADS = 256,
    BN_SPLIT_TARGET_BLOCKS = 1024,
    BN_SPLIT_MIN_PER_BLOCK = 4096,
    BN_SPLIT_MAX_PARTS = 64
};

typedef struct bn_split_plan {
    int parts;      /* blocks a channel, >= 1 */
    size_t chunk;   /* values a block (the last may have fewer, never none) */
    size_t count;   /* N = n hw, values a channel */
} bn_split_plan;

PARLE_HD static inline size_t bn_split_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* The plan for c channels of n hw values (n hw >= 1, c >= 1). */
PARLE_HD static inline bn_split_plan bn_split_plan_for(int n, int c, int hw)
{
    bn_split_plan p;
    p.count = (size_t)n * (size_t)hw;
    size_t parts = bn_split_div_up((size_t)BN_SPLIT_TARGET_BLOCKS, (size_t)c);
    const size_t by_size = bn_split_div_up(p.count, (size_t)BN_SPLIT_MIN_PER_BLOCK);
    parts = parts < by_size ? parts : by_size;
    parts = parts < (size_t)BN_SPLIT_MAX_PARTS ? parts : (size_t)BN_SPLIT_MAX_PARTS;
    parts = parts > 0 ? parts : 1;
    p.chunk = bn_split_div_up(p.count, parts);
    p.parts = (int)bn_split_div_up(p.count, p.chunk); /* no empty last part */
    return p;
}

/* The scratch a launch needs, floats: per channel its shift, then a pair
 * of partial sums per part. */
PARLE_HD static inline size_t bn_split_stride(const bn_split_plan *p) { return 1 + 2 * (size_t)p->parts; }

/* Walking a channel of x[i][ch][j] (c channels of hw) in steps of `step`
 * values with adds only: the step's whole images and remainder are taken
 * apart once, not per value. */
typedef struct bn_walk {
    size_t plane;    /* c hw: image to image */
    size_t jump;     /* (step / hw) images, plus step % hw */
    uint32_t hw, dj; /* dj = step % hw */
} bn_walk;

typedef struct bn_cursor {
    size_t off;      /* (i c + ch) hw + j */
    uint32_t j;
} bn_cursor;

PARLE_HD static inline bn_walk bn_walk_for(int c, int hw, uint32_t step)
{
    bn_walk w;
    w.plane = (size_t)c * (size_t)hw;
    w.hw = (uint32_t)hw;
    w.dj = step % w.hw;
    w.jump = (size_t)(step / w.hw) * w.plane + w.dj;
    return w;
}

/* The offset of value e of channel ch (one division, at a walk's start). */
PARLE_HD static inline bn_cursor bn_cursor_at(const bn_walk *w, int ch, size_t e)
{
    bn_cursor k;
    const size_t i = e / w->hw;
    k.j = (uint32_t)(e - i * w->hw);
    k.off = i * w->plane + (size_t)ch * w->hw + k.j;
    return k;
}

/* The cursor `step` values further on. */
PARLE_HD static inline void bn_cursor_next(bn_cursor *k, const bn_walk *w)
{
    k->j += w->dj;
    k->off += w->jump;
    if (k->j >= w->hw) {
        k->j -= w->hw;
        k->off += w->plane - w->hw;
    }
}

/* A channel's partial pairs (after its shift) merged in part order. */
PARLE_HD static inline void bn_split_merge(const float *pairs, int parts, double *s1, double *s2)
{
    double a = 0.0, b = 0.0;
    for (int p = 0; p < parts; p++) {
        a += pairs[2 * p];
        b += pairs[2 * p + 1];
    }
    *s1 = a;
    *s2 = b;
}

/* y = a x + b: BN's affine form, the same expression forward and backward
 * (a fused ReLU's mask is a x + b > 0 again in backward). */
typedef struct bn_split_affine {
    float a, b;
} bn_split_affine;

PARLE_HD static inline bn_split_affine bn_split_affine_of(float gamma, float beta, float mean,
                                                          float invstd)
{
    bn_split_affine f;
    f.a = gamma * invstd;
    f.b = beta - f.a * mean;
    return f;
}

typedef struct bn_split_stats {
    float mean, invstd;
    double unbiased; /* the running variance's sample: sq / (N - 1), or the variance at N = 1 */
} bn_split_stats;

/* A channel's statistics from its merged sums of (x - shift) and
 * (x - shift)^2, with the CPU's formulas (kernels/cpu/bn_stats.h). */
PARLE_HD static inline bn_split_stats bn_split_forward_stats(double s1, double s2, double count,
                                                             float shift, float eps)
{
    const double mean_dev = s1 / count, sq_dev = s2 - s1 * mean_dev;
    const double sq = sq_dev > 0.0 ? sq_dev : 0.0, var = sq / count;
    bn_split_stats s;
    s.mean = (float)(shift + mean_dev);
    s.invstd = (float)(1.0 / sqrt(var + eps));
    s.unbiased = count > 1.0 ? sq / (count - 1.0) : var;
    return s;
}

/* dx = k dy + a x + b (dy masked by a fused ReLU), dbeta = sum dy and
 * dgamma = invstd sum dy (x - mean) as stored, the CPU's coefficients. */
typedef struct bn_split_grad {
    float dbeta, dgamma, k, a, b;
} bn_split_grad;

PARLE_HD static inline bn_split_grad bn_split_backward_coeffs(double sum_dy, double sum_dy_xc,
                                                              double count, float gamma,
                                                              float mean, float invstd)
{
    bn_split_grad g;
    g.dbeta = (float)sum_dy;
    g.dgamma = (float)(sum_dy_xc * invstd);
    g.k = gamma * invstd;
    g.a = -g.k * g.dgamma * invstd / (float)count;
    g.b = -g.k * g.dbeta / (float)count - g.a * mean;
    return g;
}

#endif

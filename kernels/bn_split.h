/* The plan of the split batch norm (kernels/cuda/batchnorm_split.cu, a
 * context's batchnorm_split): each channel's N = n hw values are cut into
 * `parts` chunks of a multiple of 8 values (the last may be shorter), and
 * every (channel, part) pair is a work item. A grid as large as the GPU
 * holds at once (the occupancy API's blocks a SM times its SMs) loops over
 * the items; a block sums an item's values in fp32 and writes one partial
 * per sum. The partition depends on the shape only, never on the grid or
 * the device, so which block takes an item changes no bit.
 *
 * The order of the sums, which the host replay follows
 * (tests/unit/bn_split_replay.c): thread t of an item takes its groups of 8
 * consecutive values g = t, t + T, t + 2T, ... (T threads a block), each
 * group's values in order, into one fp32 pair (bn_split_acc_*, with fmaf);
 * the threads' pairs go through launch.cuh's block_sum tree; a channel's
 * partial pairs are merged in double by one warp: lane l adds parts l and
 * l + 32, then the lanes are added in a butterfly (bn_split_merge). One
 * thread a block then computes the channel's statistics from the merged
 * sums, once per item.
 *
 * Forward sums deviations from a shift, the channel's first value (as the
 * CPU does, kernels/cpu/bn_stats.h): data whose mean is far from 0 keep
 * their variance in fp32 instead of cancelling in sum x^2 - (sum x)^2 / N.
 * Backward sums dy and dy (x - mean), already centred.
 *
 * Host and device functions: the unit tests check the plan, the grid and
 * the index maths, and replay the reduction (tests/unit/test_bn_split.c). */
#ifndef PARLE_BN_SPLIT_H
#define PARLE_BN_SPLIT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "hostdevice.h"

/* Threads a block; blocks a SM the kernels are built for (__launch_bounds__:
 * at most 64 registers a thread); values a group (16 bytes of bf16, two
 * 16-byte loads of fp32); work items the plan aims at (several per block
 * of a 132-SM GPU, so that the last round of the loop is nearly full); the
 * fewest values an item takes (4 a thread) unless its channel has fewer;
 * the most parts a channel (two a lane of the merging warp). */
enum {
    BN_SPLIT_THREADS = 256,
    BN_SPLIT_MIN_BLOCKS_PER_SM = 4,
    BN_SPLIT_GROUP = 8,
    BN_SPLIT_TARGET_ITEMS = 8192,
    BN_SPLIT_MIN_CHUNK = 1024,
    BN_SPLIT_MAX_PARTS = 64
};

typedef struct bn_split_plan {
    int parts;      /* items a channel, >= 1 */
    size_t chunk;   /* values an item, a multiple of BN_SPLIT_GROUP (the last
                       item of a channel may have fewer, never none) */
    size_t count;   /* N = n hw, values a channel */
    size_t items;   /* c parts */
} bn_split_plan;

PARLE_HD static inline size_t bn_split_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* The plan for c channels of n hw values (n hw >= 1, c >= 1). */
PARLE_HD static inline bn_split_plan bn_split_plan_for(int n, int c, int hw)
{
    bn_split_plan p;
    p.count = (size_t)n * (size_t)hw;
    size_t parts = bn_split_div_up((size_t)BN_SPLIT_TARGET_ITEMS, (size_t)c);
    const size_t by_size = p.count / (size_t)BN_SPLIT_MIN_CHUNK;
    parts = parts < by_size ? parts : by_size;
    parts = parts < (size_t)BN_SPLIT_MAX_PARTS ? parts : (size_t)BN_SPLIT_MAX_PARTS;
    parts = parts > 0 ? parts : 1;
    const size_t g = BN_SPLIT_GROUP;
    p.chunk = bn_split_div_up(bn_split_div_up(p.count, parts), g) * g;
    p.parts = (int)bn_split_div_up(p.count, p.chunk); /* no empty last part */
    p.items = (size_t)c * (size_t)p.parts;
    return p;
}

/* The scratch a launch needs, floats: per channel its shift, then a pair
 * of partial sums per part. */
PARLE_HD static inline size_t bn_split_stride(const bn_split_plan *p) { return 1 + 2 * (size_t)p->parts; }

/* The blocks of a launch: as many as the GPU holds at once (blocks_per_sm,
 * the occupancy API's answer for the kernel, times the SMs), fewer where
 * there are fewer items; at least 1. */
PARLE_HD static inline unsigned bn_split_grid(size_t items, int blocks_per_sm, int sms)
{
    const size_t full = (size_t)(blocks_per_sm > 0 ? blocks_per_sm : 1) * (size_t)(sms > 0 ? sms : 1);
    const size_t g = items < full ? items : full;
    return (unsigned)(g > 0 ? g : 1);
}

/* How full the last round of a grid's loop is on average: items over the
 * rounds the busiest block takes times the grid (1: every block busy to
 * the end). */
PARLE_HD static inline double bn_split_balance(size_t items, unsigned grid)
{
    return (double)items / ((double)grid * (double)bn_split_div_up(items, grid));
}

/* Block b's k-th item: b + k grid, counted from the last item when
 * `reverse` (the apply kernels: the items the moments kernel read last are
 * still in L2). */
PARLE_HD static inline size_t bn_split_item_index(size_t items, size_t i, int reverse)
{
    return reverse ? items - 1 - i : i;
}

/* An item: its channel, part and values [begin, end) of the channel. */
typedef struct bn_split_item {
    int ch, part;
    size_t begin, end;
} bn_split_item;

PARLE_HD static inline bn_split_item bn_split_item_of(const bn_split_plan *p, size_t item)
{
    bn_split_item k;
    k.ch = (int)(item / (size_t)p->parts);
    k.part = (int)(item - (size_t)k.ch * (size_t)p->parts);
    k.begin = (size_t)k.part * p->chunk;
    k.end = k.begin + p->chunk < p->count ? k.begin + p->chunk : p->count;
    return k;
}

/* Whether a launch may load 8 values as 16 bytes: every group lies in one
 * image's row of the channel (hw a multiple of 8) and starts 16-byte
 * aligned (the pointers are, every element offset of a group a multiple of
 * 8). */
PARLE_HD static inline int bn_split_vectorised(int hw, uintptr_t ptr_bits)
{
    return hw % BN_SPLIT_GROUP == 0 && (ptr_bits & 15u) == 0;
}

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

/* One value into a thread's pair: forward its deviation from the shift
 * and the square; backward dy (already masked) and dy (x - mean). fmaf on
 * both sides, so that the host replay gets the kernels' bits. */
PARLE_HD static inline void bn_split_acc_fwd(float x, float shift, float *s1, float *s2)
{
    const float d = x - shift;
    *s1 += d;
    *s2 = fmaf(d, d, *s2);
}

PARLE_HD static inline void bn_split_acc_bwd(float x, float g, float mean, float *s1, float *s2)
{
    *s1 += g;
    *s2 = fmaf(g, x - mean, *s2);
}

/* Lane `lane`'s share of a channel's partial pairs (after its shift), in
 * double: parts lane and lane + 32. */
PARLE_HD static inline void bn_split_lane_sums(const float *pairs, int parts, int lane, double *s1,
                                               double *s2)
{
    double a = 0.0, b = 0.0;
    for (int p = lane; p < parts; p += 32) {
        a += pairs[2 * p];
        b += pairs[2 * p + 1];
    }
    *s1 = a;
    *s2 = b;
}

/* The merge of a channel's partial pairs on the host, in the kernels'
 * order: the 32 lanes' shares, then lane l adds lane l ^ off for off = 16,
 * 8, 4, 2, 1 (the warp's butterfly, __shfl_xor_sync); lane 0's. */
static inline void bn_split_merge(const float *pairs, int parts, double *s1, double *s2)
{
    double a[32], b[32], na[32], nb[32];
    for (int l = 0; l < 32; l++)
        bn_split_lane_sums(pairs, parts, l, &a[l], &b[l]);
    for (int off = 16; off > 0; off /= 2) {
        for (int l = 0; l < 32; l++) {
            na[l] = a[l] + a[l ^ off];
            nb[l] = b[l] + b[l ^ off];
        }
        for (int l = 0; l < 32; l++) {
            a[l] = na[l];
            b[l] = nb[l];
        }
    }
    *s1 = a[0];
    *s2 = b[0];
}

/* y = a x + b: BN's affine form, the same expression forward and backward
 * (a fused ReLU's mask is fmaf(a, x, b) > 0 again in backward). */
typedef struct bn_split_affine {
    float a, b;
} bn_split_affine;

PARLE_HD static inline bn_split_affine bn_split_affine_of(float gamma, float beta, float mean,
                                                          float invstd)
{
    bn_split_affine f;
    f.a = gamma * invstd;
    f.b = fmaf(-f.a, mean, beta);
    return f;
}

/* dy where a fused ReLU let the value through, else 0. */
PARLE_HD static inline float bn_split_mask(const bn_split_affine *f, int relu, float x, float dy)
{
    return relu && !(fmaf(f->a, x, f->b) > 0.0f) ? 0.0f : dy;
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
    const double mean_dev = s1 / count, sq_dev = fma(-s1, mean_dev, s2);
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
    g.b = fmaf(-g.a, mean, -g.k * g.dbeta / (float)count);
    return g;
}

#endif

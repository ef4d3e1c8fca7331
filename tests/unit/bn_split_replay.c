/* The split batch norm's reduction replayed on the host (bn_split_replay.h). */
#include "bn_split_replay.h"

#include <stdlib.h>
#include <string.h>

/* block_sum's order for one warp: every lane adds the lane `off` above it
 * (its own value past the warp's end), off = 16, 8, 4, 2, 1; lane 0's. */
static float warp_sum(const float *v, int lanes)
{
    float a[32], b[32];
    for (int l = 0; l < 32; l++)
        a[l] = l < lanes ? v[l] : 0.0f;
    for (int off = 16; off > 0; off /= 2) {
        for (int l = 0; l < 32; l++)
            b[l] = a[l] + (l + off < 32 ? a[l + off] : a[l]);
        memcpy(a, b, sizeof a);
    }
    return a[0];
}

/* block_sum over `threads` (a multiple of 32) values, thread 0's result. */
static float block_sum_replay(const float *v, int threads)
{
    float warps[32];
    for (int w = 0; w < threads / 32; w++)
        warps[w] = warp_sum(v + 32 * w, 32);
    return warp_sum(warps, threads / 32);
}

/* Thread t's pair over its groups of item [begin, end): groups t, t + T,
 * ..., each group's values in order. */
static void thread_pair(const bn_replay_in *in, int ch, size_t begin, size_t end, int t,
                        float *s1, float *s2)
{
    const uint32_t step = BN_SPLIT_GROUP * BN_SPLIT_THREADS;
    const bn_walk wg = bn_walk_for(in->c, in->hw, step), w1 = bn_walk_for(in->c, in->hw, 1);
    float a = 0.0f, b = 0.0f;
    const size_t first = begin + (size_t)BN_SPLIT_GROUP * (size_t)t;
    bn_cursor at = bn_cursor_at(&wg, ch, first);
    for (size_t e = first; e < end; e += step, bn_cursor_next(&at, &wg)) {
        const size_t stop = e + BN_SPLIT_GROUP < end ? e + BN_SPLIT_GROUP : end;
        bn_cursor v = at;
        for (size_t q = e; q < stop; q++, bn_cursor_next(&v, &w1)) {
            const float xv = in->x[v.off];
            if (!in->dy)
                bn_split_acc_fwd(xv, in->shift, &a, &b);
            else
                bn_split_acc_bwd(xv, bn_split_mask(&in->f, in->relu, xv, in->dy[v.off]), in->mean,
                                 &a, &b);
        }
    }
    *s1 = a;
    *s2 = b;
}

void bn_replay_channel(const bn_replay_in *in, int ch, double *s1, double *s2)
{
    const bn_split_plan plan = bn_split_plan_for(in->n, in->c, in->hw);
    float pairs[2 * BN_SPLIT_MAX_PARTS];
    float t1[BN_SPLIT_THREADS], t2[BN_SPLIT_THREADS];
    for (int p = 0; p < plan.parts; p++) {
        const bn_split_item k = bn_split_item_of(&plan, (size_t)ch * plan.parts + p);
        for (int t = 0; t < BN_SPLIT_THREADS; t++)
            thread_pair(in, ch, k.begin, k.end, t, &t1[t], &t2[t]);
        pairs[2 * p] = block_sum_replay(t1, BN_SPLIT_THREADS);
        pairs[2 * p + 1] = block_sum_replay(t2, BN_SPLIT_THREADS);
    }
    bn_split_merge(pairs, plan.parts, s1, s2);
}

void bn_replay_forward(const float *x, int n, int c, int hw, float eps, float *mean,
                       float *invstd)
{
    const double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        const bn_replay_in in = {.x = x, .n = n, .c = c, .hw = hw, .shift = x[(size_t)ch * hw]};
        double s1, s2;
        bn_replay_channel(&in, ch, &s1, &s2);
        const bn_split_stats s = bn_split_forward_stats(s1, s2, count, in.shift, eps);
        mean[ch] = s.mean;
        invstd[ch] = s.invstd;
    }
}

void bn_replay_backward(const float *x, const float *dy, int n, int c, int hw, const float *gamma,
                        const float *beta, const float *mean, const float *invstd, int relu,
                        bn_split_grad *grad)
{
    const double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        const bn_replay_in in = {
            .x = x, .dy = dy, .n = n, .c = c, .hw = hw, .mean = mean[ch], .relu = relu,
            .f = bn_split_affine_of(gamma[ch], relu ? beta[ch] : 0.0f, mean[ch], invstd[ch])};
        double s1, s2;
        bn_replay_channel(&in, ch, &s1, &s2);
        grad[ch] = bn_split_backward_coeffs(s1, s2, count, gamma[ch], mean[ch], invstd[ch]);
    }
}

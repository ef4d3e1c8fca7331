/* The split batch norm's plan and index maths (kernels/bn_split.h), and a
 * host replay of its kernels' reduction (kernels/cuda/batchnorm_split.cu):
 * the same blocks, the same per-thread fp32 sums in the same order, the
 * block sums in launch.cuh's block_sum tree order, the partials merged in
 * part order with the header's own functions. Checked against float64 on
 * fresh random inputs whose mean is far from 0 (where sum x^2 - (sum x)^2 / N
 * in fp32 cancels: the replay without the shift must fail), forward
 * statistics and backward sums, with and without a fused ReLU. What the GPU
 * itself gives is tests/gpu/test_gpu_bn_split.c's. */
#include <stdlib.h>
#include <string.h>

#include "bn_split.h"
#include "testutil.h"

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

/* What the kernels sum per value: forward the deviation from the shift (and
 * its square), backward dy masked by a fused ReLU (and dy (x - mean)). */
typedef struct replay_in {
    const float *x, *dy; /* dy NULL: forward */
    int n, c, hw;
    float shift;         /* forward */
    float mean;          /* backward */
    int relu;
    bn_split_affine f;   /* backward with relu: the forward's a, b */
} replay_in;

/* A channel's partial pairs as the moments kernels write them, merged. */
static void replay_channel(const replay_in *in, int ch, double *s1, double *s2)
{
    const bn_split_plan plan = bn_split_plan_for(in->n, in->c, in->hw);
    const bn_walk w = bn_walk_for(in->c, in->hw, BN_SPLIT_THREADS);
    float *pairs = malloc(2 * (size_t)plan.parts * sizeof(float));
    float t1[BN_SPLIT_THREADS], t2[BN_SPLIT_THREADS];
    for (int p = 0; p < plan.parts; p++) {
        const size_t begin = (size_t)p * plan.chunk;
        const size_t end = begin + plan.chunk < plan.count ? begin + plan.chunk : plan.count;
        for (int t = 0; t < BN_SPLIT_THREADS; t++) {
            float a = 0.0f, b = 0.0f;
            bn_cursor at = bn_cursor_at(&w, ch, begin + (size_t)t);
            for (size_t e = begin + (size_t)t; e < end; e += BN_SPLIT_THREADS) {
                const float xv = in->x[at.off];
                if (!in->dy) {
                    const float d = xv - in->shift;
                    a += d;
                    b += d * d;
                } else {
                    float g = in->dy[at.off];
                    if (in->relu && !(in->f.a * xv + in->f.b > 0.0f))
                        g = 0.0f;
                    a += g;
                    b += g * (xv - in->mean);
                }
                bn_cursor_next(&at, &w);
            }
            t1[t] = a;
            t2[t] = b;
        }
        pairs[2 * p] = block_sum_replay(t1, BN_SPLIT_THREADS);
        pairs[2 * p + 1] = block_sum_replay(t2, BN_SPLIT_THREADS);
    }
    bn_split_merge(pairs, plan.parts, s1, s2);
    free(pairs);
}

static void check_plan(int n, int c, int hw)
{
    const bn_split_plan p = bn_split_plan_for(n, c, hw);
    CHECK(p.count == (size_t)n * hw && p.parts >= 1 && p.parts <= BN_SPLIT_MAX_PARTS &&
              p.chunk * (size_t)(p.parts - 1) < p.count && p.chunk * (size_t)p.parts >= p.count,
          "plan n=%d c=%d hw=%d: parts %d chunk %zu count %zu", n, c, hw, p.parts, p.chunk,
          p.count);
    /* Enough blocks to fill a GPU where the values allow it, and no block
     * below the minimum unless the channel is. */
    CHECK((size_t)p.parts * c >= BN_SPLIT_TARGET_BLOCKS || p.parts == BN_SPLIT_MAX_PARTS ||
              p.chunk >= BN_SPLIT_MIN_PER_BLOCK / 2 || p.parts == 1,
          "plan n=%d c=%d hw=%d: %d parts of %zu", n, c, hw, p.parts, p.chunk);
}

/* The cursor walked from a start in steps against the offset by division. */
static void check_walk(int c, int hw, uint32_t step)
{
    const size_t count = (size_t)7 * hw + 5;
    for (int trial = 0; trial < 20; trial++) {
        const int ch = (int)test_uniform(0, c);
        size_t e = (size_t)test_uniform(0, (double)count);
        const bn_walk w = bn_walk_for(c, hw, step);
        bn_cursor at = bn_cursor_at(&w, ch, e);
        int bad = 0;
        for (; e < 40 * (size_t)hw + 3 * step; e += step, bn_cursor_next(&at, &w)) {
            const size_t want = (e / hw * c + ch) * hw + e % hw;
            bad += at.off != want || at.j != e % hw;
        }
        CHECK(bad == 0, "walk c=%d hw=%d step %u ch %d: %d offsets wrong", c, hw, step, ch, bad);
    }
}

typedef struct reference {
    double mean, var;
} reference;

static reference channel_reference(const float *x, int n, int c, int hw, int ch)
{
    double s = 0.0, sq = 0.0;
    const double count = (double)n * hw;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < hw; j++)
            s += x[((size_t)i * c + ch) * hw + j];
    const double mean = s / count;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < hw; j++) {
            const double d = x[((size_t)i * c + ch) * hw + j] - mean;
            sq += d * d;
        }
    return (reference){mean, sq / count};
}

/* Forward statistics and backward sums of a shape, data offset by `offset`
 * with spread 1; without the shift when `unshifted` (a check that fails). */
static void check_replay(int n, int c, int hw, double offset, int unshifted)
{
    const size_t total = (size_t)n * c * hw;
    float *x = malloc(total * sizeof(float)), *dy = malloc(total * sizeof(float));
    test_fill_uniform(x, total, offset - 1.7, offset + 1.7);
    test_fill_uniform(dy, total, -1, 1);
    const double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        const reference r = channel_reference(x, n, c, hw, ch);
        replay_in in = {.x = x, .n = n, .c = c, .hw = hw,
                        .shift = unshifted ? 0.0f : x[(size_t)ch * hw]};
        double s1, s2;
        replay_channel(&in, ch, &s1, &s2);
        const float eps = 1e-5f;
        const bn_split_stats s = bn_split_forward_stats(s1, s2, count, in.shift, eps);
        char what[128];
        snprintf(what, sizeof what, "n=%d c=%d hw=%d offset %g ch %d mean", n, c, hw, offset, ch);
        CHECK_CLOSE(s.mean, r.mean, 1e-6, 1e-6, what);
        snprintf(what, sizeof what, "n=%d c=%d hw=%d offset %g ch %d invstd", n, c, hw, offset,
                 ch);
        CHECK_CLOSE(s.invstd, 1.0 / sqrt(r.var + eps), 0, 1e-5, what);
        if (unshifted)
            continue;
        /* Backward at the float statistics, as the kernels take them. */
        for (int relu = 0; relu < 2; relu++) {
            const float gamma = (float)test_uniform(0.5, 1.5), beta = (float)test_uniform(-1, 1);
            in.dy = dy;
            in.mean = s.mean;
            in.relu = relu;
            in.f = bn_split_affine_of(gamma, beta, s.mean, s.invstd);
            replay_channel(&in, ch, &s1, &s2);
            double g1 = 0.0, g2 = 0.0, mag = 0.0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < hw; j++) {
                    const size_t at = ((size_t)i * c + ch) * hw + j;
                    /* The mask is the kernels' float expression; the sums are checked. */
                    const double g = relu && !(in.f.a * x[at] + in.f.b > 0.0f) ? 0.0 : dy[at];
                    g1 += g;
                    g2 += g * ((double)x[at] - s.mean);
                    mag += fabs(g);
                }
            snprintf(what, sizeof what, "n=%d c=%d hw=%d ch %d relu %d sum dy", n, c, hw, ch,
                     relu);
            CHECK_CLOSE(s1, g1, 1e-6 * mag, 0, what);
            snprintf(what, sizeof what, "n=%d c=%d hw=%d ch %d relu %d sum dy (x - mean)", n, c,
                     hw, ch, relu);
            CHECK_CLOSE(s2, g2, 1e-6 * mag * 4, 0, what);
            const bn_split_grad g = bn_split_backward_coeffs(s1, s2, count, gamma, s.mean,
                                                             s.invstd);
            CHECK(g.dbeta == (float)s1 && g.dgamma == (float)(s2 * s.invstd),
                  "coefficients from the stored sums");
        }
    }
    free(x);
    free(dy);
}

int main(void)
{
    test_init("bn_split");
    const int shapes[][3] = {{128, 160, 1024}, {128, 640, 64}, {128, 16, 1024}, {4096, 10, 1},
                             {1, 1, 1}, {3, 7, 49}, {2, 100000, 1}, {4096, 1, 50176}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_plan(shapes[i][0], shapes[i][1], shapes[i][2]);
    const uint32_t steps[] = {BN_SPLIT_THREADS, 1, 32, 1000};
    const int walks[][2] = {{3, 1}, {5, 7}, {16, 64}, {2, 1024}, {1, 300}};
    for (size_t i = 0; i < sizeof walks / sizeof walks[0]; i++)
        for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++)
            check_walk(walks[i][0], walks[i][1], steps[s]);
    /* Several parts a channel with hw dividing the chunk, not dividing it,
     * and 1 (after a linear layer); one part; data near 0 and far from it. */
    check_replay(64, 2, 1024, 1000.0, 0);
    check_replay(50, 3, 49, 300.0, 0);
    check_replay(9000, 2, 1, -500.0, 0);
    check_replay(4, 3, 30, 0.0, 0);
    /* The same sums without the shift lose the variance to cancellation. */
    printf("the unshifted replay follows; its failures are expected:\n");
    fflush(stdout);
    const int before = test_failures;
    check_replay(64, 1, 1024, 1000.0, 1);
    CHECK(test_forget_failures(before), "the unshifted replay kept its variance: the check "
                                        "cannot see cancellation");
    return test_main_end();
}

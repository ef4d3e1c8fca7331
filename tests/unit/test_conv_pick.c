/* Which cuDNN algorithm a convolution takes (kernels/cuda/conv_pick.c), on
 * made-up candidate lists: the order of preference, the workspace limit and
 * its fallback, determinism and fp32's plain FMA math, and none at all. */
#include <stdlib.h>

#include "cuda/conv_pick.h"
#include "testutil.h"

enum { MiB = 1 << 20 };

/* runs, memory in MiB, deterministic, fma */
#define OFFER(a, r, mib, det, fma) {(a), (r), (size_t)(mib) * MiB, (det), (fma)}

static void test_preference_and_limit(void)
{
    const algo_offer offers[] = {
        OFFER(7, 0, 1, 1, 1),    /* cuDNN cannot run it */
        OFFER(5, 1, 900, 1, 1),  /* over the limit */
        OFFER(3, 1, 40, 1, 1),   /* the first that fits */
        OFFER(1, 1, 0, 1, 1),
    };
    const size_t limit = CONV_WORKSPACE_MAX;
    CHECK(conv_pick(offers, 4, 0, 0, limit) == 2, "the first that runs and fits");
    CHECK(conv_pick(offers, 4, 0, 0, 2000 * (size_t)MiB) == 1, "a larger limit takes the best");
    CHECK(conv_pick(offers, 0, 0, 0, limit) == -1, "no candidates");
}

/* Every algorithm wants more than the limit: the leanest runs anyway. */
static void test_workspace_fallback(void)
{
    const algo_offer offers[] = {
        OFFER(0, 1, 2048, 1, 1),
        OFFER(1, 1, 700, 1, 1),
        OFFER(2, 0, 600, 1, 1),  /* leaner, but cuDNN cannot run it */
        OFFER(4, 1, 1024, 1, 1),
    };
    CHECK(conv_pick(offers, 4, 0, 0, CONV_WORKSPACE_MAX) == 1, "the leanest that runs");
    CHECK(conv_pick(offers, 4, 0, 0, 0) == 1, "a zero limit: the leanest");
}

static void test_determinism_and_math(void)
{
    const algo_offer offers[] = {
        OFFER(0, 1, 10, 0, 1),  /* fastest, non-deterministic */
        OFFER(1, 1, 10, 1, 0),  /* deterministic, TF32 or reduced math */
        OFFER(2, 1, 10, 1, 1),
    };
    CHECK(conv_pick(offers, 3, 0, 0, CONV_WORKSPACE_MAX) == 0, "no constraint: the first");
    CHECK(conv_pick(offers, 3, 1, 0, CONV_WORKSPACE_MAX) == 1, "deterministic: skips 0");
    CHECK(conv_pick(offers, 3, 0, 1, CONV_WORKSPACE_MAX) == 0, "fp32: 0 is FMA");
    CHECK(conv_pick(offers, 3, 1, 1, CONV_WORKSPACE_MAX) == 2, "deterministic fp32: only 2");
}

/* No deterministic algorithm for the shape (a bf16 backward-filter may
 * have none): none is taken, and the job fails at its first step with the
 * shape named, rather than running non-deterministically. Also when a
 * non-deterministic one would fit the limit. */
static void test_none_deterministic(void)
{
    const algo_offer offers[] = {
        OFFER(0, 1, 1, 0, 1),
        OFFER(1, 1, 4096, 0, 1),
        OFFER(2, 0, 1, 1, 1),
    };
    CHECK(conv_pick(offers, 3, 1, 0, CONV_WORKSPACE_MAX) == -1, "no deterministic algorithm");
    CHECK(conv_pick(offers, 3, 0, 0, CONV_WORKSPACE_MAX) == 0, "non-deterministic allowed");
}

int main(void)
{
    test_init("conv_pick");
    test_preference_and_limit();
    test_workspace_fallback();
    test_determinism_and_math();
    test_none_deterministic();
    return test_main_end();
}

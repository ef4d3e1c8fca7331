#include "testutil.h"

#include <stdlib.h>
#include <time.h>

int test_checks, test_failures;
static uint64_t rng_state, rng_seed;
static const char *test_name;

void test_init(const char *name)
{
    const char *env = getenv("PARLE_TEST_SEED");
    rng_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    rng_state = rng_seed ? rng_seed : 1;
    test_name = name;
    printf("%s: PARLE_TEST_SEED=%llu\n", name, (unsigned long long)rng_seed);
}

uint64_t test_seed(void) { return rng_seed; }

/* xorshift64*: test inputs only; the product uses Philox. */
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

double test_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

void test_fill_uniform(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_uniform(lo, hi);
}

int test_main_end(void)
{
    printf("%s: %d checks, %d failed\n", test_name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

/* A minimal test harness: CHECK records a failure and goes on; test_main_end
 * prints "N checks, M failed" and returns the exit status. Random inputs are
 * fresh each run (seed from PARLE_TEST_SEED or the clock, printed first) so a
 * failure can be replayed. */
#ifndef PARLE_TESTUTIL_H
#define PARLE_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

extern int test_checks, test_failures;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        test_checks++;                                                              \
        if (!(cond)) {                                                              \
            test_failures++;                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* |a - b| <= atol + rtol |b| */
#define CHECK_CLOSE(a, b, atol, rtol, what)                                          \
    CHECK(fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)),    \
          "%s: got %.9g want %.9g", (what), (double)(a), (double)(b))

/* Seeds the generator and prints the seed. */
void test_init(const char *name);
int test_main_end(void);

/* Uniform in [lo, hi) from the test generator. */
double test_uniform(double lo, double hi);
void test_fill_uniform(float *x, size_t n, double lo, double hi);
uint64_t test_seed(void);

/* For checks that must fail: forgets the failures since `before` (a value
 * of test_failures) and returns whether there were any. */
int test_forget_failures(int before);

#endif

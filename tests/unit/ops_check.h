/* The CPU layer ops against plain float64 references written in the tests
 * (test_ops.c; batch normalisation and its fusions in test_ops_bn.c).
 *
 * Forward outputs are compared with the reference on the same (float) inputs.
 * Backward outputs are compared with central differences of the scalar loss
 * sum(y * r), r random, taken through the float64 reference (for convolutions,
 * with the float64 adjoint of the reference, itself checked against central
 * differences on the small cases: at oneDNN's sizes those would take hours).
 * Tolerances, |got - want| <= atol + rtol |want|, elementwise:
 *   forward: 1e-4 + 1e-4 |want| (float rounding of sums of <= 500 terms of
 *            size <= 1 stays near 1e-5; any indexing slip is off by ~0.1);
 *   backward: 2e-4 + 2e-4 |want| (step 1e-4: truncation error ~1e-8 for the
 *            smooth ops, exact for the linear ones; the rest is float rounding);
 *   threads 1 vs 2, one chunk vs several: 1e-5 + 1e-5 |want| (the im2col
 *            path gives the same bits; oneDNN's convolutions split their
 *            sums by thread count, so there this is a rounding tolerance). */
#ifndef PARLE_OPS_CHECK_H
#define PARLE_OPS_CHECK_H

#include <stddef.h>

#define FWD_ATOL 1e-4
#define FWD_RTOL 1e-4
#define BWD_ATOL 2e-4
#define BWD_RTOL 2e-4
#define SAME_TOL 1e-5
#define FD_STEP 1e-4

/* n floats uniform in [lo, hi) (at least one allocated). */
float *new_floats(size_t n, double lo, double hi);
/* x as doubles (zeros where x is NULL). */
double *to_double(const float *x, size_t n);
double dot(const double *a, const double *b, size_t n);
/* One CHECK per array: how many elements are off, and the worst one. */
void check_array(const char *what, const float *got, const double *want, size_t n, double atol,
                 double rtol);
/* got against want within SAME_TOL (threads 1 vs 2, one chunk vs several). */
void check_same(const char *what, const float *got, const float *want, size_t n);

/* Central differences of loss() with respect to each element of p. */
typedef double (*loss_fn)(void *arg);
void numeric_grad(loss_fn loss, void *arg, double *p, size_t n, double *grad);
/* A float64 reference gradient against central differences: equal up to
 * the rounding of the differences (the losses checked so are linear in p). */
void check_ref_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n,
                    const double *grad);
/* A backend gradient against the numeric one for parameter p. */
void check_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n, const float *got);
/* Distinct values in [-1, 1), at least 2/n apart, in random order: max
 * pooling then has no near ties for a finite difference to cross. */
void fill_distinct(float *x, size_t n);

#endif

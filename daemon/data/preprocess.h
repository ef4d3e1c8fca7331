/* Input normalisation, fitted on the training set and applied to both sets:
 * per-channel mean/std, or the Parle paper's CIFAR preprocessing (per-image
 * normalisation, then ZCA whitening). */
#ifndef PARLE_PREPROCESS_H
#define PARLE_PREPROCESS_H

#include <stddef.h>
#include "dataset.h"

#define ZCA_EPS 1e-5          /* added to every eigenvalue before 1/sqrt */
#define PER_IMAGE_STD_FLOOR 1e-8 /* a flat image is centred, not blown up */

/* Each channel: subtract the training set's mean, divide by its std (both over
 * all images and pixels of that channel). test may be NULL. */
void preprocess_channels(dataset *train, dataset *test);

/* Each image: subtract the mean of its c*h*w values, divide by their std
 * (population std, at least PER_IMAGE_STD_FLOOR). */
void preprocess_per_image(dataset *d);

/* ZCA whitening of n row vectors x (n x dim, row-major):
 * mean[dim] = the mean row, W[dim x dim] = U diag(1/sqrt(lambda + eps)) U^T
 * from the eigendecomposition C = U diag(lambda) U^T of the covariance
 * C = (1/n) sum_i (x_i - mean)(x_i - mean)^T. `threads` >= 1 for the GEMMs.
 * `stop` as the loaders' (dataset.h): looked at between blocks of rows. */
int zca_fit(const float *x, int n, int dim, double eps, int threads, float *mean, float *W,
            const volatile int *stop, char *err, size_t errlen);
/* x_i := W (x_i - mean) for each of the n rows, in place (a stop leaves
 * some rows whitened: the caller drops x). */
int zca_apply(float *x, int n, int dim, const float *mean, const float *W, int threads,
              const volatile int *stop, char *err, size_t errlen);

/* The paper's: preprocess_per_image on both sets, then ZCA (eps = ZCA_EPS)
 * fitted on train and applied to both. test may be NULL. */
int preprocess_zca(dataset *train, dataset *test, int threads, const volatile int *stop,
                   char *err, size_t errlen);

/* Eigendecomposition of the symmetric n x n matrix a (row-major, double;
 * overwritten): values[i] are the eigenvalues (unsorted) and row i of
 * `vectors` (n x n) is the unit eigenvector of values[i]. Householder
 * tridiagonalisation, then implicit-shift QL. -1 if an eigenvalue fails to
 * converge, -2 if out of memory, -3 if `stop` (dataset.h; NULL: none) was
 * set, looked at every row of each stage. OpenMP threads as the caller's
 * setting. */
int symmetric_eigen(double *a, int n, double *values, double *vectors, const volatile int *stop);

#endif

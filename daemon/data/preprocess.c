/* Normalisation and ZCA whitening. The whitening matrix needs the full
 * eigendecomposition of a dim x dim covariance (3072 for CIFAR): Householder
 * tridiagonalisation and implicit-shift QL, in double, written out here so
 * that the core needs no LAPACK. */
#include "preprocess.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define ZCA_CHUNK 1024 /* rows centred / whitened per GEMM */
#define QL_MAX_ITER 60 /* per eigenvalue; a few are typical */

void preprocess_channels(dataset *train, dataset *test)
{
    size_t plane = (size_t)train->h * train->w;
    dataset *sets[2] = {train, test};
    for (int c = 0; c < train->c; c++) {
        double sum = 0, sq = 0, count = (double)train->n * (double)plane;
        for (int i = 0; i < train->n; i++) {
            const float *p = train->images + ((size_t)i * train->c + c) * plane;
            for (size_t j = 0; j < plane; j++)
                sum += p[j];
        }
        double mean = sum / count;
        for (int i = 0; i < train->n; i++) {
            const float *p = train->images + ((size_t)i * train->c + c) * plane;
            for (size_t j = 0; j < plane; j++)
                sq += (p[j] - mean) * (p[j] - mean);
        }
        double std = sqrt(sq / count);
        float inv = (float)(1.0 / (std > 1e-6 ? std : 1e-6)), m = (float)mean;
        for (int s = 0; s < 2; s++) {
            if (!sets[s])
                continue;
            for (int i = 0; i < sets[s]->n; i++) {
                float *p = sets[s]->images + ((size_t)i * sets[s]->c + c) * plane;
                for (size_t j = 0; j < plane; j++)
                    p[j] = (p[j] - m) * inv;
            }
        }
    }
}

void preprocess_per_image(dataset *d)
{
    size_t ex = dataset_example_size(d);
    for (int i = 0; i < d->n; i++) {
        float *p = d->images + (size_t)i * ex;
        double sum = 0, sq = 0;
        for (size_t j = 0; j < ex; j++)
            sum += p[j];
        double mean = sum / (double)ex;
        for (size_t j = 0; j < ex; j++)
            sq += (p[j] - mean) * (p[j] - mean);
        double std = sqrt(sq / (double)ex);
        if (std < PER_IMAGE_STD_FLOOR)
            std = PER_IMAGE_STD_FLOOR;
        for (size_t j = 0; j < ex; j++)
            p[j] = (float)((p[j] - mean) / std);
    }
}

/* ---- symmetric eigendecomposition ---- */

/* Householder reduction of the symmetric a to tridiagonal form T = Q^T a Q:
 * diagonal d, off-diagonal e (e[i] couples i and i+1). Step k reflects row
 * and column k's part below the diagonal onto its first entry, with
 * H = I - 2 v v^T acting on indices k+1..n-1; v is kept in row k of a. */
static void householder_reduce(double *a, int n, double *d, double *e, double *w)
{
    for (int k = 0; k + 2 < n; k++) {
        int m = n - k - 1;
        double *v = a + (size_t)k * n + k + 1;
        double sigma2 = 0;
        for (int i = 0; i < m; i++)
            sigma2 += v[i] * v[i];
        d[k] = a[(size_t)k * n + k];
        if (sigma2 == 0) { /* already reduced: H = I */
            e[k] = 0;
            continue;
        }
        double sigma = sqrt(sigma2), alpha = v[0] > 0 ? -sigma : sigma;
        /* |x - alpha e1|, without cancellation: alpha has the sign opposite to x0. */
        double inv = 1.0 / sqrt(2.0 * sigma * (sigma + fabs(v[0])));
        v[0] -= alpha;
        for (int i = 0; i < m; i++)
            v[i] *= inv;
        e[k] = alpha;
        /* H A H = A - v w^T - w v^T with p = A v, w = 2 (p - (v.p) v). */
        double vp = 0;
        for (int j = 0; j < m; j++) {
            const double *row = a + (size_t)(k + 1 + j) * n + k + 1;
            double s = 0;
            for (int i = 0; i < m; i++)
                s += row[i] * v[i];
            w[j] = s;
            vp += v[j] * s;
        }
        for (int j = 0; j < m; j++)
            w[j] = 2.0 * (w[j] - vp * v[j]);
        for (int j = 0; j < m; j++) {
            double *row = a + (size_t)(k + 1 + j) * n + k + 1;
            double vj = v[j], wj = w[j];
            for (int i = 0; i < m; i++)
                row[i] -= vj * w[i] + wj * v[i];
        }
    }
    if (n >= 2) {
        d[n - 2] = a[(size_t)(n - 2) * n + n - 2];
        e[n - 2] = a[(size_t)(n - 2) * n + n - 1];
    }
    d[n - 1] = a[(size_t)n * n - 1];
    e[n - 1] = 0;
}

/* Sets row and column j of a, from index j on, to those of the identity. */
static void identity_row_col(double *a, int n, int j)
{
    for (int i = j; i < n; i++) {
        a[(size_t)j * n + i] = 0;
        a[(size_t)i * n + j] = 0;
    }
    a[(size_t)j * n + j] = 1;
}

/* Q = H_0 H_1 ... H_{n-3} from the vectors householder_reduce left in a,
 * accumulated from the right so that step k only touches rows and columns
 * k+1.. (the product so far is the identity elsewhere); a := Q^T. */
static void householder_accumulate(double *a, int n, double *t)
{
    for (int j = n > 2 ? n - 2 : 0; j < n; j++)
        identity_row_col(a, n, j);
    for (int k = n - 3; k >= 0; k--) {
        int m = n - k - 1;
        const double *v = a + (size_t)k * n + k + 1;
        identity_row_col(a, n, k + 1); /* held v_{k+1}, already applied */
        for (int c = 0; c < m; c++)
            t[c] = 0;
        for (int r = 0; r < m; r++) {
            const double *row = a + (size_t)(k + 1 + r) * n + k + 1;
            for (int c = 0; c < m; c++)
                t[c] += v[r] * row[c];
        }
        for (int r = 0; r < m; r++) {
            double *row = a + (size_t)(k + 1 + r) * n + k + 1;
            double s = 2.0 * v[r];
            for (int c = 0; c < m; c++)
                row[c] -= s * t[c];
        }
    }
    if (n >= 3)
        identity_row_col(a, n, 0);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double x = a[(size_t)i * n + j];
            a[(size_t)i * n + j] = a[(size_t)j * n + i];
            a[(size_t)j * n + i] = x;
        }
}

/* Rows i and i+1 of z: the plane rotation that QL applies to columns i, i+1 of Q. */
static void rotate_rows(double *z, int n, int i, double c, double s)
{
    double *zi = z + (size_t)i * n, *zj = zi + n;
    for (int k = 0; k < n; k++) {
        double x = zi[k], y = zj[k];
        zj[k] = s * x + c * y;
        zi[k] = c * x - s * y;
    }
}

/* Implicit-shift QL on the tridiagonal (d, e), rotating the rows of z (Q^T on
 * entry, eigenvectors as rows on return). Each pass chases the bulge from the
 * bottom of the unreduced block [l, m] up to l, with Wilkinson's shift from
 * the block's top 2x2. */
static int tridiagonal_ql(double *d, double *e, int n, double *z)
{
    for (int l = 0; l < n; l++) {
        for (int iter = 0;; iter++) {
            int m = l;
            while (m < n - 1 && fabs(e[m]) > DBL_EPSILON * (fabs(d[m]) + fabs(d[m + 1])))
                m++;
            if (m == l)
                break;
            if (iter == QL_MAX_ITER)
                return -1;
            double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            double r = hypot(g, 1.0);
            g = d[m] - d[l] + e[l] / (g + copysign(r, g));
            double s = 1, c = 1, p = 0;
            int i;
            for (i = m - 1; i >= l; i--) {
                double f = s * e[i], b = c * e[i];
                r = hypot(f, g);
                e[i + 1] = r;
                if (r == 0) { /* underflow: the block splits here; start over */
                    d[i + 1] -= p;
                    e[m] = 0;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
                rotate_rows(z, n, i, c, s);
            }
            if (i >= l)
                continue;
            d[l] -= p;
            e[l] = g;
            e[m] = 0;
        }
    }
    return 0;
}

int symmetric_eigen(double *a, int n, double *values)
{
    double *e = malloc((size_t)n * sizeof(double)), *work = malloc((size_t)n * sizeof(double));
    int rc = -1;
    if (e && work) {
        householder_reduce(a, n, values, e, work);
        householder_accumulate(a, n, work);
        rc = tridiagonal_ql(values, e, n, a);
    }
    free(e);
    free(work);
    return rc;
}

/* ---- ZCA ---- */

int zca_fit(const float *x, int n, int dim, double eps, int threads, float *mean, float *W,
            char *err, size_t errlen)
{
    size_t dd = (size_t)dim * dim;
    double *msum = calloc((size_t)dim, sizeof(double));
    double *a = malloc(dd * sizeof(double)), *lambda = malloc((size_t)dim * sizeof(double));
    float *chunk = malloc((size_t)ZCA_CHUNK * dim * sizeof(float));
    float *cov = malloc(dd * sizeof(float));
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, threads);
    int rc = -1;
    if (!msum || !a || !lambda || !chunk || !cov) {
        snprintf(err, errlen, "zca: out of memory for a %d x %d covariance", dim, dim);
        goto done;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++)
            msum[j] += x[(size_t)i * dim + j];
    for (int j = 0; j < dim; j++)
        mean[j] = (float)(msum[j] / n);
    /* C = (1/n) sum over chunks of Xc^T Xc, Xc the centred rows. */
    for (int r0 = 0; r0 < n; r0 += ZCA_CHUNK) {
        int rows = n - r0 < ZCA_CHUNK ? n - r0 : ZCA_CHUNK;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < dim; j++)
                chunk[(size_t)i * dim + j] = x[(size_t)(r0 + i) * dim + j] - mean[j];
        gemm(&ctx, 1, 0, dim, dim, rows, 1.0f / (float)n, chunk, dim, chunk, dim, r0 ? 1.0f : 0.0f,
             cov, dim);
    }
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++)
            a[(size_t)i * dim + j] = 0.5 * ((double)cov[(size_t)i * dim + j] + cov[(size_t)j * dim + i]);
    if (symmetric_eigen(a, dim, lambda) != 0) {
        snprintf(err, errlen, "zca: the %d x %d covariance's eigendecomposition did not converge",
                 dim, dim);
        goto done;
    }
    /* W = B^T B with row i of B = u_i^T (lambda_i + eps)^(-1/4). A covariance
     * has no negative eigenvalue: one is rounding, so it counts as 0. */
    for (int i = 0; i < dim; i++) {
        double l = lambda[i] > 0 ? lambda[i] : 0;
        double s = 1.0 / sqrt(sqrt(l + eps));
        for (int j = 0; j < dim; j++)
            cov[(size_t)i * dim + j] = (float)(a[(size_t)i * dim + j] * s);
    }
    gemm(&ctx, 1, 0, dim, dim, dim, 1.0f, cov, dim, cov, dim, 0.0f, W, dim);
    for (int i = 0; i < dim; i++)
        for (int j = i + 1; j < dim; j++) {
            float v = 0.5f * (W[(size_t)i * dim + j] + W[(size_t)j * dim + i]);
            W[(size_t)i * dim + j] = W[(size_t)j * dim + i] = v;
        }
    rc = 0;
done:
    backend_ctx_free(&ctx);
    free(msum);
    free(a);
    free(lambda);
    free(chunk);
    free(cov);
    return rc;
}

int zca_apply(float *x, int n, int dim, const float *mean, const float *W, int threads, char *err,
              size_t errlen)
{
    float *chunk = malloc((size_t)ZCA_CHUNK * dim * sizeof(float));
    if (!chunk) {
        snprintf(err, errlen, "zca: out of memory for %d x %d rows", ZCA_CHUNK, dim);
        return -1;
    }
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, threads);
    for (int r0 = 0; r0 < n; r0 += ZCA_CHUNK) {
        int rows = n - r0 < ZCA_CHUNK ? n - r0 : ZCA_CHUNK;
        float *xr = x + (size_t)r0 * dim;
        for (size_t i = 0; i < (size_t)rows * dim; i++)
            chunk[i] = xr[i] - mean[i % (size_t)dim];
        gemm(&ctx, 0, 1, rows, dim, dim, 1.0f, chunk, dim, W, dim, 0.0f, xr, dim);
    }
    backend_ctx_free(&ctx);
    free(chunk);
    return 0;
}

int preprocess_zca(dataset *train, dataset *test, int threads, char *err, size_t errlen)
{
    int dim = (int)dataset_example_size(train);
    float *mean = malloc((size_t)dim * sizeof(float));
    float *W = malloc((size_t)dim * dim * sizeof(float));
    int rc = -1;
    if (!mean || !W) {
        snprintf(err, errlen, "zca: out of memory for a %d x %d whitening matrix", dim, dim);
        goto done;
    }
    preprocess_per_image(train);
    if (test)
        preprocess_per_image(test);
    if (zca_fit(train->images, train->n, dim, ZCA_EPS, threads, mean, W, err, errlen) != 0 ||
        zca_apply(train->images, train->n, dim, mean, W, threads, err, errlen) != 0 ||
        (test && zca_apply(test->images, test->n, dim, mean, W, threads, err, errlen) != 0))
        goto done;
    rc = 0;
done:
    free(mean);
    free(W);
    return rc;
}

/* Normalisation and ZCA whitening. The whitening matrix needs the full
 * eigendecomposition of a dim x dim covariance (3072 for CIFAR): Householder
 * tridiagonalisation and implicit-shift QL, in double, written out here so
 * that the core needs no LAPACK. */
#include "preprocess.h"

#include <float.h>
#include <limits.h>
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

/* ---- symmetric eigendecomposition ----
 * Memory traffic, not flops, bounds all three stages at n = 3072 (a is 75 MB):
 * the reduction streams the trailing matrix once per step (update and the next
 * step's product fused), Q^T is built a block of rows at a time, and QL's
 * rotations are recorded and applied many sweeps at once to cache-sized
 * column blocks. */

#define Q_ROWS 16          /* rows of Q^T built together */
#define ROT_SWEEPS 32      /* QL sweeps recorded per application */
#define ROT_COLS 128       /* columns per block: the rows around a level stay in L1 */

static double dot(const double *x, const double *y, int m)
{
    double s = 0;
    for (int i = 0; i < m; i++)
        s += x[i] * y[i];
    return s;
}

/* Turns x (length m) into the unit v with (I - 2 v v^T) x = alpha e_1 and
 * returns alpha; x = 0 stays 0 (H = I). */
static double make_reflector(double *x, int m)
{
    double sigma = sqrt(dot(x, x, m));
    if (sigma == 0)
        return 0;
    /* alpha opposite in sign to x0, so that x - alpha e1 does not cancel. */
    double alpha = x[0] > 0 ? -sigma : sigma;
    double inv = 1.0 / sqrt(2.0 * sigma * (sigma + fabs(x[0])));
    x[0] -= alpha;
    for (int i = 0; i < m; i++)
        x[i] *= inv;
    return alpha;
}

/* Householder reduction of the symmetric a (full storage) to tridiagonal
 * T = Q^T a Q, Q = H_0 ... H_{n-3}: diagonal d, off-diagonal e (e[i] couples
 * i and i+1). H_k = I - 2 v v^T acts on indices k+1..; v is left in row k of
 * a, columns k+1... With p = A v, H A H = A - v w^T - w v^T, w = 2 (p - (v.p) v).
 * p and w hold n doubles each. -1 if a stop was asked. */
static int householder_reduce(double *a, int n, double *d, double *e, double *p, double *w,
                              const volatile int *stop)
{
    if (n >= 3) {
        e[0] = make_reflector(a + 1, n - 1);
        const double *v = a + 1;
#pragma omp parallel for schedule(static)
        for (int j = 0; j < n - 1; j++)
            p[j] = dot(a + (size_t)(j + 1) * n + 1, v, n - 1);
    }
    for (int k = 0; k + 2 < n; k++) {
        if (data_stop_asked(stop))
            return -1;
        int m = n - k - 1;
        const double *v = a + (size_t)k * n + k + 1;
        d[k] = a[(size_t)k * n + k];
        double vp = dot(v, p, m);
        for (int j = 0; j < m; j++)
            w[j] = 2.0 * (p[j] - vp * v[j]);
        /* Row k+1 first: the next reflector comes from it. */
        double *r1 = a + (size_t)(k + 1) * n + k + 1;
        for (int i = 0; i < m; i++)
            r1[i] -= v[0] * w[i] + w[0] * v[i];
        int next = k + 3 < n;
        if (next)
            e[k + 1] = make_reflector(r1 + 1, m - 1);
        const double *vn = r1 + 1;
        /* Rows k+2..: column k+1 is never read again, so columns k+2.. only;
         * each updated row gives its entry of the next step's p. */
#pragma omp parallel for schedule(static)
        for (int j = 1; j < m; j++) {
            double *row = a + (size_t)(k + 1 + j) * n + k + 2;
            double vj = v[j], wj = w[j];
            for (int i = 0; i < m - 1; i++)
                row[i] -= vj * w[i + 1] + wj * v[i + 1];
            if (next)
                p[j - 1] = dot(row, vn, m - 1);
        }
    }
    if (n >= 2) {
        d[n - 2] = a[(size_t)(n - 2) * n + n - 2];
        e[n - 2] = a[(size_t)(n - 2) * n + n - 1];
    }
    d[n - 1] = a[(size_t)n * n - 1];
    e[n - 1] = 0;
    return 0;
}

/* z := Q^T from the reflectors in a. Row c of Q^T is (H_0 ... H_{n-3} e_c)^T,
 * and H_k leaves it alone until k < c: each row is independent. After a
 * stop the remaining blocks are skipped (an OpenMP loop cannot break) and
 * it returns -1. */
static int householder_q_rows(const double *a, int n, double *z, const volatile int *stop)
{
#pragma omp parallel for schedule(dynamic, 1)
    for (int c0 = 0; c0 < n; c0 += Q_ROWS) {
        if (data_stop_asked(stop))
            continue;
        int c1 = c0 + Q_ROWS < n ? c0 + Q_ROWS : n;
        for (int c = c0; c < c1; c++) {
            memset(z + (size_t)c * n, 0, (size_t)n * sizeof(double));
            z[(size_t)c * n + c] = 1;
        }
        int top = c1 - 2 < n - 3 ? c1 - 2 : n - 3;
        for (int k = top; k >= 0; k--) {
            const double *v = a + (size_t)k * n + k + 1;
            int m = n - k - 1;
            for (int c = c0 > k + 1 ? c0 : k + 1; c < c1; c++) {
                double *x = z + (size_t)c * n + k + 1;
                double t = 2.0 * dot(v, x, m);
                for (int i = 0; i < m; i++)
                    x[i] -= t * v[i];
            }
        }
    }
    return data_stop_asked(stop) ? -1 : 0;
}

/* QL's plane rotations, recorded sweep by sweep: sweep j rotates rows
 * (i, i+1) for i = hi[j], hi[j] - 1, ..., hi[j] - len[j] + 1, with c and s
 * from start[j] on. */
typedef struct rotations {
    int sweeps, count;
    int hi[ROT_SWEEPS], len[ROT_SWEEPS], start[ROT_SWEEPS];
    double *c, *s;
} rotations;

static void rotate_rows(double *zi, double *zj, int len, double c, double s)
{
    for (int k = 0; k < len; k++) {
        double x = zi[k], y = zj[k];
        zj[k] = s * x + c * y;
        zi[k] = c * x - s * y;
    }
}

/* Applies the recorded sweeps to the rows of z as a wave: at level L, sweep j
 * rotates rows (L + j, L + j + 1). Every row then sees sweep j's rotations
 * before sweep j+1's, as applying the sweeps one after another would, while
 * the few rows around L stay in cache: each row of a column block is loaded
 * once for all the sweeps. */
static void rotations_apply(rotations *r, double *z, int n)
{
    int top = INT_MIN, bottom = INT_MAX;
    for (int j = 0; j < r->sweeps; j++)
        if (r->len[j] > 0) {
            top = r->hi[j] - j > top ? r->hi[j] - j : top;
            int low = r->hi[j] - r->len[j] + 1 - j;
            bottom = low < bottom ? low : bottom;
        }
#pragma omp parallel for schedule(static)
    for (int k0 = 0; k0 < n; k0 += ROT_COLS) {
        int len = n - k0 < ROT_COLS ? n - k0 : ROT_COLS;
        for (int level = top; level >= bottom; level--)
            for (int j = 0; j < r->sweeps; j++) {
                int row = level + j, at = r->hi[j] - row;
                if (at < 0 || at >= r->len[j])
                    continue;
                double *zi = z + (size_t)row * n + k0;
                rotate_rows(zi, zi + n, len, r->c[r->start[j] + at], r->s[r->start[j] + at]);
            }
    }
    r->sweeps = r->count = 0;
}

/* Implicit-shift QL on the tridiagonal (d, e): each pass chases the bulge
 * from the bottom of the unreduced block [l, m] up to l, with Wilkinson's
 * shift from the block's top 2x2. The rotations, applied to the rows of z
 * (Q^T on entry), leave the eigenvectors there. -1 if it does not converge,
 * -3 if a stop was asked. */
static int tridiagonal_ql(double *d, double *e, int n, double *z, rotations *rot,
                          const volatile int *stop)
{
    for (int l = 0; l < n; l++) {
        if (data_stop_asked(stop))
            return -3;
        for (int iter = 0;; iter++) {
            int m = l;
            while (m < n - 1 && fabs(e[m]) > DBL_EPSILON * (fabs(d[m]) + fabs(d[m + 1])))
                m++;
            if (m == l)
                break;
            if (iter == QL_MAX_ITER)
                return -1;
            if (rot->sweeps == ROT_SWEEPS)
                rotations_apply(rot, z, n);
            int sweep = rot->sweeps++;
            rot->hi[sweep] = m - 1;
            rot->start[sweep] = rot->count;
            rot->len[sweep] = 0;
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
                rot->c[rot->count] = c;
                rot->s[rot->count++] = s;
                rot->len[sweep]++;
            }
            if (i >= l)
                continue;
            d[l] -= p;
            e[l] = g;
            e[m] = 0;
        }
    }
    rotations_apply(rot, z, n);
    return 0;
}

int symmetric_eigen(double *a, int n, double *values, double *vectors, const volatile int *stop)
{
    size_t cap = (size_t)ROT_SWEEPS * n;
    double *e = malloc((size_t)n * sizeof(double)), *p = malloc((size_t)n * sizeof(double));
    double *w = malloc((size_t)n * sizeof(double));
    rotations *rot = calloc(1, sizeof *rot);
    int rc = -2;
    if (rot) {
        rot->c = malloc(cap * sizeof(double));
        rot->s = malloc(cap * sizeof(double));
    }
    if (e && p && w && rot && rot->c && rot->s) {
        if (householder_reduce(a, n, values, e, p, w, stop) != 0 ||
            householder_q_rows(a, n, vectors, stop) != 0)
            rc = -3;
        else
            rc = tridiagonal_ql(values, e, n, vectors, rot, stop);
    }
    free(e);
    free(p);
    free(w);
    if (rot) {
        free(rot->c);
        free(rot->s);
    }
    free(rot);
    return rc;
}

/* ---- ZCA ---- */

int zca_fit(const float *x, int n, int dim, double eps, int threads, float *mean, float *W,
            const volatile int *stop, char *err, size_t errlen)
{
    size_t dd = (size_t)dim * dim;
    double *msum = calloc((size_t)dim, sizeof(double));
    double *a = malloc(dd * sizeof(double)), *u = malloc(dd * sizeof(double));
    double *lambda = malloc((size_t)dim * sizeof(double));
    float *chunk = malloc((size_t)ZCA_CHUNK * dim * sizeof(float));
    float *cov = malloc(dd * sizeof(float));
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, threads);
    int rc = -1;
    if (!msum || !a || !u || !lambda || !chunk || !cov) {
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
        if (data_check_stop(stop, err, errlen) != 0)
            goto done;
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
    int erc = symmetric_eigen(a, dim, lambda, u, stop);
    if (erc == -3) {
        snprintf(err, errlen, DATA_STOPPED);
        goto done;
    }
    if (erc != 0) {
        snprintf(err, errlen, "zca: the %d x %d covariance's eigendecomposition %s", dim, dim,
                 erc == -2 ? "ran out of memory" : "did not converge");
        goto done;
    }
    /* W = B^T B with row i of B = u_i^T (lambda_i + eps)^(-1/4). A covariance
     * has no negative eigenvalue: one is rounding, so it counts as 0. */
    for (int i = 0; i < dim; i++) {
        double l = lambda[i] > 0 ? lambda[i] : 0;
        double s = 1.0 / sqrt(sqrt(l + eps));
        for (int j = 0; j < dim; j++)
            cov[(size_t)i * dim + j] = (float)(u[(size_t)i * dim + j] * s);
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
    free(u);
    free(lambda);
    free(chunk);
    free(cov);
    return rc;
}

int zca_apply(float *x, int n, int dim, const float *mean, const float *W, int threads,
              const volatile int *stop, char *err, size_t errlen)
{
    float *chunk = malloc((size_t)ZCA_CHUNK * dim * sizeof(float));
    if (!chunk) {
        snprintf(err, errlen, "zca: out of memory for %d x %d rows", ZCA_CHUNK, dim);
        return -1;
    }
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, threads);
    int rc = 0;
    for (int r0 = 0; r0 < n; r0 += ZCA_CHUNK) {
        if ((rc = data_check_stop(stop, err, errlen)) != 0)
            break;
        int rows = n - r0 < ZCA_CHUNK ? n - r0 : ZCA_CHUNK;
        float *xr = x + (size_t)r0 * dim;
        for (size_t i = 0; i < (size_t)rows * dim; i++)
            chunk[i] = xr[i] - mean[i % (size_t)dim];
        gemm(&ctx, 0, 1, rows, dim, dim, 1.0f, chunk, dim, W, dim, 0.0f, xr, dim);
    }
    backend_ctx_free(&ctx);
    free(chunk);
    return rc;
}

int preprocess_zca(dataset *train, dataset *test, int threads, const volatile int *stop,
                   char *err, size_t errlen)
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
    if (zca_fit(train->images, train->n, dim, ZCA_EPS, threads, mean, W, stop, err, errlen) != 0 ||
        zca_apply(train->images, train->n, dim, mean, W, threads, stop, err, errlen) != 0 ||
        (test && zca_apply(test->images, test->n, dim, mean, W, threads, stop, err, errlen) != 0))
        goto done;
    rc = 0;
done:
    free(mean);
    free(W);
    return rc;
}

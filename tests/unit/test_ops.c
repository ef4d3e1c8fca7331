/* The CPU layer ops against plain float64 references written here.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "cpu/cpu_ops.h"
#include "elementwise.h"
#include "testutil.h"

#define FWD_ATOL 1e-4
#define FWD_RTOL 1e-4
#define BWD_ATOL 2e-4
#define BWD_RTOL 2e-4
#define SAME_TOL 1e-5
#define FD_STEP 1e-4

static backend_ctx ctx1, ctx2; /* 1 and 2 math threads */

static float *new_floats(size_t n, double lo, double hi)
{
    float *x = malloc((n ? n : 1) * sizeof(float));
    test_fill_uniform(x, n, lo, hi);
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x ? x[i] : 0.0;
    return d;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* One CHECK per array: how many elements are off, and the worst one. */
static void check_array(const char *what, const float *got, const double *want, size_t n,
                        double atol, double rtol)
{
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]), allowed = atol + rtol * fabs(want[i]);
        if (!(err <= allowed))
            bad++;
        if (!(err - allowed <= worst_excess))
            worst_excess = err - allowed, worst = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu off, worst [%zu] got %.9g want %.9g", what, bad, n, worst,
          n ? (double)got[worst] : 0.0, n ? want[worst] : 0.0);
}

static void check_same(const char *what, const float *got, const float *want, size_t n)
{
    double *w = to_double(want, n);
    check_array(what, got, w, n, SAME_TOL, SAME_TOL);
    free(w);
}

/* Central differences of loss() with respect to each element of p. */
typedef double (*loss_fn)(void *arg);
static void numeric_grad(loss_fn loss, void *arg, double *p, size_t n, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double saved = p[i];
        p[i] = saved + FD_STEP;
        double up = loss(arg);
        p[i] = saved - FD_STEP;
        double down = loss(arg);
        p[i] = saved;
        grad[i] = (up - down) / (2.0 * FD_STEP);
    }
}

/* A float64 reference gradient against central differences: equal up to
 * the rounding of the differences (the losses checked so are linear in p). */
static void check_ref_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n,
                           const double *grad)
{
    double *want = malloc((n ? n : 1) * sizeof(double));
    numeric_grad(loss, arg, p, n, want);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(fabs(grad[i] - want[i]) <= 1e-7 + 1e-7 * fabs(want[i]));
    CHECK(bad == 0, "%s: %zu of %zu differ from central differences", what, bad, n);
    free(want);
}

/* Compares a backend gradient with the numeric one for parameter p. */
static void check_grad(const char *what, loss_fn loss, void *arg, double *p, size_t n,
                       const float *got)
{
    double *want = malloc((n ? n : 1) * sizeof(double));
    numeric_grad(loss, arg, p, n, want);
    check_array(what, got, want, n, BWD_ATOL, BWD_RTOL);
    free(want);
}

/* Distinct values in [-1, 1), at least 2/n apart, in random order: max pooling
 * then has no near ties for a finite difference to cross. */
static void fill_distinct(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(-1.0 + 2.0 * ((double)i + 0.5) / (double)n);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)test_uniform(0.0, (double)i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
}

/* ---------------- GEMM ---------------- */

static void test_gemm(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int M = 5 + (int)test_uniform(0, 8), N = 7 + (int)test_uniform(0, 8),
                      K = 9 + (int)test_uniform(0, 8);
            /* Leading dimensions wider than the rows, to catch ld mix-ups. */
            const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 4;
            float *A = new_floats((size_t)(ta ? K : M) * lda, -1, 1);
            float *B = new_floats((size_t)(tb ? N : K) * ldb, -1, 1);
            float *C = new_floats((size_t)M * ldc, -1, 1);
            double *want = to_double(C, (size_t)M * ldc);
            const float alpha = 0.7f, beta = -0.4f;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0.0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                             (tb ? B[j * ldb + k] : B[k * ldb + j]);
                    want[i * ldc + j] = alpha * s + beta * want[i * ldc + j];
                }
            gemm(&ctx2, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
            char what[64];
            snprintf(what, sizeof what, "gemm ta=%d tb=%d (padding untouched)", ta, tb);
            check_array(what, C, want, (size_t)M * ldc, FWD_ATOL, FWD_RTOL);
            free(A), free(B), free(C), free(want);
        }
}

/* ---------------- convolution ---------------- */

typedef struct conv_case {
    conv2d_desc d;
    int n;
    double *x, *w, *b, *r; /* b may be NULL */
} conv_case;

/* The convolution in float64, one pass over its taps: with y, the forward
 * y = conv(x, w) + b (b may be NULL); with r, adds the gradients of sum(y r)
 * to dx and dw, and to db if not NULL. */
static void ref_conv_pass(const conv2d_desc *d, int n, const double *x, const double *w,
                          const double *b, double *y, const double *r, double *dx, double *dw,
                          double *db)
{
    for (int i = 0; i < n; i++)
        for (int o = 0; o < d->out_c; o++)
            for (int oh = 0; oh < d->out_h; oh++)
                for (int ow = 0; ow < d->out_w; ow++) {
                    size_t yi = ((size_t)(i * d->out_c + o) * d->out_h + oh) * d->out_w + ow;
                    const double g = r ? r[yi] : 0.0;
                    double s = b ? b[o] : 0.0;
                    if (db)
                        db[o] += g;
                    for (int c = 0; c < d->in_c; c++)
                        for (int ki = 0; ki < d->k; ki++)
                            for (int kj = 0; kj < d->k; kj++) {
                                int ih = oh * d->stride - d->pad + ki;
                                int iw = ow * d->stride - d->pad + kj;
                                if (ih < 0 || ih >= d->in_h || iw < 0 || iw >= d->in_w)
                                    continue;
                                size_t xi = ((size_t)(i * d->in_c + c) * d->in_h + ih) * d->in_w;
                                size_t wi = ((size_t)(o * d->in_c + c) * d->k + ki) * d->k + kj;
                                xi += iw;
                                s += x[xi] * w[wi];
                                if (r) {
                                    dx[xi] += g * w[wi];
                                    dw[wi] += g * x[xi];
                                }
                            }
                    if (y)
                        y[yi] = s;
                }
}

static void ref_conv(const conv2d_desc *d, int n, const double *x, const double *w,
                     const double *b, double *y)
{
    ref_conv_pass(d, n, x, w, b, y, NULL, NULL, NULL, NULL);
}

/* The exact gradients of sum(y r) in float64: dx, dw and db (if b). */
static void ref_conv_grads(const conv_case *cc, double *dx, double *dw, double *db)
{
    const conv2d_desc *d = &cc->d;
    memset(dx, 0, (size_t)cc->n * d->in_c * d->in_h * d->in_w * sizeof(double));
    memset(dw, 0, (size_t)d->out_c * d->in_c * d->k * d->k * sizeof(double));
    if (db)
        memset(db, 0, (size_t)d->out_c * sizeof(double));
    ref_conv_pass(d, cc->n, cc->x, cc->w, NULL, NULL, cc->r, dx, dw, db);
}

static size_t conv_out_count(const conv_case *cc)
{
    return (size_t)cc->n * cc->d.out_c * cc->d.out_h * cc->d.out_w;
}

static double conv_loss(void *arg)
{
    conv_case *cc = arg;
    size_t ny = conv_out_count(cc);
    double *y = malloc(ny * sizeof(double));
    ref_conv(&cc->d, cc->n, cc->x, cc->w, cc->b, y);
    double l = dot(y, cc->r, ny);
    free(y);
    return l;
}

static void test_conv_case(int n, int in_c, int in_h, int in_w, int out_c, int k, int stride,
                           int pad, int bias)
{
    conv_case cc = {.n = n};
    conv2d_desc *d = &cc.d;
    conv2d_desc_init(d, in_c, in_h, in_w, out_c, k, stride, pad);
    char what[160], name[120];
    snprintf(name, sizeof name, "conv n%d c%d %dx%d -> %d k%d s%d p%d%s", n, in_c, in_h, in_w,
             out_c, k, stride, pad, bias ? " bias" : "");
    const int want_oh = (int)floor((in_h + 2.0 * pad - k) / stride) + 1;
    const int want_ow = (int)floor((in_w + 2.0 * pad - k) / stride) + 1;
    CHECK(d->out_h == want_oh && d->out_w == want_ow, "%s: out %dx%d want %dx%d", name,
          d->out_h, d->out_w, want_oh, want_ow);

    const size_t nx = (size_t)n * in_c * in_h * in_w, nw = (size_t)out_c * in_c * k * k;
    const size_t ny = conv_out_count(&cc);
    float *x = new_floats(nx, -1, 1), *w = new_floats(nw, -1, 1);
    float *b = bias ? new_floats(out_c, -1, 1) : NULL, *r = new_floats(ny, -1, 1);
    cc.x = to_double(x, nx), cc.w = to_double(w, nw), cc.r = to_double(r, ny);
    cc.b = bias ? to_double(b, out_c) : NULL;

    float *y = malloc(ny * sizeof(float)), *y2 = malloc(ny * sizeof(float));
    double *want = malloc(ny * sizeof(double));
    ref_conv(d, n, cc.x, cc.w, cc.b, want);
    conv2d_forward(&ctx1, d, n, x, w, b, y);
    snprintf(what, sizeof what, "%s: forward", name);
    check_array(what, y, want, ny, FWD_ATOL, FWD_RTOL);
    conv2d_forward(&ctx2, d, n, x, w, b, y2);
    snprintf(what, sizeof what, "%s: forward, 2 threads", name);
    check_same(what, y2, y, ny);

    /* dL/dy = r for L = sum(y r); the exact gradients, checked against
     * central differences where those are affordable. */
    double *gx = malloc(nx * sizeof(double)), *gw = malloc(nw * sizeof(double));
    double *gb = malloc(out_c * sizeof(double));
    ref_conv_grads(&cc, gx, gw, bias ? gb : NULL);
    if (ny * (nx + nw) * in_c * k * k < 100000000) {
        snprintf(what, sizeof what, "%s: reference gradients", name);
        check_ref_grad(what, conv_loss, &cc, cc.x, nx, gx);
        check_ref_grad(what, conv_loss, &cc, cc.w, nw, gw);
        if (bias)
            check_ref_grad(what, conv_loss, &cc, cc.b, out_c, gb);
    }

    float *dx = malloc(nx * sizeof(float)), *dx2 = malloc(nx * sizeof(float));
    conv2d_backward_data(&ctx1, d, n, r, w, dx);
    snprintf(what, sizeof what, "%s: backward data", name);
    check_array(what, dx, gx, nx, BWD_ATOL, BWD_RTOL);
    conv2d_backward_data(&ctx2, d, n, r, w, dx2);
    snprintf(what, sizeof what, "%s: backward data, 2 threads", name);
    check_same(what, dx2, dx, nx);

    float *dw = malloc(nw * sizeof(float)), *dw2 = malloc(nw * sizeof(float));
    float *db = malloc(out_c * sizeof(float));
    conv2d_backward_filter(&ctx1, d, n, x, r, dw, bias ? db : NULL);
    snprintf(what, sizeof what, "%s: backward filter", name);
    check_array(what, dw, gw, nw, BWD_ATOL, BWD_RTOL);
    if (bias) {
        snprintf(what, sizeof what, "%s: backward bias", name);
        check_array(what, db, gb, out_c, BWD_ATOL, BWD_RTOL);
    }
    conv2d_backward_filter(&ctx2, d, n, x, r, dw2, NULL);
    snprintf(what, sizeof what, "%s: backward filter, 2 threads, no bias", name);
    check_same(what, dw2, dw, nw);

    free(x), free(w), free(b), free(r), free(y), free(y2), free(want), free(dx), free(dx2);
    free(dw), free(dw2), free(db), free(gx), free(gw), free(gb);
    free(cc.x), free(cc.w), free(cc.b), free(cc.r);
}

/* A batch that spans several chunks of several images each gives the same
 * result as the images one at a time, on 2 threads and 1. (conv.c takes
 * about 1 MiB per chunk: 13 of these images, so chunks of 13, 13 and 4.) */
static void test_conv_chunks(void)
{
    conv2d_desc d;
    const int n = 30;
    conv2d_desc_init(&d, 8, 16, 15, 8, 3, 1, 1);
    const size_t in1 = (size_t)d.in_c * d.in_h * d.in_w, out1 = (size_t)d.out_c * d.out_h * d.out_w;
    const size_t nw = (size_t)d.out_c * d.in_c * d.k * d.k;
    float *x = new_floats(n * in1, -1, 1), *w = new_floats(nw, -1, 1), *b = new_floats(d.out_c, -1, 1);
    float *dy = new_floats(n * out1, -1, 1);
    float *y = malloc(n * out1 * sizeof(float)), *y1 = malloc(n * out1 * sizeof(float));
    float *dx = malloc(n * in1 * sizeof(float)), *dx1 = malloc(n * in1 * sizeof(float));
    float *dw = malloc(nw * sizeof(float)), *db = malloc(d.out_c * sizeof(float));
    float *dw_i = malloc(nw * sizeof(float)), *db_i = malloc(d.out_c * sizeof(float));
    double *dw_sum = calloc(nw, sizeof(double)), *db_sum = calloc(d.out_c, sizeof(double));

    conv2d_forward(&ctx2, &d, n, x, w, b, y);
    conv2d_backward_data(&ctx2, &d, n, dy, w, dx);
    conv2d_backward_filter(&ctx2, &d, n, x, dy, dw, db);
    for (int i = 0; i < n; i++) {
        conv2d_forward(&ctx1, &d, 1, x + i * in1, w, b, y1 + i * out1);
        conv2d_backward_data(&ctx1, &d, 1, dy + i * out1, w, dx1 + i * in1);
        conv2d_backward_filter(&ctx1, &d, 1, x + i * in1, dy + i * out1, dw_i, db_i);
        for (size_t j = 0; j < nw; j++)
            dw_sum[j] += dw_i[j];
        for (int o = 0; o < d.out_c; o++)
            db_sum[o] += db_i[o];
    }
    check_same("conv chunked batch vs single images: forward", y, y1, n * out1);
    check_same("conv chunked batch vs single images: backward data", dx, dx1, n * in1);
    /* Sums of 30 x 240 products of size ~1: allow float rounding of the sum. */
    check_array("conv chunked batch vs single images: backward filter", dw, dw_sum, nw, 1e-3, 1e-4);
    check_array("conv chunked batch vs single images: backward bias", db, db_sum, d.out_c, 1e-3, 1e-4);
    free(x), free(w), free(b), free(dy), free(y), free(y1), free(dx), free(dx1), free(dw), free(db);
    free(dw_i), free(db_i), free(dw_sum), free(db_sum);
}

/* Replica threads run the ops at once, each on its own context (with its own
 * workspace and thread count): their results equal a lone run's. */
typedef struct replica_job {
    const conv2d_desc *d;
    int n, threads;
    const float *x, *w, *b, *dy;
    float *y, *dw;
} replica_job;

static void *replica_main(void *arg)
{
    replica_job *job = arg;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, job->threads);
    for (int rep = 0; rep < 3; rep++) {
        conv2d_forward(&ctx, job->d, job->n, job->x, job->w, job->b, job->y);
        conv2d_backward_filter(&ctx, job->d, job->n, job->x, job->dy, job->dw, NULL);
    }
    backend_ctx_free(&ctx);
    return NULL;
}

static void test_concurrent_replicas(int in_c, int out_c)
{
    enum { REPLICAS = 3 };
    conv2d_desc d;
    const int n = 9;
    conv2d_desc_init(&d, in_c, 13, 12, out_c, 3, 2, 1);
    const size_t nx = (size_t)n * d.in_c * d.in_h * d.in_w, ny = (size_t)n * d.out_c * d.out_h * d.out_w;
    const size_t nw = (size_t)d.out_c * d.in_c * d.k * d.k;
    float *x = new_floats(nx, -1, 1), *w = new_floats(nw, -1, 1), *b = new_floats(d.out_c, -1, 1);
    float *dy = new_floats(ny, -1, 1), *y = malloc(ny * sizeof(float)), *dw = malloc(nw * sizeof(float));
    conv2d_forward(&ctx1, &d, n, x, w, b, y);
    conv2d_backward_filter(&ctx1, &d, n, x, dy, dw, NULL);
    replica_job jobs[REPLICAS];
    pthread_t tids[REPLICAS];
    for (int r = 0; r < REPLICAS; r++) {
        jobs[r] = (replica_job){&d, n, 1 + r % 2, x, w, b, dy, malloc(ny * sizeof(float)),
                                malloc(nw * sizeof(float))};
        CHECK(pthread_create(&tids[r], NULL, replica_main, &jobs[r]) == 0, "pthread_create %d", r);
    }
    for (int r = 0; r < REPLICAS; r++) {
        pthread_join(tids[r], NULL);
        check_same("conv forward on concurrent replica threads", jobs[r].y, y, ny);
        check_same("conv backward filter on concurrent replica threads", jobs[r].dw, dw, nw);
        free(jobs[r].y), free(jobs[r].dw);
    }
    free(x), free(w), free(b), free(dy), free(y), free(dw);
}

/* More oneDNN-sized shapes than a context keeps primitives for: the oldest
 * are replaced, and a shape seen again is made afresh, all still right. */
static void test_conv_plan_reuse(void)
{
    conv2d_desc d;
    conv2d_desc_init(&d, 32, 4, 3, 32, 3, 1, 1);
    const int max_n = CPU_CONV_PLANS + 3;
    const size_t in1 = (size_t)d.in_c * d.in_h * d.in_w, out1 = (size_t)d.out_c * d.out_h * d.out_w;
    const size_t nw = (size_t)d.out_c * d.in_c * d.k * d.k;
    float *x = new_floats(max_n * in1, -1, 1), *w = new_floats(nw, -1, 1);
    float *y = malloc(max_n * out1 * sizeof(float));
    conv_case cc = {.d = d, .n = max_n, .x = to_double(x, max_n * in1), .w = to_double(w, nw)};
    double *want = malloc(max_n * out1 * sizeof(double));
    ref_conv(&d, max_n, cc.x, cc.w, NULL, want);
    for (int pass = 0; pass < 2; pass++)
        for (int n = 1; n <= max_n; n++) {
            conv2d_forward(&ctx1, &d, n, x, w, NULL, y);
            char what[80];
            snprintf(what, sizeof what, "conv forward, batch %d of %d, pass %d", n, max_n, pass);
            check_array(what, y, want, n * out1, FWD_ATOL, FWD_RTOL);
        }
    free(x), free(w), free(y), free(want), free(cc.x), free(cc.w);
}

/* ---------------- pooling ---------------- */

typedef struct pool_case {
    pool2d_desc d;
    int n, is_max;
    double *x, *r;
} pool_case;

static void ref_pool(const pool_case *pc, double *y)
{
    const pool2d_desc *d = &pc->d;
    for (int pl = 0; pl < pc->n * d->c; pl++)
        for (int oh = 0; oh < d->out_h; oh++)
            for (int ow = 0; ow < d->out_w; ow++) {
                double best = -INFINITY, sum = 0.0;
                for (int ki = 0; ki < d->k; ki++)
                    for (int kj = 0; kj < d->k; kj++) {
                        int ih = oh * d->stride - d->pad + ki, iw = ow * d->stride - d->pad + kj;
                        if (ih < 0 || ih >= d->in_h || iw < 0 || iw >= d->in_w)
                            continue; /* padding: -inf for max, 0 for the average */
                        double v = pc->x[(pl * d->in_h + ih) * d->in_w + iw];
                        best = v > best ? v : best;
                        sum += v;
                    }
                y[(pl * d->out_h + oh) * d->out_w + ow] = pc->is_max ? best : sum / (d->k * d->k);
            }
}

static double pool_loss(void *arg)
{
    pool_case *pc = arg;
    size_t ny = (size_t)pc->n * pc->d.c * pc->d.out_h * pc->d.out_w;
    double *y = malloc(ny * sizeof(double));
    ref_pool(pc, y);
    double l = dot(y, pc->r, ny);
    free(y);
    return l;
}

static void test_pool_case(int is_max, int n, int c, int in_h, int in_w, int k, int stride,
                           int pad, int want_oh, int want_ow)
{
    pool_case pc = {.n = n, .is_max = is_max};
    pool2d_desc *d = &pc.d;
    pool2d_desc_init(d, c, in_h, in_w, k, stride, pad);
    char name[120], what[180];
    snprintf(name, sizeof name, "%s n%d c%d %dx%d k%d s%d p%d", is_max ? "maxpool" : "avgpool", n,
             c, in_h, in_w, k, stride, pad);
    CHECK(d->out_h == want_oh && d->out_w == want_ow, "%s: out %dx%d want %dx%d (floor)", name,
          d->out_h, d->out_w, want_oh, want_ow);
    const size_t nx = (size_t)n * c * in_h * in_w, ny = (size_t)n * c * d->out_h * d->out_w;
    float *x = malloc(nx * sizeof(float)), *r = new_floats(ny, -1, 1);
    fill_distinct(x, nx);
    pc.x = to_double(x, nx), pc.r = to_double(r, ny);
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    double *want = malloc(ny * sizeof(double));
    int32_t *argmax = malloc(ny * sizeof(int32_t));
    ref_pool(&pc, want);
    if (is_max) {
        maxpool2d_forward(&ctx1, d, n, x, y, argmax);
        /* The maximum is one of the inputs: exact, and argmax points at it. */
        check_array(name, y, want, ny, 0.0, 0.0);
        size_t bad = 0, plane = (size_t)in_h * in_w;
        for (size_t j = 0; j < ny; j++) {
            size_t pl = j / ((size_t)d->out_h * d->out_w);
            bad += argmax[j] < 0 || (size_t)argmax[j] >= plane || x[pl * plane + argmax[j]] != y[j];
        }
        CHECK(bad == 0, "%s: %zu argmax entries do not point at the maximum", name, bad);
        maxpool2d_backward(&ctx2, d, n, r, argmax, dx);
    } else {
        avgpool2d_forward(&ctx1, d, n, x, y);
        check_array(name, y, want, ny, FWD_ATOL, FWD_RTOL);
        avgpool2d_backward(&ctx2, d, n, r, dx);
    }
    snprintf(what, sizeof what, "%s: backward", name);
    check_grad(what, pool_loss, &pc, pc.x, nx, dx);
    free(x), free(r), free(y), free(dx), free(want), free(argmax), free(pc.x), free(pc.r);
}

/* ---------------- batch normalisation ---------------- */

typedef struct bn_case {
    int n, c, hw;
    double eps;
    double *x, *gamma, *beta, *r;
} bn_case;

/* Training-mode forward; mean and biased variance per channel. */
static void ref_bn_train(const bn_case *bc, double *y, double *mean, double *var)
{
    const int n = bc->n, c = bc->c, hw = bc->hw;
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, sq = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++)
                s += bc->x[(i * c + ch) * hw + j];
        double m = s / (n * hw);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                double dev = bc->x[(i * c + ch) * hw + j] - m;
                sq += dev * dev;
            }
        double v = sq / (n * hw);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                size_t at = ((size_t)i * c + ch) * hw + j;
                y[at] = bc->gamma[ch] * (bc->x[at] - m) / sqrt(v + bc->eps) + bc->beta[ch];
            }
        if (mean)
            mean[ch] = m, var[ch] = v;
    }
}

static double bn_loss(void *arg)
{
    bn_case *bc = arg;
    size_t count = (size_t)bc->n * bc->c * bc->hw;
    double *y = malloc(count * sizeof(double));
    ref_bn_train(bc, y, NULL, NULL);
    double l = dot(y, bc->r, count);
    free(y);
    return l;
}

/* offset: added to every input, to check the variance keeps its precision. */
static void test_bn_case(int n, int c, int hw, double offset)
{
    bn_case bc = {.n = n, .c = c, .hw = hw, .eps = 1e-5};
    char name[64], what[128];
    snprintf(name, sizeof name, "batchnorm n%d c%d hw%d offset %g", n, c, hw, offset);
    const size_t count = (size_t)n * c * hw;
    const float momentum = 0.1f, eps = (float)bc.eps;
    float *x = new_floats(count, offset - 1, offset + 3), *gamma = new_floats(c, 0.5, 1.5);
    float *beta = new_floats(c, -1, 1), *r = new_floats(count, -1, 1);
    float *rmean = new_floats(c, -1, 1), *rvar = new_floats(c, 0.5, 2);
    bc.x = to_double(x, count), bc.gamma = to_double(gamma, c), bc.beta = to_double(beta, c);
    bc.r = to_double(r, count);
    double *want_rmean = to_double(rmean, c), *want_rvar = to_double(rvar, c);
    float *y = malloc(count * sizeof(float)), *smean = malloc(c * sizeof(float));
    float *sinv = malloc(c * sizeof(float));
    double *want = malloc(count * sizeof(double)), *mean = malloc(c * sizeof(double));
    double *var = malloc(c * sizeof(double)), *want_inv = malloc(c * sizeof(double));

    ref_bn_train(&bc, want, mean, var);
    batchnorm_forward_train(&ctx1, n, c, hw, x, gamma, beta, rmean, rvar, momentum, eps, y, smean,
                            sinv);
    snprintf(what, sizeof what, "%s: train forward", name);
    check_array(what, y, want, count, FWD_ATOL, FWD_RTOL);
    snprintf(what, sizeof what, "%s: saved mean", name);
    check_array(what, smean, mean, c, FWD_ATOL, FWD_RTOL);
    for (int ch = 0; ch < c; ch++) {
        want_inv[ch] = 1.0 / sqrt(var[ch] + bc.eps);
        /* Running variance tracks the unbiased batch variance, as PyTorch. */
        double unbiased = var[ch] * (n * hw) / (n * hw - 1.0);
        want_rmean[ch] = (1.0 - momentum) * want_rmean[ch] + momentum * mean[ch];
        want_rvar[ch] = (1.0 - momentum) * want_rvar[ch] + momentum * unbiased;
    }
    snprintf(what, sizeof what, "%s: saved invstd", name);
    check_array(what, sinv, want_inv, c, FWD_ATOL, FWD_RTOL);
    snprintf(what, sizeof what, "%s: running mean", name);
    check_array(what, rmean, want_rmean, c, FWD_ATOL, FWD_RTOL);
    snprintf(what, sizeof what, "%s: running var (unbiased)", name);
    check_array(what, rvar, want_rvar, c, FWD_ATOL, FWD_RTOL);

    /* Inference with the updated running statistics. */
    batchnorm_forward_infer(&ctx2, n, c, hw, x, gamma, beta, rmean, rvar, eps, y);
    for (int ch = 0; ch < c; ch++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                size_t at = ((size_t)i * c + ch) * hw + j;
                want[at] = bc.gamma[ch] * (bc.x[at] - rmean[ch]) / sqrt((double)rvar[ch] + bc.eps) +
                           bc.beta[ch];
            }
    snprintf(what, sizeof what, "%s: infer forward", name);
    check_array(what, y, want, count, FWD_ATOL, FWD_RTOL);

    float *dx = malloc(count * sizeof(float)), *dgamma = malloc(c * sizeof(float));
    float *dbeta = malloc(c * sizeof(float));
    batchnorm_backward(&ctx1, n, c, hw, x, r, gamma, smean, sinv, dx, dgamma, dbeta);
    snprintf(what, sizeof what, "%s: backward x", name);
    check_grad(what, bn_loss, &bc, bc.x, count, dx);
    snprintf(what, sizeof what, "%s: backward gamma", name);
    check_grad(what, bn_loss, &bc, bc.gamma, c, dgamma);
    snprintf(what, sizeof what, "%s: backward beta", name);
    check_grad(what, bn_loss, &bc, bc.beta, c, dbeta);

    free(x), free(gamma), free(beta), free(r), free(rmean), free(rvar), free(y), free(smean);
    free(sinv), free(want), free(mean), free(var), free(want_inv), free(want_rmean);
    free(want_rvar), free(dx), free(dgamma), free(dbeta);
    free(bc.x), free(bc.gamma), free(bc.beta), free(bc.r);
}

/* BN's exact gradient in float64 from g = dL/dy (y = BN(x) in training):
 * dx = gamma invstd (g - mean(g) - xhat mean(g xhat)), dgamma = sum g xhat,
 * dbeta = sum g, with the forward's mean and biased var. */
static void ref_bn_grad(const bn_case *bc, const double *g, const double *mean,
                        const double *var, double *gx, double *gg, double *gb)
{
    const int n = bc->n, c = bc->c, hw = bc->hw;
    for (int ch = 0; ch < c; ch++) {
        const double invstd = 1.0 / sqrt(var[ch] + bc->eps), N = (double)n * hw;
        double sg = 0.0, sgx = 0.0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                const size_t at = ((size_t)i * c + ch) * hw + j;
                sg += g[at];
                sgx += g[at] * (bc->x[at] - mean[ch]) * invstd;
            }
        gb[ch] = sg, gg[ch] = sgx;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < hw; j++) {
                const size_t at = ((size_t)i * c + ch) * hw + j;
                const double xhat = (bc->x[at] - mean[ch]) * invstd;
                gx[at] = bc->gamma[ch] * invstd * (g[at] - sg / N - xhat * sgx / N);
            }
    }
}

/* What the fused BN checks share: inputs (x in [-1, 3)), their float64
 * copies, the float64 forward (want, mean, var), the op's per-channel
 * outputs, and BN's exact gradients once ref_bn_grad has filled gx, gg, gb. */
typedef struct bn_fixture {
    bn_case bc;
    size_t count;
    float *x, *gamma, *beta, *rmean, *rvar, *smean, *sinv, *dg, *db;
    double *want, *mean, *var, *gx, *gg, *gb;
} bn_fixture;

static bn_fixture bn_fixture_new(int n, int c, int hw)
{
    bn_fixture f = {.bc = {.n = n, .c = c, .hw = hw, .eps = 1e-5}, .count = (size_t)n * c * hw};
    f.x = new_floats(f.count, -1, 3), f.gamma = new_floats(c, 0.5, 1.5);
    f.beta = new_floats(c, -1, 1), f.rmean = new_floats(c, -1, 1), f.rvar = new_floats(c, 0.5, 2);
    f.bc.x = to_double(f.x, f.count), f.bc.gamma = to_double(f.gamma, c);
    f.bc.beta = to_double(f.beta, c);
    f.smean = malloc(c * sizeof(float)), f.sinv = malloc(c * sizeof(float));
    f.dg = malloc(c * sizeof(float)), f.db = malloc(c * sizeof(float));
    f.want = malloc(f.count * sizeof(double)), f.gx = malloc(f.count * sizeof(double));
    f.mean = malloc(c * sizeof(double)), f.var = malloc(c * sizeof(double));
    f.gg = malloc(c * sizeof(double)), f.gb = malloc(c * sizeof(double));
    ref_bn_train(&f.bc, f.want, f.mean, f.var);
    return f;
}

static void bn_fixture_free(bn_fixture *f)
{
    free(f->x), free(f->gamma), free(f->beta), free(f->rmean), free(f->rvar), free(f->smean);
    free(f->sinv), free(f->dg), free(f->db), free(f->want), free(f->mean), free(f->var);
    free(f->gx), free(f->gg), free(f->gb), free(f->bc.x), free(f->bc.gamma), free(f->bc.beta);
}

/* dx and the op's dgamma, dbeta against ref_bn_grad's of g = dL/dy. */
static void check_bn_backward(const char *name, bn_fixture *f, const double *g, const float *dx)
{
    char what[160];
    ref_bn_grad(&f->bc, g, f->mean, f->var, f->gx, f->gg, f->gb);
    snprintf(what, sizeof what, "%s: backward x", name);
    check_array(what, dx, f->gx, f->count, BWD_ATOL, BWD_RTOL);
    snprintf(what, sizeof what, "%s: backward gamma", name);
    check_array(what, f->dg, f->gg, f->bc.c, BWD_ATOL, BWD_RTOL);
    snprintf(what, sizeof what, "%s: backward beta", name);
    check_array(what, f->db, f->gb, f->bc.c, BWD_ATOL, BWD_RTOL);
}

/* BN then ReLU in one op (batchnorm_relu_*): on ctx, against float64, with
 * dL/dy = r masked where the op's own y is 0 (as relu_backward reads y),
 * then BN's exact gradient: dx = gamma invstd (g - mean(g) - xhat
 * mean(g xhat)). Also in place (y over x, dx over dy), as model plans may
 * lay them out. */
static void check_bn_relu(const char *name, backend_ctx *ctx, int n, int c, int hw)
{
    bn_fixture f = bn_fixture_new(n, c, hw);
    const size_t count = f.count;
    const float eps = (float)f.bc.eps;
    float *r = new_floats(count, -1, 1), *y = malloc(count * sizeof(float));
    float *dx = malloc(count * sizeof(float)), *dy = malloc(count * sizeof(float));
    double *g = malloc(count * sizeof(double));
    char what[160];

    for (size_t i = 0; i < count; i++)
        f.want[i] = f.want[i] > 0 ? f.want[i] : 0.0;
    batchnorm_relu_forward_train(ctx, n, c, hw, f.x, f.gamma, f.beta, f.rmean, f.rvar, 0.1f, eps,
                                 y, f.smean, f.sinv);
    snprintf(what, sizeof what, "%s: forward", name);
    check_array(what, y, f.want, count, FWD_ATOL, FWD_RTOL);

    for (size_t i = 0; i < count; i++)
        g[i] = y[i] > 0 ? r[i] : 0.0;
    memcpy(dy, r, count * sizeof(float));
    batchnorm_relu_backward(ctx, n, c, hw, f.x, y, dy, f.gamma, f.beta, f.smean, f.sinv, dx, f.dg,
                            f.db);
    check_bn_backward(name, &f, g, dx);

    /* In place: y over x, then dx over dy. */
    memcpy(dy, f.x, count * sizeof(float));
    batchnorm_relu_forward_train(ctx, n, c, hw, dy, f.gamma, f.beta, f.rmean, f.rvar, 0.1f, eps,
                                 dy, f.smean, f.sinv);
    snprintf(what, sizeof what, "%s: forward in place", name);
    check_array(what, dy, f.want, count, FWD_ATOL, FWD_RTOL);
    memcpy(dy, r, count * sizeof(float));
    batchnorm_relu_backward(ctx, n, c, hw, f.x, y, dy, f.gamma, f.beta, f.smean, f.sinv, dy, f.dg,
                            f.db);
    snprintf(what, sizeof what, "%s: backward in place", name);
    check_array(what, dy, f.gx, count, BWD_ATOL, BWD_RTOL);

    free(r), free(y), free(dx), free(dy), free(g);
    bn_fixture_free(&f);
}

/* The CPU's fused passes on 1 and 2 threads, and backend.c's composition of
 * batchnorm_* and relu_* that backends without them (CUDA) run. */
static void test_bn_relu_case(int n, int c, int hw)
{
    char name[96];
    backend_ops composed = *ctx1.ops;
    composed.batchnorm_relu_forward_train = NULL;
    composed.batchnorm_relu_backward = NULL;
    backend_ctx ctxc = ctx1;
    ctxc.ops = &composed;
    snprintf(name, sizeof name, "batchnorm+relu n%d c%d hw%d", n, c, hw);
    check_bn_relu(name, &ctx1, n, c, hw);
    snprintf(name, sizeof name, "batchnorm+relu n%d c%d hw%d, 2 threads", n, c, hw);
    check_bn_relu(name, &ctx2, n, c, hw);
    snprintf(name, sizeof name, "batchnorm+relu n%d c%d hw%d, composed", n, c, hw);
    check_bn_relu(name, &ctxc, n, c, hw);
}

/* Where BN's input is a thin 5x5 convolution's output (the convolution's
 * own input x0 fresh here: BN's x need not be its result for the maths),
 * the convolution's filter and bias gradients straight from BN's
 * (conv2d_backward_filter_bn_relu_maxpool) against float64 sums of BN's
 * exact dx (f->gx, from check_bn_backward) times x0; BN's backward with dx
 * NULL still gives dgamma and dbeta. */
static void check_conv_filter_from_bn(const char *name, backend_ctx *ctx, bn_fixture *f,
                                      const pool2d_desc *pd, const float *dy,
                                      const int32_t *argmax)
{
    const int n = f->bc.n, c = pd->c, K = 5, W0 = pd->in_w + K - 1, H0 = pd->in_h + K - 1;
    conv2d_desc cd;
    conv2d_desc_init(&cd, 1, H0, W0, c, K, 1, 0);
    if (!backend_fuses_conv_filter_bn(ctx, &cd, pd))
        return;
    const size_t nw = (size_t)c * K * K;
    float *x0 = new_floats((size_t)n * H0 * W0, -1, 1), *dw = malloc(nw * sizeof(float));
    float *db = malloc(c * sizeof(float));
    double *gw = calloc(nw, sizeof(double)), *gb = calloc(c, sizeof(double));
    char what[160];
    batchnorm_relu_maxpool_backward(ctx, n, pd, f->x, dy, argmax, f->gamma, f->beta, f->smean,
                                    f->sinv, NULL, f->dg, f->db);
    snprintf(what, sizeof what, "%s, no dx: backward gamma", name);
    check_array(what, f->dg, f->gg, c, BWD_ATOL, BWD_RTOL);
    snprintf(what, sizeof what, "%s, no dx: backward beta", name);
    check_array(what, f->db, f->gb, c, BWD_ATOL, BWD_RTOL);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < c; o++)
            for (int p = 0; p < pd->in_h * pd->in_w; p++) {
                const double gx = f->gx[((size_t)i * c + o) * pd->in_h * pd->in_w + p];
                const int oh = p / pd->in_w, ow = p % pd->in_w;
                gb[o] += gx;
                for (int u = 0; u < K; u++)
                    for (int v = 0; v < K; v++)
                        gw[(o * K + u) * K + v] +=
                            gx * x0[((size_t)i * H0 + oh + u) * W0 + ow + v];
            }
    conv2d_backward_filter_bn_relu_maxpool(ctx, n, &cd, x0, pd, f->x, dy, argmax, f->gamma,
                                           f->beta, f->smean, f->sinv, f->dg, f->db, dw, db);
    CHECK(!backend_failed(ctx), "%s: %s", name, ctx->err);
    snprintf(what, sizeof what, "%s: conv filter from BN", name);
    check_array(what, dw, gw, nw, BWD_ATOL, BWD_RTOL);
    snprintf(what, sizeof what, "%s: conv bias from BN", name);
    check_array(what, db, gb, c, BWD_ATOL, BWD_RTOL);
    free(x0), free(dw), free(db), free(gw), free(gb);
}

/* BN, ReLU and max pooling with tiling windows in one
 * (batchnorm_relu_maxpool_*), on ctx, against float64: the pooled output
 * against the window maxima of relu(BN(x)), each argmax inside its window
 * and at a maximum, and the backward against BN's exact gradient of the
 * pooled dy routed to the op's own argmax (masked where the pooled y is 0),
 * the positions outside every window included (floor mode). */
static void check_bn_relu_pool(const char *name, backend_ctx *ctx, int n, int c, int h, int w,
                               int k)
{
    pool2d_desc pd;
    pool2d_desc_init(&pd, c, h, w, k, k, 0);
    const int hw = h * w, ohw = pd.out_h * pd.out_w;
    bn_fixture f = bn_fixture_new(n, c, hw);
    const size_t pooled = (size_t)n * c * ohw;
    float *r = new_floats(pooled, -1, 1), *y = malloc(pooled * sizeof(float));
    float *dx = malloc(f.count * sizeof(float));
    int32_t *argmax = malloc(pooled * sizeof(int32_t));
    double *g = calloc(f.count, sizeof(double)), *ymax = malloc(pooled * sizeof(double));
    char what[160];

    CHECK(backend_fuses_bn_relu_maxpool(ctx, &pd), "%s: the CPU does not fuse it", name);
    batchnorm_relu_maxpool_forward_train(ctx, n, &pd, f.x, f.gamma, f.beta, f.rmean, f.rvar, 0.1f,
                                         (float)f.bc.eps, y, argmax, f.smean, f.sinv);
    size_t outside = 0, not_max = 0;
    for (size_t pl = 0; pl < (size_t)n * c; pl++)
        for (int oh = 0; oh < pd.out_h; oh++)
            for (int ow = 0; ow < pd.out_w; ow++) {
                const size_t o = pl * ohw + oh * pd.out_w + ow;
                double best = 0.0;
                for (int kh = 0; kh < k; kh++)
                    for (int kw = 0; kw < k; kw++) {
                        const double v = f.want[pl * hw + (oh * k + kh) * w + ow * k + kw];
                        best = v > best ? v : best;
                    }
                ymax[o] = best;
                const int a = argmax[o], ah = a / w, aw = a % w;
                outside += !(a >= 0 && ah / k == oh && aw / k == ow && ah < pd.out_h * k &&
                             aw < pd.out_w * k);
                const double at = f.want[pl * hw + (a >= 0 && a < hw ? a : 0)];
                not_max += !(fabs((at > 0 ? at : 0.0) - best) <= FWD_ATOL + FWD_RTOL * best);
            }
    snprintf(what, sizeof what, "%s: forward", name);
    check_array(what, y, ymax, pooled, FWD_ATOL, FWD_RTOL);
    CHECK(outside == 0 && not_max == 0, "%s: %zu argmax outside their windows, %zu not at a "
          "maximum", name, outside, not_max);

    for (size_t o = 0; o < pooled; o++)
        if (y[o] > 0)
            g[o / ohw * hw + argmax[o]] = r[o];
    batchnorm_relu_maxpool_backward(ctx, n, &pd, f.x, r, argmax, f.gamma, f.beta, f.smean, f.sinv,
                                    dx, f.dg, f.db);
    check_bn_backward(name, &f, g, dx);
    check_conv_filter_from_bn(name, ctx, &f, &pd, r, argmax);

    free(r), free(y), free(dx), free(argmax), free(g), free(ymax);
    bn_fixture_free(&f);
}

static void test_bn_relu_pool_case(int n, int c, int h, int w, int k)
{
    char name[96];
    snprintf(name, sizeof name, "batchnorm+relu+maxpool n%d c%d %dx%d k%d", n, c, h, w, k);
    check_bn_relu_pool(name, &ctx1, n, c, h, w, k);
    snprintf(name, sizeof name, "batchnorm+relu+maxpool n%d c%d %dx%d k%d, 2 threads", n, c, h,
             w, k);
    check_bn_relu_pool(name, &ctx2, n, c, h, w, k);
}

/* Where the CPU fuses them: tiling windows on planes of 64 or more. */
static void test_bn_relu_pool_fits(void)
{
    pool2d_desc tiled, overlapping, small;
    pool2d_desc_init(&tiled, 20, 24, 24, 3, 3, 0);
    pool2d_desc_init(&overlapping, 20, 24, 24, 3, 2, 0);
    pool2d_desc_init(&small, 50, 4, 4, 2, 2, 0);
    CHECK(backend_fuses_bn_relu_maxpool(&ctx1, &tiled) &&
              !backend_fuses_bn_relu_maxpool(&ctx1, &overlapping) &&
              !backend_fuses_bn_relu_maxpool(&ctx1, &small),
          "backend_fuses_bn_relu_maxpool: tiled %d, overlapping %d, 4x4 %d",
          backend_fuses_bn_relu_maxpool(&ctx1, &tiled),
          backend_fuses_bn_relu_maxpool(&ctx1, &overlapping),
          backend_fuses_bn_relu_maxpool(&ctx1, &small));
}

/* ---------------- ReLU and dropout ---------------- */

typedef struct act_case {
    size_t count;
    double *x, *r, *keep_scale; /* keep_scale: dropout's per-element factor, NULL for ReLU */
} act_case;

static double act_loss(void *arg)
{
    act_case *ac = arg;
    double l = 0.0;
    for (size_t i = 0; i < ac->count; i++) {
        double y = ac->keep_scale ? ac->x[i] * ac->keep_scale[i] : (ac->x[i] > 0 ? ac->x[i] : 0.0);
        l += y * ac->r[i];
    }
    return l;
}

static void test_relu(void)
{
    const size_t count = 1001;
    float *x = new_floats(count, -1, 1), *r = new_floats(count, -1, 1);
    /* Keep inputs away from the kink, farther than the difference step. */
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] >= 0 ? x[i] + 0.01f : x[i] - 0.01f;
    act_case ac = {.count = count, .x = to_double(x, count), .r = to_double(r, count)};
    float *y = malloc(count * sizeof(float)), *g = malloc(count * sizeof(float));
    double *want = malloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++)
        want[i] = x[i] > 0 ? x[i] : 0.0;
    relu_forward(&ctx1, count, x, y);
    check_array("relu forward", y, want, count, 0.0, 0.0);
    memcpy(g, r, count * sizeof(float));
    relu_backward(&ctx1, count, y, g, g); /* in place: dx aliases dy */
    check_grad("relu backward (in place)", act_loss, &ac, ac.x, count, g);
    free(x), free(r), free(y), free(g), free(want), free(ac.x), free(ac.r);
}

static void test_dropout(void)
{
    const size_t count = 1003; /* not a multiple of the 4 draws per Philox block */
    const float p = (float)test_uniform(0.2, 0.6);
    const philox_key key = philox_make_key(test_seed(), 2, RNG_STREAM_DROPOUT);
    /* A base just below 2^32 so the blocks carry into the counter's high word. */
    const uint64_t counter = 0xFFFFFF00u + (uint64_t)test_uniform(0, 200);
    float *x = new_floats(count, 0.1, 1), *r = new_floats(count, -1, 1);
    act_case ac = {.count = count, .x = to_double(x, count), .r = to_double(r, count)};
    ac.keep_scale = malloc(count * sizeof(double));
    double *want = malloc(count * sizeof(double));
    for (size_t i = 0; i < count; i++) {
        ac.keep_scale[i] = philox_uniform_at(key, counter, i) >= p ? 1.0 / (1.0 - p) : 0.0;
        want[i] = ac.x[i] * ac.keep_scale[i];
    }
    float *y = malloc(count * sizeof(float)), *y2 = malloc(count * sizeof(float));
    float *dx = malloc(count * sizeof(float));
    dropout_forward(&ctx1, count, p, key, counter, x, y);
    check_array("dropout forward", y, want, count, 1e-6, 1e-6);
    dropout_backward(&ctx1, count, p, key, counter, r, dx);
    check_grad("dropout backward", act_loss, &ac, ac.x, count, dx);
    size_t mismatched = 0;
    for (size_t i = 0; i < count; i++)
        mismatched += (y[i] != 0.0f) != (dx[i] != 0.0f);
    CHECK(mismatched == 0, "dropout: %zu elements masked differently in backward", mismatched);
    dropout_forward(&ctx1, count, p, key, counter + 1, x, y2);
    size_t differ = 0;
    for (size_t i = 0; i < count; i++)
        differ += (y[i] != 0.0f) != (y2[i] != 0.0f);
    CHECK(differ > count / 10, "dropout: the next counter changed only %zu of %zu mask bits", differ,
          count);

    /* Keep rate over many elements, on two threads: binomial, within 5 sigma. */
    const size_t big = 1 << 20;
    float *ones = malloc(big * sizeof(float)), *out = malloc(big * sizeof(float));
    float *out1 = malloc(big * sizeof(float));
    for (size_t i = 0; i < big; i++)
        ones[i] = 1.0f;
    dropout_forward(&ctx2, big, p, key, counter, ones, out);
    dropout_forward(&ctx1, big, p, key, counter, ones, out1);
    size_t kept = 0, thread_diff = 0;
    for (size_t i = 0; i < big; i++) {
        kept += out[i] != 0.0f;
        thread_diff += out[i] != out1[i];
    }
    double rate = (double)kept / big, sigma = sqrt(p * (1.0 - p) / big);
    CHECK(fabs(rate - (1.0 - p)) < 5 * sigma, "dropout keep rate %.5f want %.5f (sigma %.5f)", rate,
          1.0 - p, sigma);
    CHECK(thread_diff == 0, "dropout: %zu elements differ between 1 and 2 threads", thread_diff);
    free(x), free(r), free(y), free(y2), free(dx), free(want), free(ones), free(out), free(out1);
    free(ac.x), free(ac.r), free(ac.keep_scale);
}

/* The map bit for bit against its scalar definition (on AVX-512 CPUs, the
 * vector path's), on inputs of both signs (a dropped negative is -0), at
 * sizes around the spans the CPU backend splits (32 and 128 elements; the
 * rest goes one by one) and counters whose blocks carry into the high word
 * at a span's start, inside a span, and wrap around 2^64. */
static void test_dropout_bits(void)
{
    const size_t counts[] = {1, 31, 63, 64, 65, 127, 128, 129, 1000, 163840 + 5};
    const float ps[] = {0.0f, 0.25f, 0.5f};
    const uint64_t counters[] = {0xFFFFFFF0u, 0xFFFFFFF7u, 0xFFFFFFFFFFFFFFF9u,
                                 (uint64_t)test_uniform(0, 1e15)};
    const philox_key key = philox_make_key(test_seed(), 5, RNG_STREAM_DROPOUT);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        const size_t n = counts[ci];
        float *x = new_floats(n, -2, 2), *want = malloc(n * sizeof(float));
        float *y = malloc(n * sizeof(float));
        for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
            for (size_t ki = 0; ki < sizeof counters / sizeof counters[0]; ki++) {
                const float p = ps[pi];
                const uint64_t counter = counters[ki];
                for (size_t i = 0; i < n; i++)
                    want[i] = dropout_elem(x[i], philox_uniform_at(key, counter, i), p);
                for (int threads = 1; threads <= 2; threads++) {
                    dropout_forward(threads == 1 ? &ctx1 : &ctx2, n, p, key, counter, x, y);
                    size_t bad = 0, first = 0;
                    for (size_t i = 0; i < n; i++)
                        if (memcmp(&y[i], &want[i], sizeof(float)) != 0)
                            first = bad++ ? first : i;
                    CHECK(bad == 0,
                          "dropout bits n %zu p %g counter %#llx, %d threads: %zu differ, "
                          "first [%zu] got %.9g want %.9g",
                          n, (double)p, (unsigned long long)counter, threads, bad, first,
                          bad ? (double)y[first] : 0.0, bad ? (double)want[first] : 0.0);
                }
            }
        free(x), free(want), free(y);
    }
}

/* ---------------- linear ---------------- */

typedef struct linear_case {
    int n, in, out;
    double *x, *w, *b, *r;
} linear_case;

static void ref_linear(const linear_case *lc, double *y)
{
    for (int i = 0; i < lc->n; i++)
        for (int o = 0; o < lc->out; o++) {
            double s = lc->b[o];
            for (int j = 0; j < lc->in; j++)
                s += lc->x[i * lc->in + j] * lc->w[o * lc->in + j];
            y[i * lc->out + o] = s;
        }
}

static double linear_loss(void *arg)
{
    linear_case *lc = arg;
    size_t ny = (size_t)lc->n * lc->out;
    double *y = malloc(ny * sizeof(double));
    ref_linear(lc, y);
    double l = dot(y, lc->r, ny);
    free(y);
    return l;
}

static void test_linear(int n, int in, int out)
{
    linear_case lc = {.n = n, .in = in, .out = out};
    const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    float *x = new_floats(nx, -1, 1), *w = new_floats(nw, -1, 1), *b = new_floats(out, -1, 1);
    float *r = new_floats(ny, -1, 1);
    lc.x = to_double(x, nx), lc.w = to_double(w, nw), lc.b = to_double(b, out);
    lc.r = to_double(r, ny);
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dw = malloc(nw * sizeof(float)), *dw2 = malloc(nw * sizeof(float));
    float *db = malloc(out * sizeof(float));
    double *want = malloc(ny * sizeof(double));
    ref_linear(&lc, want);
    linear_forward(&ctx1, n, in, out, x, w, b, y);
    check_array("linear forward", y, want, ny, FWD_ATOL, FWD_RTOL);
    linear_backward(&ctx1, n, in, out, x, w, r, dx, dw, db);
    check_grad("linear backward x", linear_loss, &lc, lc.x, nx, dx);
    check_grad("linear backward w", linear_loss, &lc, lc.w, nw, dw);
    check_grad("linear backward b", linear_loss, &lc, lc.b, out, db);
    linear_backward(&ctx2, n, in, out, x, w, r, NULL, dw2, db);
    check_same("linear backward w, no dx, 2 threads", dw2, dw, nw);
    free(x), free(w), free(b), free(r), free(y), free(dx), free(dw), free(dw2), free(db);
    free(want), free(lc.x), free(lc.w), free(lc.b), free(lc.r);
}

/* ---------------- softmax cross-entropy ---------------- */

typedef struct xent_case {
    int n, classes;
    const int32_t *labels;
    double *z;
} xent_case;

/* Mean over rows of log(sum_j exp(z_j)) - z_label, the sum taken in long double. */
static double xent_loss(void *arg)
{
    xent_case *xc = arg;
    double total = 0.0;
    for (int i = 0; i < xc->n; i++) {
        long double s = 0.0L;
        for (int j = 0; j < xc->classes; j++)
            s += expl((long double)xc->z[i * xc->classes + j]);
        total += (double)(logl(s) - xc->z[i * xc->classes + xc->labels[i]]);
    }
    return total / xc->n;
}

static void test_softmax_xent(void)
{
    const int n = 6, classes = 7;
    float *z = new_floats(n * classes, -3, 3), *g = malloc(n * classes * sizeof(float));
    int32_t labels[6];
    int want_correct = 0;
    for (int i = 0; i < n; i++) {
        labels[i] = (int32_t)test_uniform(0, classes);
        int top = 0;
        for (int j = 1; j < classes; j++)
            top = z[i * classes + j] > z[i * classes + top] ? j : top;
        want_correct += top == labels[i];
    }
    xent_case xc = {.n = n, .classes = classes, .labels = labels, .z = to_double(z, n * classes)};
    int correct = -1;
    float loss = softmax_xent(&ctx1, n, classes, z, labels, g, &correct);
    CHECK_CLOSE(loss, xent_loss(&xc), FWD_ATOL, FWD_RTOL, "softmax_xent loss");
    CHECK(correct == want_correct, "softmax_xent correct %d want %d", correct, want_correct);
    check_grad("softmax_xent dlogits", xent_loss, &xc, xc.z, n * classes, g);

    /* Shifting a row changes nothing; large shifts must not overflow. */
    float *shifted = malloc(n * classes * sizeof(float));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < classes; j++)
            shifted[i * classes + j] = z[i * classes + j] + (i % 2 ? 1000.0f : -1000.0f);
    float *g2 = malloc(n * classes * sizeof(float));
    float loss2 = softmax_xent(&ctx1, n, classes, shifted, labels, g2, NULL);
    /* 1000 + z keeps about 1e-4 of z's precision in float. */
    CHECK(isfinite(loss2), "softmax_xent with logits near +-1000: loss %g", loss2);
    CHECK_CLOSE(loss2, loss, 1e-3, 0.0, "softmax_xent loss with shifted logits");
    size_t bad = 0;
    for (int i = 0; i < n * classes; i++)
        bad += !(fabs(g2[i] - g[i]) <= 1e-4);
    CHECK(bad == 0, "softmax_xent: %zu dlogits moved with shifted logits", bad);
    CHECK(softmax_xent(&ctx1, n, classes, z, labels, NULL, NULL) == loss,
          "softmax_xent without outputs gives another loss");
    free(z), free(g), free(g2), free(shifted), free(xc.z);
}

int main(void)
{
    test_init("ops");
    backend_ctx_init_cpu(&ctx2, 2);
    backend_ctx_init_cpu(&ctx1, 1);
    test_gemm();
    test_conv_case(3, 3, 7, 6, 4, 3, 2, 1, 1);
    test_conv_case(2, 2, 9, 8, 3, 3, 1, 1, 1);
    test_conv_case(2, 1, 12, 11, 3, 5, 1, 0, 1); /* LeNet's first layer, smaller */
    /* LeNet's two shapes: the stride-1 unpadded fast paths for 24- and 4-wide
     * outputs, on enough images to be split across threads (5: unevenly). */
    test_conv_case(5, 1, 28, 28, 4, 5, 1, 0, 1);
    test_conv_case(5, 20, 8, 8, 8, 5, 1, 0, 1);
    /* conv.c's direct filter gradient (out_w a multiple of 8, thin filters):
     * an odd output count, 2 channels, k 3 without bias. */
    test_conv_case(3, 2, 19, 20, 5, 5, 1, 0, 1);
    test_conv_case(4, 1, 9, 10, 3, 3, 1, 0, 0);
    test_conv_case(2, 4, 7, 7, 3, 1, 2, 0, 0);   /* WRN's 1x1 shortcut */
    test_conv_case(2, 3, 8, 5, 2, 3, 2, 1, 0);   /* even input, stride 2 */
    /* 32 or more channels in and out: oneDNN's primitives, where built in. */
    test_conv_case(3, 32, 10, 10, 40, 3, 1, 1, 1);
    test_conv_case(3, 32, 8, 8, 40, 3, 2, 1, 0);
    test_conv_case(3, 40, 9, 7, 32, 3, 2, 1, 1); /* odd sizes, stride 2 */
    test_conv_case(3, 32, 8, 8, 40, 1, 2, 0, 0); /* WRN's 1x1 shortcut */
    test_conv_chunks();
    test_concurrent_replicas(6, 7);
    test_concurrent_replicas(32, 40);
    test_conv_plan_reuse();
    test_pool_case(1, 2, 3, 7, 6, 3, 2, 1, 4, 3);
    test_pool_case(1, 2, 2, 24, 24, 3, 3, 0, 8, 8); /* LeNet's first pool */
    test_pool_case(1, 2, 3, 5, 7, 2, 2, 0, 2, 3);   /* floor drops the last row and column */
    test_pool_case(1, 2, 2, 9, 8, 4, 4, 0, 2, 2);   /* tiling windows of any other size */
    test_pool_case(0, 2, 3, 7, 6, 3, 2, 1, 4, 3);
    test_pool_case(0, 2, 3, 5, 7, 2, 2, 0, 2, 3);
    test_bn_case(4, 3, 35, 0);
    test_bn_case(6, 5, 1, 0);
    test_bn_case(8, 70, 1, 20); /* hw = 1 spans two channel blocks */
    test_bn_case(5, 2, 9, 100);
    /* Big enough for 2 threads to split (CPU_PARALLEL_MIN). */
    test_bn_relu_case(32, 5, 221);
    test_bn_relu_case(128, 300, 1); /* hw = 1: five channel blocks */
    test_bn_relu_pool_case(20, 3, 24, 24, 3); /* LeNet's conv1 maps, 2 threads splitting */
    test_bn_relu_pool_case(4, 2, 11, 13, 2);  /* floor mode: a row and a column left out */
    test_bn_relu_pool_case(3, 2, 17, 16, 4);
    test_bn_relu_pool_fits();
    test_relu();
    test_dropout();
    test_dropout_bits();
    test_linear(5, 7, 4);
    test_softmax_xent();
    backend_ctx_free(&ctx1);
    backend_ctx_free(&ctx2);
    return test_main_end();
}

/* The CPU convolutions against float64 references written here, on one and
 * two threads, in chunks, and from replica threads at once (tolerances:
 * ops_check.h). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "cpu/cpu_ops.h"
#include "ops_check.h"
#include "testutil.h"

static backend_ctx ctx1, ctx2; /* 1 and 2 math threads */

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

int main(void)
{
    test_init("ops_conv");
    backend_ctx_init_cpu(&ctx2, 2);
    backend_ctx_init_cpu(&ctx1, 1);
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
    backend_ctx_free(&ctx1);
    backend_ctx_free(&ctx2);
    return test_main_end();
}

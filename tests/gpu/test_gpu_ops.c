/* Every op of the CUDA backend against the CPU backend (which the unit tests
 * check against float64), through backend.h on two contexts: fresh random
 * inputs are copied to both sides, the op runs on each, and every output
 * (and every buffer the op may touch) must agree. fp32 mode throughout,
 * except the default job setup (tf32, non-deterministic: GEMM, linear and
 * every convolution direction, check_default_setup) and the public GEMM at bf16
 * precision, whose operands stay fp32 (see check_bf16; the ops on bf16
 * activations are test_gpu_bf16's).
 *
 * Tolerances, |gpu - cpu| <= atol + rtol |cpu| with inputs in [-1, 1):
 *  - sums of `terms` products (GEMM, convolution, bias gradients) differ in
 *    summation order only: atol = 1e-6 per term, rtol 1e-5; an indexing
 *    mistake errs by the size of the values themselves (~ sqrt(terms) / 3);
 *  - pooling and the element-wise ops visit the same values in the same
 *    order as the CPU, without FMA contraction: max pooling and argmax
 *    exactly, the rest within 1e-6;
 *  - batch norm reduces in double on both sides but in other orders and
 *    with other variance formulas: 1e-4 on outputs (xhat amplifies the
 *    statistics' rounding by invstd), 1e-5 relative on the statistics; the
 *    split kernels (batchnorm_split) sum in fp32 within a block and in
 *    double across blocks, under the same bounds, and repeat bit for bit;
 *  - softmax cross-entropy works in double: loss 1e-6 relative, dlogits
 *    1e-7 + 1e-5 relative, hits exactly.
 * Exits 77 (skipped) when there is no CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

static backend_ctx cpu, gpu;
static int quiet; /* compare() prints its largest error unless set */

/* A float tensor on the host (what the CPU op works on) and its device twin. */
typedef struct buf {
    float *h, *d;
    size_t n;
} buf;

static buf make(size_t n, double lo, double hi)
{
    buf b = {malloc((n ? n : 1) * sizeof(float)), backend_alloc(&gpu, n * sizeof(float)), n};
    if (!b.h || !b.d) {
        fprintf(stderr, "out of memory for %zu floats: %s\n", n, gpu.err);
        exit(1);
    }
    test_fill_uniform(b.h, n, lo, hi);
    backend_upload(&gpu, b.d, b.h, n * sizeof(float));
    return b;
}

static void drop(buf *b)
{
    free(b->h);
    backend_free(&gpu, b->d);
}

/* Compare b's device copy with its host copy; returns the largest error. */
static double compare(const char *what, const buf *b, double atol, double rtol)
{
    float *got = malloc((b->n ? b->n : 1) * sizeof(float));
    backend_download(&gpu, got, b->d, b->n * sizeof(float));
    CHECK(!backend_failed(&gpu), "%s: %s", what, gpu.err);
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t i = 0; i < b->n && !backend_failed(&gpu); i++) {
        const double e = fabs((double)got[i] - b->h[i]);
        worst = e > worst || isnan(e) ? e : worst;
        if (!(e <= atol + rtol * fabs((double)b->h[i])) && bad++ == 0)
            first = i;
    }
    CHECK(bad == 0, "%s: %zu of %zu differ, first [%zu] gpu %.9g cpu %.9g", what, bad, b->n,
          first, (double)got[first], (double)b->h[first]);
    if (!quiet)
        printf("  %-40s max |gpu - cpu| %.3g (atol %.3g)\n", what, worst, atol);
    free(got);
    return worst;
}

/* Byte-for-byte equality of two device buffers (repeat runs). */
static void check_same_bits(const char *what, const float *d1, const float *d2, size_t n)
{
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    backend_download(&gpu, a, d1, n * sizeof(float));
    backend_download(&gpu, b, d2, n * sizeof(float));
    CHECK(memcmp(a, b, n * sizeof(float)) == 0, "%s: repeat run differs", what);
    free(a);
    free(b);
}

static void check_gemm(void)
{
    const int M = 37, N = 29, K = 53;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* Leading dimensions past the minimum, so the strides matter. */
            const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
            buf A = make((size_t)(ta ? K : M) * lda, -1, 1);
            buf B = make((size_t)(tb ? N : K) * ldb, -1, 1);
            buf C = make((size_t)M * ldc, -1, 1);
            const float alpha = 0.7f, beta = -0.4f;
            gemm(&cpu, ta, tb, M, N, K, alpha, A.h, lda, B.h, ldb, beta, C.h, ldc);
            gemm(&gpu, ta, tb, M, N, K, alpha, A.d, lda, B.d, ldb, beta, C.d, ldc);
            char what[64];
            snprintf(what, sizeof what, "gemm %c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M,
                     N, K);
            compare(what, &C, 1e-6 * K, 1e-5);
            drop(&A);
            drop(&B);
            drop(&C);
        }
}

/* A linear layer's operands and results, fresh random on both sides. */
typedef struct linear_bufs {
    buf x, w, b, y, dy, dx, dw, db;
} linear_bufs;

static linear_bufs linear_make(int n, int in, int out)
{
    return (linear_bufs){make((size_t)n * in, -1, 1), make((size_t)out * in, -1, 1),
                         make(out, -1, 1), make((size_t)n * out, -1, 1),
                         make((size_t)n * out, -1, 1), make((size_t)n * in, -1, 1),
                         make((size_t)out * in, -1, 1), make(out, -1, 1)};
}

static void linear_drop(linear_bufs *t)
{
    buf *all[] = {&t->x, &t->w, &t->b, &t->y, &t->dy, &t->dx, &t->dw, &t->db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

static void check_linear(void)
{
    const int n = 5, in = 37, out = 11;
    linear_bufs t = linear_make(n, in, out);
    buf x = t.x, w = t.w, b = t.b, y = t.y, dy = t.dy, dx = t.dx, dw = t.dw, db = t.db;
    linear_forward(&cpu, n, in, out, x.h, w.h, b.h, y.h);
    linear_forward(&gpu, n, in, out, x.d, w.d, b.d, y.d);
    compare("linear_forward", &y, 1e-6 * in, 1e-5);
    linear_forward(&cpu, n, in, out, x.h, w.h, NULL, y.h);
    linear_forward(&gpu, n, in, out, x.d, w.d, NULL, y.d);
    compare("linear_forward, no bias", &y, 1e-6 * in, 1e-5);
    linear_backward(&cpu, n, in, out, x.h, w.h, dy.h, dx.h, dw.h, db.h);
    linear_backward(&gpu, n, in, out, x.d, w.d, dy.d, dx.d, dw.d, db.d);
    compare("linear_backward dx", &dx, 1e-6 * out, 1e-5);
    compare("linear_backward dw", &dw, 1e-6 * n, 1e-5);
    compare("linear_backward db", &db, 1e-6 * n, 1e-5);
    /* No dx, no db: dw alone, the others untouched on both sides (each side
     * starts from the same dx and db, so untouched means equal bits). */
    test_fill_uniform(dw.h, dw.n, -1, 1);
    backend_upload(&gpu, dw.d, dw.h, dw.n * sizeof(float));
    backend_upload(&gpu, dx.d, dx.h, dx.n * sizeof(float));
    backend_upload(&gpu, db.d, db.h, db.n * sizeof(float));
    linear_backward(&cpu, n, in, out, x.h, w.h, dy.h, NULL, dw.h, NULL);
    linear_backward(&gpu, n, in, out, x.d, w.d, dy.d, NULL, dw.d, NULL);
    compare("linear_backward dw only", &dw, 1e-6 * n, 1e-5);
    compare("linear_backward dx untouched", &dx, 0, 0);
    compare("linear_backward db untouched", &db, 0, 0);
    linear_drop(&t);
}

typedef struct conv_case {
    const char *name;
    int n, in_c, h, w, out_c, k, stride, pad, bias;
} conv_case;

static void check_conv(const conv_case *t)
{
    conv2d_desc d;
    conv2d_desc_init(&d, t->in_c, t->h, t->w, t->out_c, t->k, t->stride, t->pad);
    const size_t xs = (size_t)t->n * t->in_c * t->h * t->w;
    const size_t ys = (size_t)t->n * t->out_c * d.out_h * d.out_w;
    const size_t ws = (size_t)t->out_c * t->in_c * t->k * t->k;
    buf x = make(xs, -1, 1), w = make(ws, -1, 1), b = make(t->out_c, -1, 1), y = make(ys, -1, 1);
    buf dy = make(ys, -1, 1), dx = make(xs, -1, 1), dw = make(ws, -1, 1);
    buf db = make(t->out_c, -1, 1), again = make(ws > ys ? ws : ys, 0, 0);
    const float *bias_h = t->bias ? b.h : NULL, *bias_d = t->bias ? b.d : NULL;
    char what[96];

    conv2d_forward(&cpu, &d, t->n, x.h, w.h, bias_h, y.h);
    conv2d_forward(&gpu, &d, t->n, x.d, w.d, bias_d, y.d);
    snprintf(what, sizeof what, "conv %s forward", t->name);
    compare(what, &y, 1e-6 * t->in_c * t->k * t->k, 1e-5);
    /* The cached plan, a second time: the same bits. */
    conv2d_forward(&gpu, &d, t->n, x.d, w.d, bias_d, again.d);
    check_same_bits(what, y.d, again.d, ys);

    conv2d_backward_data(&cpu, &d, t->n, dy.h, w.h, dx.h);
    conv2d_backward_data(&gpu, &d, t->n, dy.d, w.d, dx.d);
    snprintf(what, sizeof what, "conv %s backward data", t->name);
    compare(what, &dx, 1e-6 * t->out_c * t->k * t->k, 1e-5);

    conv2d_backward_filter(&cpu, &d, t->n, x.h, dy.h, dw.h, t->bias ? db.h : NULL);
    conv2d_backward_filter(&gpu, &d, t->n, x.d, dy.d, dw.d, t->bias ? db.d : NULL);
    const size_t terms = (size_t)t->n * d.out_h * d.out_w;
    snprintf(what, sizeof what, "conv %s backward filter dw", t->name);
    compare(what, &dw, 1e-6 * terms, 1e-5);
    /* Deterministic algorithms only (the context asked for them). */
    conv2d_backward_filter(&gpu, &d, t->n, x.d, dy.d, again.d, NULL);
    check_same_bits(what, dw.d, again.d, ws);
    snprintf(what, sizeof what, "conv %s backward filter db", t->name);
    compare(what, &db, 1e-6 * terms, 1e-5); /* untouched when there is no bias */
    buf *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db, &again};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

/* The error of b's device copy against its host copy, relative to the
 * host copy's size: the largest error over the largest |value| (max), and
 * the errors' RMS over the values' RMS (rms). NaN when the device has one. */
typedef struct rel_err {
    double max, rms;
} rel_err;

static rel_err relative_error(const buf *b)
{
    float *got = malloc((b->n ? b->n : 1) * sizeof(float));
    backend_download(&gpu, got, b->d, b->n * sizeof(float));
    double err2 = 0.0, ref2 = 0.0, err_max = 0.0, ref_max = 0.0;
    for (size_t i = 0; i < b->n; i++) {
        const double e = fabs((double)got[i] - b->h[i]), r = fabs((double)b->h[i]);
        err2 += e * e;
        ref2 += r * r;
        err_max = e > err_max || isnan(e) ? e : err_max;
        ref_max = r > ref_max ? r : ref_max;
    }
    free(got);
    return (rel_err){err_max / ref_max, sqrt(err2 / ref2)};
}

/* The four transpositions of a GEMM at the context's precision, judged by
 * `judge` against the CPU's fp32. Multiples of 8, as a model's layers
 * have: shapes tensor cores take. */
static void check_gemms(const char *tag, void (*judge)(const char *what, const buf *b))
{
    const int M = 96, N = 64, K = 256;
    char what[64];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
            buf A = make((size_t)M * K, -1, 1), B = make((size_t)K * N, -1, 1);
            buf C = make((size_t)M * N, -1, 1);
            gemm(&cpu, ta, tb, M, N, K, 0.7f, A.h, lda, B.h, ldb, -0.4f, C.h, ldc);
            gemm(&gpu, ta, tb, M, N, K, 0.7f, A.d, lda, B.d, ldb, -0.4f, C.d, ldc);
            snprintf(what, sizeof what, "gemm %c%c %dx%dx%d %s", ta ? 'T' : 'N',
                     tb ? 'T' : 'N', M, N, K, tag);
            judge(what, &C);
            drop(&A);
            drop(&B);
            drop(&C);
        }
}

/* The default job setup, precision tf32 and deterministic false: TF32
 * keeps 11 significant bits of each input (a relative rounding of up to
 * 2^-11 = 4.9e-4), so a product is off by up to ~1e-3 of itself and a sum
 * of K such terms with random signs by ~5e-4 of a sum's typical size; the
 * fp32 accumulation and a non-deterministic order add ~1e-6. Against the
 * CPU's fp32: RMS relative error within TF32_RMS, the largest error within
 * TF32_MAX of the largest |value|. An indexing mistake or fp16 inputs give
 * errors of the values' own size; plain fp32 gives ~1e-7, which passes. */
#define TF32_RMS 5e-3
#define TF32_MAX 2e-2

static void check_tf32(const char *what, const buf *b)
{
    const rel_err e = relative_error(b);
    CHECK(!backend_failed(&gpu) && e.rms <= TF32_RMS && e.max <= TF32_MAX,
          "%s: RMS relative error %.3g, largest %.3g of the largest value (tf32 bounds %.3g, "
          "%.3g): %s", what, e.rms, e.max, TF32_RMS, TF32_MAX, gpu.err);
    printf("  %-40s relative error %.3g, largest %.3g\n", what, e.rms, e.max);
}

static void check_default_setup(void)
{
    const int saved_det = gpu.deterministic;
    gpu.precision = PRECISION_TF32;
    gpu.deterministic = 0;
    char what[96];
    check_gemms("tf32", check_tf32);

    const int n = 64, in = 400, out = 120; /* LeNet's first linear layer */
    linear_bufs lin = linear_make(n, in, out);
    buf x = lin.x, w = lin.w, b = lin.b, y = lin.y, dy = lin.dy, dx = lin.dx, dw = lin.dw,
        db = lin.db;
    linear_forward(&cpu, n, in, out, x.h, w.h, b.h, y.h);
    linear_forward(&gpu, n, in, out, x.d, w.d, b.d, y.d);
    check_tf32("linear forward tf32", &y);
    linear_backward(&cpu, n, in, out, x.h, w.h, dy.h, dx.h, dw.h, db.h);
    linear_backward(&gpu, n, in, out, x.d, w.d, dy.d, dx.d, dw.d, db.d);
    check_tf32("linear backward dx tf32", &dx);
    check_tf32("linear backward dw tf32", &dw);
    check_tf32("linear backward db tf32", &db);
    linear_drop(&lin);

    static const conv_case convs[] = {
        {"lenet 6x12x12->16 k5", 16, 6, 12, 12, 16, 5, 1, 0, 1},
        {"64x16x16->64 k3 p1", 2, 64, 16, 16, 64, 3, 1, 1, 0},
        {"wrn 16x32x32->160 k3 p1", 4, 16, 32, 32, 160, 3, 1, 1, 1},
        {"96x16x16->192 k3 s2 p1", 2, 96, 16, 16, 192, 3, 2, 1, 1},
    };
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++) {
        const conv_case *t = &convs[i];
        conv2d_desc d;
        conv2d_desc_init(&d, t->in_c, t->h, t->w, t->out_c, t->k, t->stride, t->pad);
        const size_t xs = (size_t)t->n * t->in_c * t->h * t->w;
        const size_t ys = (size_t)t->n * t->out_c * d.out_h * d.out_w;
        const size_t ws = (size_t)t->out_c * t->in_c * t->k * t->k;
        buf cx = make(xs, -1, 1), cw = make(ws, -1, 1), cb = make(t->out_c, -1, 1);
        buf cy = make(ys, -1, 1), cdy = make(ys, -1, 1), cdx = make(xs, -1, 1);
        buf cdw = make(ws, -1, 1), cdb = make(t->out_c, -1, 1);
        const float *bias_h = t->bias ? cb.h : NULL, *bias_d = t->bias ? cb.d : NULL;
        conv2d_forward(&cpu, &d, t->n, cx.h, cw.h, bias_h, cy.h);
        conv2d_forward(&gpu, &d, t->n, cx.d, cw.d, bias_d, cy.d);
        snprintf(what, sizeof what, "conv %s forward tf32", t->name);
        check_tf32(what, &cy);
        conv2d_backward_data(&cpu, &d, t->n, cdy.h, cw.h, cdx.h);
        conv2d_backward_data(&gpu, &d, t->n, cdy.d, cw.d, cdx.d);
        snprintf(what, sizeof what, "conv %s backward data tf32", t->name);
        check_tf32(what, &cdx);
        conv2d_backward_filter(&cpu, &d, t->n, cx.h, cdy.h, cdw.h, t->bias ? cdb.h : NULL);
        conv2d_backward_filter(&gpu, &d, t->n, cx.d, cdy.d, cdw.d, t->bias ? cdb.d : NULL);
        snprintf(what, sizeof what, "conv %s backward filter tf32", t->name);
        check_tf32(what, &cdw);
        if (t->bias) {
            snprintf(what, sizeof what, "conv %s bias gradient tf32", t->name);
            check_tf32(what, &cdb);
        }
        buf *all[] = {&cx, &cw, &cb, &cy, &cdy, &cdx, &cdw, &cdb};
        for (size_t j = 0; j < sizeof all / sizeof *all; j++)
            drop(all[j]);
    }
    gpu.precision = PRECISION_FP32;
    gpu.deterministic = saved_det;
}

/* bf16 keeps 8 significant bits of each input, a relative rounding error up
 * to 2^-9, so a product of two is off by up to ~2^-8 of itself; the fp32
 * accumulation adds nothing comparable. The K terms' errors are independent,
 * so a sum is off by ~2^-8 of a sum's typical size whatever K. Simulated
 * with inputs uniform in [-1, 1) and K from 5 to 2048: RMS relative error
 * 2.0e-3 for a GEMM, 2.7e-3 for a convolution (whose result is rounded to
 * bf16 once more), the largest error under 0.7% of the largest |value| even
 * if inputs were truncated rather than rounded. So, against the CPU's fp32,
 * the largest error is within 2e-2 of the largest |value|. Less error than
 * bf16's is no failure: CUBLAS_COMPUTE_32F_FAST_16BF allows bf16 without
 * forcing it, and on an H200 (cuBLAS 13.0) it gave 2.6e-4, TF32's accuracy. */

static void check_bf16(const char *what, const buf *b)
{
    const rel_err e = relative_error(b);
    CHECK(!backend_failed(&gpu) && e.max <= 2e-2,
          "%s: largest error %.3g of the largest value, RMS relative error %.3g "
          "(bf16: about 2e-3): %s", what, e.max, e.rms, gpu.err);
    printf("  %-40s relative error %.3g, largest %.3g\n", what, e.rms, e.max);
}

static void check_gemm_bf16(void)
{
    gpu.precision = PRECISION_BF16;
    check_gemms("bf16", check_bf16);
    gpu.precision = PRECISION_FP32;
}

/* An int32 tensor on both sides. */
static int32_t *int_buf(size_t n, int32_t **host)
{
    *host = malloc((n ? n : 1) * sizeof(int32_t));
    return backend_alloc(&gpu, n * sizeof(int32_t));
}

static void compare_ints(const char *what, const int32_t *d, const int32_t *h, size_t n)
{
    int32_t *got = malloc((n ? n : 1) * sizeof(int32_t));
    backend_download(&gpu, got, d, n * sizeof(int32_t));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != h[i] && bad++ == 0)
            first = i;
    CHECK(bad == 0, "%s: %zu of %zu differ, first [%zu] gpu %d cpu %d", what, bad, n, first,
          (int)got[first], (int)h[first]);
    free(got);
}

static void check_pool(int n, int c, int h, int w, int k, int stride, int pad)
{
    pool2d_desc d;
    pool2d_desc_init(&d, c, h, w, k, stride, pad);
    const size_t xs = (size_t)n * c * h * w, ys = (size_t)n * c * d.out_h * d.out_w;
    buf x = make(xs, -1, 1), y = make(ys, -1, 1), dy = make(ys, -1, 1), dx = make(xs, -1, 1);
    int32_t *am_h, *am_d = int_buf(ys, &am_h);
    char what[96];
    snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d", n, c, h, w, k, stride, pad);
    maxpool2d_forward(&cpu, &d, n, x.h, y.h, am_h);
    maxpool2d_forward(&gpu, &d, n, x.d, y.d, am_d);
    compare(what, &y, 0, 0);
    compare_ints(what, am_d, am_h, ys);
    maxpool2d_backward(&cpu, &d, n, dy.h, am_h, dx.h);
    maxpool2d_backward(&gpu, &d, n, dy.d, am_d, dx.d);
    compare("  backward", &dx, 1e-6, 0);
    snprintf(what, sizeof what, "avgpool %dx%dx%dx%d k%d s%d p%d", n, c, h, w, k, stride, pad);
    avgpool2d_forward(&cpu, &d, n, x.h, y.h);
    avgpool2d_forward(&gpu, &d, n, x.d, y.d);
    compare(what, &y, 1e-6, 0);
    avgpool2d_backward(&cpu, &d, n, dy.h, dx.h);
    avgpool2d_backward(&gpu, &d, n, dy.d, dx.d);
    compare("  backward", &dx, 1e-6, 0);
    free(am_h);
    backend_free(&gpu, am_d);
    drop(&x);
    drop(&y);
    drop(&dy);
    drop(&dx);
}

/* The buffers of a training batch norm: inputs from fresh random values
 * (x offset far from 0, as after a ReLU: the variance must not cancel),
 * outputs zero. */
typedef struct bn_bufs {
    buf x, y, dy, dx, gamma, beta, rmean, rvar, smean, sinv, dgamma, dbeta;
} bn_bufs;

static bn_bufs bn_make(int n, int c, int hw)
{
    const size_t count = (size_t)n * c * hw;
    bn_bufs t;
    t.x = make(count, 4, 6), t.y = make(count, 0, 0), t.dy = make(count, -1, 1);
    t.dx = make(count, 0, 0), t.gamma = make(c, 0.5, 1.5), t.beta = make(c, -1, 1);
    t.rmean = make(c, -1, 1), t.rvar = make(c, 0.5, 2), t.smean = make(c, 0, 0);
    t.sinv = make(c, 0, 0), t.dgamma = make(c, 0, 0), t.dbeta = make(c, 0, 0);
    return t;
}

static void bn_drop(bn_bufs *t)
{
    buf *all[] = {&t->x, &t->y, &t->dy, &t->dx, &t->gamma, &t->beta, &t->rmean, &t->rvar,
                  &t->smean, &t->sinv, &t->dgamma, &t->dbeta};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

/* The forward's outputs, after `what` (y) is compared. */
static void bn_compare_forward(const char *what, bn_bufs *t)
{
    compare(what, &t->y, 1e-4, 1e-4);
    compare("  save_mean", &t->smean, 1e-6, 1e-6);
    compare("  save_invstd", &t->sinv, 0, 1e-5);
    compare("  running_mean", &t->rmean, 1e-6, 1e-5);
    compare("  running_var", &t->rvar, 1e-6, 1e-5);
}

static void bn_compare_backward(bn_bufs *t)
{
    compare("  backward dx", &t->dx, 1e-4, 1e-4);
    compare("  backward dgamma", &t->dgamma, 1e-4, 1e-4);
    compare("  backward dbeta", &t->dbeta, 1e-5, 1e-5);
}

static void check_batchnorm(int n, int c, int hw)
{
    bn_bufs t = bn_make(n, c, hw);
    const float momentum = 0.1f, eps = 1e-5f;
    char what[96];
    snprintf(what, sizeof what, "batchnorm n=%d c=%d hw=%d train y", n, c, hw);
    batchnorm_forward_train(&cpu, n, c, hw, t.x.h, t.gamma.h, t.beta.h, t.rmean.h, t.rvar.h,
                            momentum, eps, t.y.h, t.smean.h, t.sinv.h);
    batchnorm_forward_train(&gpu, n, c, hw, t.x.d, t.gamma.d, t.beta.d, t.rmean.d, t.rvar.d,
                            momentum, eps, t.y.d, t.smean.d, t.sinv.d);
    bn_compare_forward(what, &t);
    batchnorm_forward_infer(&cpu, n, c, hw, t.x.h, t.gamma.h, t.beta.h, t.rmean.h, t.rvar.h, eps,
                            t.y.h);
    batchnorm_forward_infer(&gpu, n, c, hw, t.x.d, t.gamma.d, t.beta.d, t.rmean.d, t.rvar.d, eps,
                            t.y.d);
    compare("  infer y", &t.y, 1e-5, 1e-5);
    batchnorm_backward(&cpu, n, c, hw, t.x.h, t.dy.h, t.gamma.h, t.smean.h, t.sinv.h, t.dx.h,
                       t.dgamma.h, t.dbeta.h);
    batchnorm_backward(&gpu, n, c, hw, t.x.d, t.dy.d, t.gamma.d, t.smean.d, t.sinv.d, t.dx.d,
                       t.dgamma.d, t.dbeta.d);
    bn_compare_backward(&t);
    bn_drop(&t);
}

/* An empty batch has nothing to sum: dgamma and dbeta come out 0 on both
 * sides (the CPU writes its zero sums; the GPU must not leave them as they
 * were). */
static void check_batchnorm_empty(int c, int hw)
{
    buf x = make(1, 0, 1), dy = make(1, 0, 1), dx = make(1, 0, 1), gamma = make(c, 0.5, 1.5);
    buf smean = make(c, -1, 1), sinv = make(c, 0.5, 2), dgamma = make(c, 1, 2);
    buf dbeta = make(c, 1, 2);
    batchnorm_backward(&cpu, 0, c, hw, x.h, dy.h, gamma.h, smean.h, sinv.h, dx.h, dgamma.h,
                       dbeta.h);
    batchnorm_backward(&gpu, 0, c, hw, x.d, dy.d, gamma.d, smean.d, sinv.d, dx.d, dgamma.d,
                       dbeta.d);
    for (int ch = 0; ch < c; ch++)
        CHECK(dgamma.h[ch] == 0.0f && dbeta.h[ch] == 0.0f, "cpu: empty batch channel %d: "
              "dgamma %g dbeta %g", ch, (double)dgamma.h[ch], (double)dbeta.h[ch]);
    compare("batchnorm n=0 backward dgamma", &dgamma, 0, 0);
    compare("  backward dbeta", &dbeta, 0, 0);
    buf *all[] = {&x, &dy, &dx, &gamma, &smean, &sinv, &dgamma, &dbeta};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

/* Batch norm with the ReLU after it fused (batchnorm_relu_*, the split
 * kernels') against the CPU's fused passes. Backward takes the CPU's saved
 * statistics on both sides, so that both recompute the same ReLU mask
 * (a x + b > 0 in fp32 from the same floats) and differ only in the sums. */
static void check_batchnorm_relu(int n, int c, int hw)
{
    bn_bufs t = bn_make(n, c, hw);
    const size_t count = (size_t)n * c * hw;
    char what[96];
    snprintf(what, sizeof what, "batchnorm+relu n=%d c=%d hw=%d train y", n, c, hw);
    batchnorm_relu_forward_train(&cpu, n, c, hw, t.x.h, t.gamma.h, t.beta.h, t.rmean.h,
                                 t.rvar.h, 0.1f, 1e-5f, t.y.h, t.smean.h, t.sinv.h);
    batchnorm_relu_forward_train(&gpu, n, c, hw, t.x.d, t.gamma.d, t.beta.d, t.rmean.d,
                                 t.rvar.d, 0.1f, 1e-5f, t.y.d, t.smean.d, t.sinv.d);
    bn_compare_forward(what, &t);
    backend_upload(&gpu, t.smean.d, t.smean.h, (size_t)c * sizeof(float));
    backend_upload(&gpu, t.sinv.d, t.sinv.h, (size_t)c * sizeof(float));
    backend_upload(&gpu, t.y.d, t.y.h, count * sizeof(float));
    batchnorm_relu_backward(&cpu, n, c, hw, t.x.h, t.y.h, t.dy.h, t.gamma.h, t.beta.h, t.smean.h,
                            t.sinv.h, t.dx.h, t.dgamma.h, t.dbeta.h);
    batchnorm_relu_backward(&gpu, n, c, hw, t.x.d, t.y.d, t.dy.d, t.gamma.d, t.beta.d, t.smean.d,
                            t.sinv.d, t.dx.d, t.dgamma.d, t.dbeta.d);
    bn_compare_backward(&t);
    bn_drop(&t);
}

/* Two runs of the training batch norm (relu: fused), forward and backward,
 * give the same bits in every output. */
static void check_batchnorm_repeats(int n, int c, int hw, int relu)
{
    const size_t count = (size_t)n * c * hw;
    buf x = make(count, 4, 6), dy = make(count, -1, 1), gamma = make(c, 0.5, 1.5);
    buf beta = make(c, -1, 1), rm0 = make(c, -1, 1);
    buf out[2][7]; /* y, dx, dy (overwritable), running mean and var, dgamma, dbeta */
    buf stats[2][2];
    for (int r = 0; r < 2; r++) {
        buf *o = out[r];
        o[0] = make(count, 0, 0), o[1] = make(count, 0, 0), o[2] = make(count, 0, 0);
        o[3] = make(c, 0, 0), o[4] = make(c, 0, 0), o[5] = make(c, 0, 0), o[6] = make(c, 0, 0);
        stats[r][0] = make(c, 0, 0), stats[r][1] = make(c, 0, 0);
        backend_copy(&gpu, o[2].d, dy.d, count * sizeof(float));
        backend_copy(&gpu, o[3].d, rm0.d, (size_t)c * sizeof(float));
        backend_copy(&gpu, o[4].d, rm0.d, (size_t)c * sizeof(float));
        if (relu) {
            batchnorm_relu_forward_train(&gpu, n, c, hw, x.d, gamma.d, beta.d, o[3].d, o[4].d,
                                         0.1f, 1e-5f, o[0].d, stats[r][0].d, stats[r][1].d);
            batchnorm_relu_backward(&gpu, n, c, hw, x.d, o[0].d, o[2].d, gamma.d, beta.d,
                                    stats[r][0].d, stats[r][1].d, o[1].d, o[5].d, o[6].d);
        } else {
            batchnorm_forward_train(&gpu, n, c, hw, x.d, gamma.d, beta.d, o[3].d, o[4].d, 0.1f,
                                    1e-5f, o[0].d, stats[r][0].d, stats[r][1].d);
            batchnorm_backward(&gpu, n, c, hw, x.d, o[2].d, gamma.d, stats[r][0].d,
                               stats[r][1].d, o[1].d, o[5].d, o[6].d);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "batchnorm%s n=%d c=%d hw=%d", relu ? "+relu" : "", n, c, hw);
    for (int k = 0; k < 7; k++)
        check_same_bits(what, out[0][k].d, out[1][k].d, out[0][k].n);
    for (int k = 0; k < 2; k++)
        check_same_bits(what, stats[0][k].d, stats[1][k].d, (size_t)c);
    printf("  %-40s two runs: the same bits\n", what);
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 7; k++)
            drop(&out[r][k]);
        drop(&stats[r][0]);
        drop(&stats[r][1]);
    }
    buf *all[] = {&x, &dy, &gamma, &beta, &rm0};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

static void check_softmax(int n, int classes)
{
    buf z = make((size_t)n * classes, -4, 4), dz = make((size_t)n * classes, 0, 0);
    int32_t *lab_h, *lab_d = int_buf(n, &lab_h);
    for (int i = 0; i < n; i++)
        lab_h[i] = (int32_t)test_uniform(0, classes);
    backend_upload(&gpu, lab_d, lab_h, n * sizeof(int32_t));
    int hits_c = -1, hits_g = -2;
    const float lc = softmax_xent(&cpu, n, classes, z.h, lab_h, dz.h, &hits_c);
    const float lg = softmax_xent(&gpu, n, classes, z.d, lab_d, dz.d, &hits_g);
    char what[96];
    snprintf(what, sizeof what, "softmax_xent n=%d classes=%d dlogits", n, classes);
    CHECK(fabs((double)lg - lc) <= 1e-6 * fabs((double)lc), "%s: loss gpu %.9g cpu %.9g", what,
          (double)lg, (double)lc);
    CHECK(hits_g == hits_c, "%s: hits gpu %d cpu %d", what, hits_g, hits_c);
    compare(what, &dz, 1e-7, 1e-5);
    /* Loss alone: no dlogits, no hits. */
    const float lg2 = softmax_xent(&gpu, n, classes, z.d, lab_d, NULL, NULL);
    CHECK(fabs((double)lg2 - lc) <= 1e-6 * fabs((double)lc), "%s: loss alone gpu %.9g cpu %.9g",
          what, (double)lg2, (double)lc);
    free(lab_h);
    backend_free(&gpu, lab_d);
    drop(&z);
    drop(&dz);
}

enum { NVEC = 5 };

/* The vector ops, ReLU and dropout through the context (vecops.cu's kernels
 * have their own, closer test: test_gpu_vecops). */
static void check_vector_ops(size_t n)
{
    buf v[NVEC];
    char what[96];
#define RESET()                                   \
    for (int j = 0; j < NVEC; j++) {              \
        test_fill_uniform(v[j].h, n, -1, 1);      \
        backend_upload(&gpu, v[j].d, v[j].h, n * sizeof(float)); \
    }
#define COMPARE_ALL(name)                         \
    for (int j = 0; j < NVEC; j++) {              \
        snprintf(what, sizeof what, "%s n=%zu [%d]", (name), n, j); \
        compare(what, &v[j], 1e-6, 1e-6);         \
    }
    quiet = 1;
    for (int j = 0; j < NVEC; j++)
        v[j] = make(n, -1, 1);
    RESET();
    vec_axpby(&cpu, n, 0.3f, v[0].h, -1.2f, v[1].h);
    vec_axpby(&gpu, n, 0.3f, v[0].d, -1.2f, v[1].d);
    COMPARE_ALL("vec_axpby");
    vec_scale(&cpu, n, -0.7f, v[2].h);
    vec_scale(&gpu, n, -0.7f, v[2].d);
    COMPARE_ALL("vec_scale");
    const float *xs_c[3] = {v[0].h, v[1].h, v[2].h}, *xs_g[3] = {v[0].d, v[1].d, v[2].d};
    vec_mean(&cpu, n, xs_c, 3, v[1].h); /* out aliasing an input */
    vec_mean(&gpu, n, xs_g, 3, v[1].d);
    COMPARE_ALL("vec_mean");
    const double dc = vec_dist2(&cpu, n, v[0].h, v[3].h), dg = vec_dist2(&gpu, n, v[0].d, v[3].d);
    CHECK(fabs(dg - dc) <= 1e-10 * dc, "vec_dist2 n=%zu: gpu %.17g cpu %.17g", n, dg, dc);
    RESET();
    vec_sgd_momentum(&cpu, n, 0.1f, 0.9f, 5e-4f, 1, v[0].h, v[1].h, v[2].h);
    vec_sgd_momentum(&gpu, n, 0.1f, 0.9f, 5e-4f, 1, v[0].d, v[1].d, v[2].d);
    COMPARE_ALL("vec_sgd_momentum");
    vec_parle_inner(&cpu, n, 0.1f, 0.9f, 1e-3f, 0.03f, 0.75f, v[0].h, v[1].h, v[2].h, v[3].h,
                    v[4].h);
    vec_parle_inner(&gpu, n, 0.1f, 0.9f, 1e-3f, 0.03f, 0.75f, v[0].d, v[1].d, v[2].d, v[3].d,
                    v[4].d);
    COMPARE_ALL("vec_parle_inner");
    vec_parle_outer(&cpu, n, 0.1f, 0.9f, 0.5f, v[0].h, v[1].h, v[0].h, v[3].h, v[4].h);
    vec_parle_outer(&gpu, n, 0.1f, 0.9f, 0.5f, v[0].d, v[1].d, v[0].d, v[3].d, v[4].d);
    COMPARE_ALL("vec_parle_outer x = xhat");
    vec_elastic_step(&cpu, n, 0.1f, 0.9f, 1e-3f, 0.5f, v[0].h, v[1].h, v[2].h, v[3].h);
    vec_elastic_step(&gpu, n, 0.1f, 0.9f, 1e-3f, 0.5f, v[0].d, v[1].d, v[2].d, v[3].d);
    COMPARE_ALL("vec_elastic_step");
    relu_forward(&cpu, n, v[0].h, v[1].h);
    relu_forward(&gpu, n, v[0].d, v[1].d);
    relu_backward(&cpu, n, v[1].h, v[2].h, v[2].h);
    relu_backward(&gpu, n, v[1].d, v[2].d, v[2].d);
    COMPARE_ALL("relu");
    const philox_key key = philox_make_key(test_seed(), 3, RNG_STREAM_DROPOUT);
    dropout_forward(&cpu, n, 0.3f, key, 12345, v[0].h, v[3].h);
    dropout_forward(&gpu, n, 0.3f, key, 12345, v[0].d, v[3].d);
    dropout_backward(&cpu, n, 0.3f, key, 12345, v[1].h, v[4].h);
    dropout_backward(&gpu, n, 0.3f, key, 12345, v[1].d, v[4].d);
    COMPARE_ALL("dropout");
#undef RESET
#undef COMPARE_ALL
    quiet = 0;
    for (int j = 0; j < NVEC; j++)
        drop(&v[j]);
}

static void check_memory(void)
{
    const size_t n = 4099;
    buf a = make(n, -1, 1), b = make(n, 0, 0);
    backend_copy(&gpu, b.d, a.d, n * sizeof(float));
    memcpy(b.h, a.h, n * sizeof(float));
    compare("copy", &b, 0, 0);
    backend_zero(&gpu, b.d, 7 * sizeof(float));
    memset(b.h, 0, 7 * sizeof(float));
    compare("zero", &b, 0, 0);
    float *pinned = backend_host_alloc(&gpu, n * sizeof(float));
    CHECK(pinned != NULL, "host_alloc: %s", gpu.err);
    if (pinned) {
        test_fill_uniform(pinned, n, -1, 1);
        memcpy(a.h, pinned, n * sizeof(float));
        const void *staged = backend_stage(&gpu, a.d, pinned, n * sizeof(float));
        CHECK(staged == a.d, "stage returns the staging buffer");
        CHECK(backend_sync(&gpu) == 0, "sync: %s", gpu.err);
        compare("stage from pinned memory", &a, 0, 0);
        backend_host_free(&gpu, pinned);
    }
    drop(&a);
    drop(&b);
}

int main(void)
{
    if (backend_cuda_devices() == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    test_init("gpu_ops");
    char err[256];
    if (backend_ctx_init_cuda(&gpu, 0, PRECISION_FP32, 1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    backend_ctx_init_cpu(&cpu, 2);

    check_memory();
    check_gemm();
    check_linear();
    static const conv_case convs[] = {
        {"3x13x11->5 k3 s2 p1 n3", 3, 3, 13, 11, 5, 3, 2, 1, 1},
        {"lenet 1x28x28->6 k5", 4, 1, 28, 28, 6, 5, 1, 0, 1},
        {"lenet 6x12x12->16 k5", 4, 6, 12, 12, 16, 5, 1, 0, 1},
        {"wrn 16x32x32->160 k3 p1", 2, 16, 32, 32, 160, 3, 1, 1, 0},
        {"wrn 160x16x16->320 k3 s2 p1", 2, 160, 16, 16, 320, 3, 2, 1, 0},
        {"wrn shortcut 160x16x16->320 k1 s2", 2, 160, 16, 16, 320, 1, 2, 0, 0},
        {"1x1 image 7x1x1->3 k1", 5, 7, 1, 1, 3, 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
        check_conv(&convs[i]);
    check_default_setup();
    check_gemm_bf16();
    check_pool(2, 3, 7, 9, 3, 2, 1);  /* overlapping windows, padded */
    check_pool(2, 3, 8, 8, 2, 2, 0);  /* tiling */
    check_pool(1, 2, 9, 9, 3, 3, 0);  /* LeNet's */
    check_pool(2, 4, 11, 10, 3, 2, 0);
    check_pool(1, 3, 5, 6, 3, 1, 1);  /* every input under up to 9 windows */
    check_batchnorm(4, 7, 30);
    check_batchnorm(16, 4, 64);
    check_batchnorm(9, 13, 1);        /* 1-D, after a linear layer */
    check_batchnorm(1, 5, 1);         /* n hw = 1: variance 0 */
    check_batchnorm(1, 3, 7);
    check_batchnorm_empty(6, 10);
    check_batchnorm_relu(4, 7, 30);   /* the classic kernels, then ReLU */
    /* The split kernels (batchnorm_split): one part a channel, several
     * (hw dividing a part and not), hw = 1 in several parts. */
    gpu.batchnorm_split = 1;
    printf("split batch norm:\n");
    const int split_shapes[][3] = {{4, 7, 30}, {9, 13, 1}, {1, 5, 1}, {1, 3, 7},
                                   {128, 16, 1024}, {64, 40, 64}, {50, 6, 49}, {4096, 3, 1}};
    for (size_t i = 0; i < sizeof split_shapes / sizeof *split_shapes; i++) {
        const int *s = split_shapes[i];
        check_batchnorm(s[0], s[1], s[2]);
        check_batchnorm_relu(s[0], s[1], s[2]);
    }
    check_batchnorm_empty(6, 10);
    check_batchnorm_repeats(128, 16, 1024, 0);
    check_batchnorm_repeats(128, 16, 1024, 1);
    check_batchnorm_repeats(4096, 3, 1, 1);
    gpu.batchnorm_split = 0;
    check_batchnorm_repeats(16, 4, 64, 1);
    check_softmax(7, 10);
    check_softmax(33, 100);
    check_softmax(3, 1000);
    const size_t sizes[] = {1, 1000, (1u << 20) + 4099};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_vector_ops(sizes[i]);

    CHECK(backend_sync(&gpu) == 0 && !backend_failed(&gpu), "context failed: %s", gpu.err);
    backend_ctx_free(&gpu);
    backend_ctx_free(&cpu);
    return test_main_end();
}

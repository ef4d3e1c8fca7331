/* test_gpu_ops' matrix products, GPU against CPU: GEMM (every transposition,
 * strided), linear and convolution forward and backward at fp32 (plans cached
 * and deterministic: the same bits again), then the default job setup (tf32,
 * non-deterministic) and the public GEMM at bf16 precision against bounds
 * of their own. */
#include <stdlib.h>

#include "gpu_ops_check.h"
#include "testutil.h"

void check_gemm(void)
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

void check_linear(void)
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

void check_conv(const conv_case *t)
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

void check_default_setup(void)
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

void check_gemm_bf16(void)
{
    gpu.precision = PRECISION_BF16;
    check_gemms("bf16", check_bf16);
    gpu.precision = PRECISION_FP32;
}

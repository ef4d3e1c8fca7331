/* precision bf16 on the CPU backend: convolutions (forward, data and filter
 * gradients) and the linear layer against float64 references on fresh
 * random inputs in [-1, 1).
 *
 * Each result element is a sum of products whose two factors were rounded to
 * bf16 (8 significant bits, round to nearest: relative error <= 2^-9 each),
 * accumulated in fp32. So, elementwise, with a = the sum of |terms|:
 *   |got - want| <= (2^-8 + 1e-5) a
 * 2^-8 bounds the rounding of a term's two factors, 1e-5 the fp32
 * accumulation (test_conv_winograd.c measures < 3e-6 for fp32 sums). An
 * indexing slip is off by ~|want|, far above. And bf16 must have run: the
 * normwise error (max |got - want| / max |want|) is above 1e-4, where fp32
 * gives ~1e-7. A 3x3 stride-1 convolution in a bf16 context runs as fp32
 * Winograd (faster here than bf16 direct, conv_dnnl.c), and one with fewer
 * than 32 channels in or out through conv.c in fp32 (bf16 GEMMs were slower
 * there): both checked at fp32's tolerance. Skipped, with one line, where
 * the CPU lacks AVX512-BF16. */
#include <stdlib.h>

#include "conv_ref.h"
#include "cpu/cpu_ops.h"
#include "testutil.h"

#define BF16_TOL (1.0 / 256 + 1e-5)
#define BF16_RAN 1e-4
#define FP32_TOL 2e-5 /* test_conv_winograd.c's Winograd tolerance */

static float *new_floats(size_t n)
{
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, -1, 1);
    return x;
}

/* Checks got against want elementwise (bound BF16_TOL a) and returns the
 * normwise error. */
static double check_bf16(const char *what, const float *got, const double *want,
                         const double *abs_sum, size_t n)
{
    double e = 0, m = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs(got[i] - want[i]), q = d / (abs_sum[i] > 0 ? abs_sum[i] : 1);
        if (q > worst)
            worst = q, at = i;
        e = d > e ? d : e;
        m = fabs(want[i]) > m ? fabs(want[i]) : m;
    }
    CHECK(worst <= BF16_TOL, "%s: element %zu: got %.7g want %.7g, error %.3g of the sum of "
          "|terms| > %.3g", what, at, (double)got[at], want[at], worst, BF16_TOL);
    return e / (m > 0 ? m : 1);
}

static void test_conv(backend_ctx *ctx, int n, int in_c, int h, int w_, int out_c, int k,
                      int stride, int pad, int winograd)
{
    conv2d_desc d;
    conv2d_desc_init(&d, in_c, h, w_, out_c, k, stride, pad);
    const size_t nx = (size_t)n * in_c * h * w_, nw = (size_t)out_c * in_c * k * k;
    const size_t ny = (size_t)n * out_c * d.out_h * d.out_w;
    const int fp32 = in_c < 32 || out_c < 32 || (winograd && k == 3 && stride == 1);
    float *x = new_floats(nx), *w = new_floats(nw), *dy = new_floats(ny), *b = new_floats(out_c);
    float *y = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
    float *dw = malloc(nw * sizeof(float)), *db = malloc(out_c * sizeof(float));
    conv_ref ref;
    conv_ref_run(&ref, &d, n, x, w, b, dy);
    ((cpu_impl *)ctx->impl)->conv_winograd = winograd;
    conv2d_forward(ctx, &d, n, x, w, b, y);
    conv2d_backward_data(ctx, &d, n, dy, w, dx);
    conv2d_backward_filter(ctx, &d, n, x, dy, dw, db);
    CHECK(!backend_failed(ctx), "%s", ctx->err);
    char name[96], what[128];
    snprintf(name, sizeof name, "conv n%d %d->%d %dx%d k%d s%d%s", n, in_c, out_c, h, w_, k,
             stride, winograd ? " (winograd allowed)" : "");
    const float *got[] = {y, dx, dw, db};
    const double *want[] = {ref.y, ref.dx, ref.dw, ref.db}, *abs[] = {ref.ay, ref.adx, ref.adw, ref.adb};
    const size_t len[] = {ny, nx, nw, (size_t)out_c};
    const char *part[] = {"forward", "data", "filter", "bias"};
    double err[4];
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof what, "%s %s", name, part[i]);
        err[i] = check_bf16(what, got[i], want[i], abs[i], len[i]);
        /* The bias gradient sums dy: bf16 rounds dy, so it too is off by ~1e-3. */
        if (fp32)
            CHECK(err[i] <= FP32_TOL, "%s: %.3g, not fp32's accuracy", what, err[i]);
        else
            CHECK(err[i] > BF16_RAN, "%s: error %.3g: this is not bf16", what, err[i]);
    }
    printf("%s: max rel error forward %.2e, data %.2e, filter %.2e, bias %.2e\n", name, err[0],
           err[1], err[2], err[3]);
    conv_ref_free(&ref);
    free(x), free(w), free(dy), free(b), free(y), free(dx), free(dw), free(db);
}

/* y = x w^T + b, dx = dy w, dw = dy^T x, db = sum dy, with sums of |terms|. */
static void test_linear(backend_ctx *ctx, int n, int in, int out)
{
    float *x = new_floats((size_t)n * in), *w = new_floats((size_t)out * in);
    float *b = new_floats(out), *dy = new_floats((size_t)n * out);
    float *y = malloc((size_t)n * out * sizeof(float)), *dx = malloc((size_t)n * in * sizeof(float));
    float *dw = malloc((size_t)out * in * sizeof(float)), *db = malloc(out * sizeof(float));
    double *ry = calloc((size_t)n * out, 8), *ay = calloc((size_t)n * out, 8);
    double *rdx = calloc((size_t)n * in, 8), *adx = calloc((size_t)n * in, 8);
    double *rdw = calloc((size_t)out * in, 8), *adw = calloc((size_t)out * in, 8);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < out; o++) {
            const size_t yi = (size_t)i * out + o;
            ry[yi] = b[o], ay[yi] = fabs(b[o]);
            for (int k = 0; k < in; k++) {
                const size_t xi = (size_t)i * in + k, wi = (size_t)o * in + k;
                ry[yi] += (double)x[xi] * w[wi], ay[yi] += fabs((double)x[xi] * w[wi]);
                rdx[xi] += (double)dy[yi] * w[wi], adx[xi] += fabs((double)dy[yi] * w[wi]);
                rdw[wi] += (double)dy[yi] * x[xi], adw[wi] += fabs((double)dy[yi] * x[xi]);
            }
        }
    linear_forward(ctx, n, in, out, x, w, b, y);
    linear_backward(ctx, n, in, out, x, w, dy, dx, dw, db);
    CHECK(!backend_failed(ctx), "%s", ctx->err);
    char what[96];
    double err[3];
    const float *got[] = {y, dx, dw};
    const double *want[] = {ry, rdx, rdw}, *abs[] = {ay, adx, adw};
    const size_t len[] = {(size_t)n * out, (size_t)n * in, (size_t)out * in};
    const char *part[] = {"forward", "data", "weights"};
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "linear %d x %d -> %d %s", n, in, out, part[i]);
        err[i] = check_bf16(what, got[i], want[i], abs[i], len[i]);
        CHECK(err[i] > BF16_RAN, "%s: error %.3g: this is not bf16", what, err[i]);
    }
    printf("linear %d x %d -> %d: max rel error forward %.2e, data %.2e, weights %.2e\n", n, in,
           out, err[0], err[1], err[2]);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(ry), free(ay), free(rdx), free(adx), free(rdw), free(adw);
}

int main(void)
{
    test_init("cpu_bf16");
    backend_ctx ctx;
    char err[256];
    backend_ctx_init_cpu(&ctx, 1);
    if (backend_ctx_set_precision_cpu(&ctx, PRECISION_BF16, err, sizeof err) != 0) {
        printf("skipped: %s\n", err);
        backend_ctx_free(&ctx);
        return 0;
    }
    CHECK(ctx.precision == PRECISION_BF16, "precision %d", (int)ctx.precision);
    for (int threads = 1; threads <= 2; threads++) {
        if (threads > 1) {
            backend_ctx_init_cpu(&ctx, threads);
            CHECK(backend_ctx_set_precision_cpu(&ctx, PRECISION_BF16, err, sizeof err) == 0, "%s", err);
        }
        test_conv(&ctx, 4, 32, 9, 11, 48, 3, 2, 1, 1); /* strided: bf16 direct */
        test_conv(&ctx, 3, 64, 7, 7, 32, 1, 1, 0, 1);  /* 1x1 */
        test_conv(&ctx, 3, 32, 9, 9, 48, 3, 1, 1, 0);  /* 3x3 s1 kept direct: bf16 */
        test_conv(&ctx, 3, 32, 9, 9, 48, 3, 1, 1, 1);  /* 3x3 s1: fp32 Winograd */
        test_conv(&ctx, 4, 3, 12, 10, 24, 3, 1, 1, 1); /* a first layer: conv.c, fp32 */
        test_conv(&ctx, 3, 1, 12, 20, 8, 5, 1, 0, 1);  /* thin: conv_thin.c, fp32 */
        test_conv(&ctx, 3, 16, 9, 9, 96, 3, 1, 1, 0);  /* conv.c, GEMMs of 64+ a side: fp32 */
        test_linear(&ctx, 96, 300, 70); /* every side of every product >= 64: bf16 (gemm.c) */
        backend_ctx_free(&ctx);
    }
    /* tf32 has no CPU counterpart: fp32. */
    backend_ctx_init_cpu(&ctx, 1);
    CHECK(backend_ctx_set_precision_cpu(&ctx, PRECISION_TF32, err, sizeof err) == 0 &&
          ctx.precision == PRECISION_FP32, "tf32 on the CPU: precision %d", (int)ctx.precision);
    backend_ctx_free(&ctx);
    return test_main_end();
}

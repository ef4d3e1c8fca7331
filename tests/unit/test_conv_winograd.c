/* Convolutions through Winograd and directly (cpu_impl.conv_winograd = 0),
 * forward, data gradient and filter gradient, against a float64 direct
 * convolution on fresh random inputs in [-1, 1), odd sizes:
 *   3x3 stride 1, padding 1: oneDNN's F(4x4, 3x3) (conv_dnnl.c); direct is
 *     oneDNN's direct primitive from 32 channels, im2col + GEMM below;
 *   5x5 stride 1, no padding, outputs in 4x4 blocks, 8 or more channels in:
 *     our F(4x4, 5x5) (conv_winograd5.c), LeNet's conv2 among them; direct
 *     is im2col + GEMM.
 *
 * The error is normwise: max |got - want| over the tensor / max |want|, printed
 * for both paths so the difference shows. Tolerances:
 *   direct: 1e-5. fp32 sums of up to 128 x 8 x 8 x 9 = 73728 terms (the
 *     filter gradient at batch 128) round to ~sqrt(terms) x 6e-8 of their
 *     scale; measured 2-4e-7 (forward, data), up to 3e-6 (filter, n = 128);
 *   Winograd: 2e-5. Its transforms scale tile values by up to ~10 and cancel,
 *     costing about one decimal digit in the forward and data gradient:
 *     F(4x4, 3x3) measured 0.8-2e-6 there, 0.6-1e-6 in the filter gradient
 *     (oneDNN sums it in blocks, so better than direct at n = 128);
 *     F(4x4, 5x5), whose 8x8 tiles carry larger factors (up to 8 and 21/4),
 *     measured 2.6-6.2e-6 in all three.
 * An indexing or transform slip is off by the scale itself (~1).
 * Where the CPU has the Winograd path for a shape, its results must also
 * differ from the direct ones, or the path under test did not run. */
#include <stdlib.h>
#include <string.h>

#include "conv_ref.h"
#include "cpu/cpu_ops.h"
#include "parle_config.h"
#include "testutil.h"

#if PARLE_HAVE_DNNL
#include <dnnl.h>
#endif

#define DIRECT_TOL 1e-5
#define WINOGRAD_TOL 2e-5

static float *new_floats(size_t n)
{
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, -1, 1);
    return x;
}

/* max |got - want| / max |want| */
static double norm_err(const float *got, const double *want, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        e = d > e ? d : e;
        m = fabs(want[i]) > m ? fabs(want[i]) : m;
    }
    return e / (m > 0 ? m : 1);
}

static int differs(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) != 0;
}

static int have_winograd(void)
{
#if PARLE_HAVE_DNNL
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
#else
    return 0;
#endif
}

/* Whether a k x k convolution of this shape takes a Winograd path here. */
static int winograd_runs(const conv2d_desc *d)
{
    if (d->k == 3)
        return have_winograd();
    return d->k == 5 && d->pad == 0 && d->out_h % 4 == 0 && d->out_w % 4 == 0 &&
           d->in_c >= 8 && (d->in_c < 32 || d->out_c < 32) &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

static void test_shape(backend_ctx *ctx, int ksize, int n, int in_c, int h, int w_, int out_c,
                       int bias)
{
    conv2d_desc d;
    conv2d_desc_init(&d, in_c, h, w_, out_c, ksize, 1, ksize == 3 ? 1 : 0);
    const size_t nx = (size_t)n * in_c * h * w_, nw = (size_t)out_c * in_c * ksize * ksize;
    const size_t ny = (size_t)n * out_c * d.out_h * d.out_w;
    float *x = new_floats(nx), *w = new_floats(nw), *dy = new_floats(ny);
    float *b = bias ? new_floats(out_c) : NULL;
    conv_ref ref;
    conv_ref_run(&ref, &d, n, x, w, b, dy);

    /* [0]: direct, [1]: Winograd */
    float *y[2], *dx[2], *dw[2], *db[2];
    const char *path[2] = {"direct", "winograd"};
    const double tol[2] = {DIRECT_TOL, WINOGRAD_TOL};
    for (int k = 0; k < 2; k++) {
        y[k] = malloc(ny * sizeof(float)), dx[k] = malloc(nx * sizeof(float));
        dw[k] = malloc(nw * sizeof(float)), db[k] = malloc(out_c * sizeof(float));
        ((cpu_impl *)ctx->impl)->conv_winograd = k;
        conv2d_forward(ctx, &d, n, x, w, b, y[k]);
        conv2d_backward_data(ctx, &d, n, dy, w, dx[k]);
        conv2d_backward_filter(ctx, &d, n, x, dy, dw[k], bias ? db[k] : NULL);
        CHECK(!backend_failed(ctx), "%s", ctx->err);
        const double ey = norm_err(y[k], ref.y, ny), ex = norm_err(dx[k], ref.dx, nx);
        const double ew = norm_err(dw[k], ref.dw, nw);
        const double eb = bias ? norm_err(db[k], ref.db, out_c) : 0;
        printf("%dx%d n%d %d->%d %dx%d%s %-8s: max rel error forward %.2e, data %.2e, filter %.2e, "
               "bias %.2e\n", ksize, ksize, n, in_c, out_c, h, w_, bias ? " bias" : "", path[k], ey, ex, ew, eb);
        CHECK(ey <= tol[k], "%s forward %.3g > %.3g", path[k], ey, tol[k]);
        CHECK(ex <= tol[k], "%s backward data %.3g > %.3g", path[k], ex, tol[k]);
        CHECK(ew <= tol[k], "%s backward filter %.3g > %.3g", path[k], ew, tol[k]);
        CHECK(eb <= tol[k], "%s backward bias %.3g > %.3g", path[k], eb, tol[k]);
    }
    if (winograd_runs(&d)) {
        CHECK(differs(y[0], y[1], ny), "forward: Winograd gave the direct bits (did it run?)");
        CHECK(differs(dx[0], dx[1], nx), "backward data: Winograd gave the direct bits");
        CHECK(differs(dw[0], dw[1], nw), "backward filter: Winograd gave the direct bits");
    }
    for (int k = 0; k < 2; k++)
        free(y[k]), free(dx[k]), free(dw[k]), free(db[k]);
    free(x), free(w), free(dy), free(b);
    conv_ref_free(&ref);
}

#define test_shape3(ctx, ...) test_shape(ctx, 3, __VA_ARGS__)
#define test_shape5(ctx, ...) test_shape(ctx, 5, __VA_ARGS__)

int main(void)
{
    test_init("conv_winograd");
    if (!have_winograd())
        printf("no AVX-512 oneDNN here: both 3x3 paths are the direct one\n");
    if (!__builtin_cpu_supports("avx512vl"))
        printf("no AVX-512VL here: both 5x5 paths are the direct one\n");
    backend_ctx ctx;
    for (int threads = 1; threads <= 2; threads++) {
        backend_ctx_init_cpu(&ctx, threads);
        test_shape3(&ctx, 3, 32, 9, 11, 48, 1);
        test_shape3(&ctx, 2, 64, 7, 7, 32, 0);
        test_shape3(&ctx, 4, 48, 13, 5, 64, 1);
        test_shape3(&ctx, 2, 96, 17, 17, 96, 1);
        test_shape3(&ctx, 2, 16, 10, 9, 64, 1); /* Winograd from 16 channels; direct: im2col */
        test_shape3(&ctx, 128, 64, 8, 8, 64, 0); /* WRN's batch: long filter-gradient sums */
        test_shape5(&ctx, 128, 20, 8, 8, 50, 1); /* LeNet's conv2: one block an image */
        test_shape5(&ctx, 5, 20, 8, 8, 50, 0);   /* an odd batch: threads split it unevenly */
        test_shape5(&ctx, 3, 8, 12, 16, 24, 1);  /* 2 x 3 overlapping windows an image */
        test_shape5(&ctx, 2, 40, 20, 8, 16, 1);  /* 4 x 1 blocks; 40 channels in */
        test_shape5(&ctx, 2, 12, 9, 10, 7, 1);   /* 5x6 outputs: not 4x4 blocks, im2col */
        test_shape5(&ctx, 2, 4, 12, 12, 16, 1);  /* 4 channels in: conv.c's paths */
        backend_ctx_free(&ctx);
    }
    return test_main_end();
}

/* Batch normalisation and its fusions with ReLU, pooling and a thin
 * convolution's filter gradient, on the CPU against float64 references
 * written here (tolerances: ops_check.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "cpu/cpu_ops.h"
#include "elementwise.h"
#include "ops_check.h"
#include "testutil.h"

static backend_ctx ctx1, ctx2; /* 1 and 2 math threads */

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

int main(void)
{
    test_init("ops_bn");
    backend_ctx_init_cpu(&ctx2, 2);
    backend_ctx_init_cpu(&ctx1, 1);
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
    backend_ctx_free(&ctx1);
    backend_ctx_free(&ctx2);
    return test_main_end();
}

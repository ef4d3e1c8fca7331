/* test_gpu_ops' pooling and batch norm, GPU against CPU: max pooling and
 * its argmax exactly; the training batch norm forward and backward, alone
 * and with the ReLU after it fused, on an empty batch, and run twice for the
 * same bits; the split kernels when the context asks for them. */
#include <stdlib.h>

#include "gpu_ops_check.h"
#include "testutil.h"

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

void check_pool(int n, int c, int h, int w, int k, int stride, int pad)
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

void check_batchnorm(int n, int c, int hw)
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
void check_batchnorm_empty(int c, int hw)
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
void check_batchnorm_relu(int n, int c, int hw)
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
void check_batchnorm_repeats(int n, int c, int hw, int relu)
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

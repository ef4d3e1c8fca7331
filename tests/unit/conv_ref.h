/* A float64 direct 2-D convolution and its adjoints, for the tests of the
 * CPU convolution paths (test_conv_winograd.c, test_cpu_bf16.c). */
#ifndef PARLE_TEST_CONV_REF_H
#define PARLE_TEST_CONV_REF_H

#include <math.h>
#include <stdlib.h>

#include "backend.h"

/* Each result with, beside it, the sum of the absolute values of its terms
 * (the scale its rounding error is relative to). */
typedef struct conv_ref {
    double *y, *dx, *dw, *db;
    double *ay, *adx, *adw, *adb;
} conv_ref;

/* y = conv(x, w) + b and, for the incoming gradient dy, dx, dw, db. */
static void conv_ref_run(conv_ref *r, const conv2d_desc *d, int n, const float *x,
                         const float *w, const float *b, const float *dy)
{
    const int C = d->in_c, H = d->in_h, W = d->in_w, O = d->out_c, K = d->k;
    const size_t nx = (size_t)n * C * H * W, nw = (size_t)O * C * K * K;
    const size_t ny = (size_t)n * O * d->out_h * d->out_w;
    double **all[] = {&r->y, &r->dx, &r->dw, &r->db, &r->ay, &r->adx, &r->adw, &r->adb};
    const size_t len[] = {ny, nx, nw, (size_t)O, ny, nx, nw, (size_t)O};
    for (int i = 0; i < 8; i++)
        *all[i] = calloc(len[i], sizeof(double));
    for (int i = 0; i < n; i++)
        for (int o = 0; o < O; o++)
            for (int p = 0; p < d->out_h; p++)
                for (int q = 0; q < d->out_w; q++) {
                    const size_t yi = (((size_t)i * O + o) * d->out_h + p) * d->out_w + q;
                    double s = b ? b[o] : 0, a = b ? fabs(b[o]) : 0;
                    r->db[o] += dy[yi];
                    r->adb[o] += fabs(dy[yi]);
                    for (int c = 0; c < C; c++)
                        for (int u = 0; u < K; u++)
                            for (int v = 0; v < K; v++) {
                                const int h = p * d->stride + u - d->pad;
                                const int ww = q * d->stride + v - d->pad;
                                if (h < 0 || h >= H || ww < 0 || ww >= W)
                                    continue;
                                const size_t xi = (((size_t)i * C + c) * H + h) * W + ww;
                                const size_t wi = (((size_t)o * C + c) * K + u) * K + v;
                                s += (double)x[xi] * w[wi];
                                a += fabs((double)x[xi] * w[wi]);
                                r->dx[xi] += (double)dy[yi] * w[wi];
                                r->adx[xi] += fabs((double)dy[yi] * w[wi]);
                                r->dw[wi] += (double)dy[yi] * x[xi];
                                r->adw[wi] += fabs((double)dy[yi] * x[xi]);
                            }
                    r->y[yi] = s;
                    r->ay[yi] = a;
                }
}

static void conv_ref_free(conv_ref *r)
{
    double *all[] = {r->y, r->dx, r->dw, r->db, r->ay, r->adx, r->adw, r->adb};
    for (int i = 0; i < 8; i++)
        free(all[i]);
}

#endif

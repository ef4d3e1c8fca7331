/* The CPU layer ops against float64 references written here: GEMM,
 * pooling, ReLU, dropout, linear, softmax cross-entropy
 * (tolerances: ops_check.h; convolutions in test_ops_conv.c, batch
 * normalisation in test_ops_bn.c). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "cpu/cpu_ops.h"
#include "elementwise.h"
#include "ops_check.h"
#include "testutil.h"

static backend_ctx ctx1, ctx2; /* 1 and 2 math threads */

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
    test_pool_case(1, 2, 3, 7, 6, 3, 2, 1, 4, 3);
    test_pool_case(1, 2, 2, 24, 24, 3, 3, 0, 8, 8); /* LeNet's first pool */
    test_pool_case(1, 2, 3, 5, 7, 2, 2, 0, 2, 3);   /* floor drops the last row and column */
    test_pool_case(1, 2, 2, 9, 8, 4, 4, 0, 2, 2);   /* tiling windows of any other size */
    test_pool_case(0, 2, 3, 7, 6, 3, 2, 1, 4, 3);
    test_pool_case(0, 2, 3, 5, 7, 2, 2, 0, 2, 3);
    test_relu();
    test_dropout();
    test_dropout_bits();
    test_linear(5, 7, 4);
    test_softmax_xent();
    backend_ctx_free(&ctx1);
    backend_ctx_free(&ctx2);
    return test_main_end();
}

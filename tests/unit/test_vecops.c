/* Every vec_* against a float64 per-element reference of the equations in
 * backend.h and elementwise.h, written out again here (not by calling the
 * element functions). Sizes: an odd small one on 1 thread and one past the
 * parallel threshold on 2 threads (vec_dist2: both sizes on both). Tolerance:
 * 1e-5 + 1e-5 |want| (a handful of float operations on values of size <= a
 * few). */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

#define TOL 1e-5

static float *new_floats(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof(float));
    test_fill_uniform(x, n, lo, hi);
    return x;
}

static float *copy_floats(const float *x, size_t n)
{
    float *c = malloc(n * sizeof(float));
    memcpy(c, x, n * sizeof(float));
    return c;
}

static void check_vec(const char *what, size_t n, const float *got, const double *want)
{
    size_t bad = 0, worst = 0;
    double worst_err = -1.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= TOL + TOL * fabs(want[i])))
            bad++;
        if (!(err <= worst_err))
            worst_err = err, worst = i;
    }
    CHECK(bad == 0, "%s (n=%zu): %zu off, worst [%zu] got %.9g want %.9g", what, n, bad, worst,
          (double)got[worst], want[worst]);
}

static void test_axpby_scale(backend_ctx *ctx, size_t n)
{
    float *x = new_floats(n, -1, 1), *y = new_floats(n, -1, 1);
    double *want = malloc(n * sizeof(double));
    const float a = (float)test_uniform(-2, 2), b = (float)test_uniform(-2, 2);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)a * x[i] + (double)b * y[i];
    vec_axpby(ctx, n, a, x, b, y);
    check_vec("vec_axpby", n, y, want);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)a * x[i];
    vec_scale(ctx, n, a, x);
    check_vec("vec_scale", n, x, want);
    free(x), free(y), free(want);
}

static void test_mean(backend_ctx *ctx, size_t n)
{
    enum { K = 5 };
    float *xs[K];
    double *want = calloc(n, sizeof(double));
    for (int j = 0; j < K; j++) {
        xs[j] = new_floats(n, -1, 1);
        for (size_t i = 0; i < n; i++)
            want[i] += xs[j][i] / (double)K;
    }
    float *out = malloc(n * sizeof(float));
    vec_mean(ctx, n, (const float *const *)xs, K, out);
    check_vec("vec_mean", n, out, want);
    /* out may be one of the inputs. */
    vec_mean(ctx, n, (const float *const *)xs, K, xs[2]);
    check_vec("vec_mean into an input", n, xs[2], want);
    vec_mean(ctx, n, (const float *const *)xs, 1, out);
    for (size_t i = 0; i < n; i++)
        want[i] = xs[0][i];
    check_vec("vec_mean of one vector", n, out, want);
    for (int j = 0; j < K; j++)
        free(xs[j]);
    free(out), free(want);
}

/* torch.optim.SGD: g' = g + wd w; v = mu v + g'; w -= lr (g' + mu v) or lr v. */
static void test_sgd_momentum(backend_ctx *ctx, size_t n, int nesterov)
{
    float *w = new_floats(n, -1, 1), *v = new_floats(n, -1, 1), *g = new_floats(n, -1, 1);
    double *want_w = malloc(n * sizeof(double)), *want_v = malloc(n * sizeof(double));
    const float lr = (float)test_uniform(0.01, 0.5), mu = (float)test_uniform(0.5, 0.99);
    const float wd = (float)test_uniform(0, 0.01);
    for (size_t i = 0; i < n; i++) {
        double gd = (double)g[i] + (double)wd * w[i];
        want_v[i] = (double)mu * v[i] + gd;
        want_w[i] = w[i] - (double)lr * (nesterov ? gd + (double)mu * want_v[i] : want_v[i]);
    }
    vec_sgd_momentum(ctx, n, lr, mu, wd, nesterov, w, v, g);
    check_vec(nesterov ? "vec_sgd_momentum (Nesterov) w" : "vec_sgd_momentum w", n, w, want_w);
    check_vec(nesterov ? "vec_sgd_momentum (Nesterov) v" : "vec_sgd_momentum v", n, v, want_v);
    free(w), free(v), free(g), free(want_w), free(want_v);
}

/* g' = g + lambda y + gamma (y - xhat); v = mu v + g'; y -= eta (g' + mu v);
 * z = alpha z + (1 - alpha) y. */
static void test_parle_inner(backend_ctx *ctx, size_t n)
{
    float *y = new_floats(n, -1, 1), *z = new_floats(n, -1, 1), *v = new_floats(n, -1, 1);
    float *g = new_floats(n, -1, 1), *xhat = new_floats(n, -1, 1);
    double *wy = malloc(n * sizeof(double)), *wz = malloc(n * sizeof(double));
    double *wv = malloc(n * sizeof(double));
    const float eta = (float)test_uniform(0.01, 0.5), mu = (float)test_uniform(0.5, 0.99);
    const float lambda = (float)test_uniform(0, 0.01), gamma = (float)test_uniform(0.01, 1);
    const float alpha = (float)test_uniform(0.5, 0.9);
    for (size_t i = 0; i < n; i++) {
        double gd = (double)g[i] + (double)lambda * y[i] + (double)gamma * ((double)y[i] - xhat[i]);
        wv[i] = (double)mu * v[i] + gd;
        wy[i] = y[i] - (double)eta * (gd + (double)mu * wv[i]);
        wz[i] = (double)alpha * z[i] + (1.0 - alpha) * wy[i];
    }
    vec_parle_inner(ctx, n, eta, mu, lambda, gamma, alpha, y, z, v, g, xhat);
    check_vec("vec_parle_inner y", n, y, wy);
    check_vec("vec_parle_inner z", n, z, wz);
    check_vec("vec_parle_inner v", n, v, wv);
    free(y), free(z), free(v), free(g), free(xhat), free(wy), free(wz), free(wv);
}

/* d = (xhat - z) + rho (xhat - zbar); u = mu u + d; x = xhat - eta (d + mu u).
 * Run once with x separate from xhat and once with x == xhat. */
static void test_parle_outer(backend_ctx *ctx, size_t n)
{
    float *xhat = new_floats(n, -1, 1), *z = new_floats(n, -1, 1), *zbar = new_floats(n, -1, 1);
    float *u = new_floats(n, -1, 1), *x = new_floats(n, -1, 1);
    double *wx = malloc(n * sizeof(double)), *wu = malloc(n * sizeof(double));
    const float eta = (float)test_uniform(0.01, 0.5), mu = (float)test_uniform(0.5, 0.99);
    const float rho = (float)test_uniform(0.1, 10);
    for (size_t i = 0; i < n; i++) {
        double d = ((double)xhat[i] - z[i]) + (double)rho * ((double)xhat[i] - zbar[i]);
        wu[i] = (double)mu * u[i] + d;
        wx[i] = xhat[i] - (double)eta * (d + (double)mu * wu[i]);
    }
    float *u2 = copy_floats(u, n), *in_place = copy_floats(xhat, n);
    vec_parle_outer(ctx, n, eta, mu, rho, x, u, xhat, z, zbar);
    check_vec("vec_parle_outer x", n, x, wx);
    check_vec("vec_parle_outer u", n, u, wu);
    vec_parle_outer(ctx, n, eta, mu, rho, in_place, u2, in_place, z, zbar);
    check_vec("vec_parle_outer x, in place of xhat", n, in_place, wx);
    check_vec("vec_parle_outer u, x in place of xhat", n, u2, wu);
    free(xhat), free(z), free(zbar), free(u), free(x), free(u2), free(in_place), free(wx), free(wu);
}

/* d = g + lambda x + rho (x - xbar); u = mu u + d; x -= eta (d + mu u). */
static void test_elastic_step(backend_ctx *ctx, size_t n)
{
    float *x = new_floats(n, -1, 1), *u = new_floats(n, -1, 1), *g = new_floats(n, -1, 1);
    float *xbar = new_floats(n, -1, 1);
    double *wx = malloc(n * sizeof(double)), *wu = malloc(n * sizeof(double));
    const float eta = (float)test_uniform(0.01, 0.5), mu = (float)test_uniform(0.5, 0.99);
    const float lambda = (float)test_uniform(0, 0.01), rho = (float)test_uniform(0.1, 10);
    for (size_t i = 0; i < n; i++) {
        double d = (double)g[i] + (double)lambda * x[i] + (double)rho * ((double)x[i] - xbar[i]);
        wu[i] = (double)mu * u[i] + d;
        wx[i] = x[i] - (double)eta * (d + (double)mu * wu[i]);
    }
    vec_elastic_step(ctx, n, eta, mu, lambda, rho, x, u, g, xbar);
    check_vec("vec_elastic_step x", n, x, wx);
    check_vec("vec_elastic_step u", n, u, wu);
    free(x), free(u), free(g), free(xbar), free(wx), free(wu);
}

/* sum_i (a_i - b_i)^2 against a float64 sum (a float accumulator would be
 * off by ~1e-7 relative), with the same bits on 1 and 2 threads. */
static void test_dist2(backend_ctx *one, backend_ctx *two, size_t n)
{
    float *a = new_floats(n, -1, 1), *b = new_floats(n, -1, 1);
    double want = 0.0;
    for (size_t i = 0; i < n; i++)
        want += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    const double got = vec_dist2(one, n, a, b), got2 = vec_dist2(two, n, a, b);
    CHECK(fabs(got - want) <= 1e-12 * want, "vec_dist2 (n=%zu): got %.17g want %.17g", n, got,
          want);
    CHECK(got == got2, "vec_dist2 (n=%zu): %.17g on 1 thread, %.17g on 2", n, got, got2);
    CHECK(vec_dist2(one, 0, a, b) == 0.0, "vec_dist2 of no elements");
    free(a), free(b);
}

int main(void)
{
    test_init("vecops");
    backend_ctx ctx1, ctx2;
    backend_ctx_init_cpu(&ctx1, 1);
    backend_ctx_init_cpu(&ctx2, 2);
    const size_t small = 1001 + 2 * (size_t)test_uniform(0, 50), large = 200003;
    for (int pass = 0; pass < 2; pass++) {
        backend_ctx *ctx = pass ? &ctx2 : &ctx1;
        size_t n = pass ? large : small;
        test_axpby_scale(ctx, n);
        test_mean(ctx, n);
        test_sgd_momentum(ctx, n, 0);
        test_sgd_momentum(ctx, n, 1);
        test_parle_inner(ctx, n);
        test_parle_outer(ctx, n);
        test_elastic_step(ctx, n);
        test_dist2(&ctx1, &ctx2, n);
    }
    backend_ctx_free(&ctx1);
    backend_ctx_free(&ctx2);
    return test_main_end();
}

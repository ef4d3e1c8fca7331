/* Vector ops for optimizers and couplings: each splits [0, n) over the
 * context's threads and loops over the per-element maths of elementwise.h. */
#include "cpu_ops.h"
#include "cpu_util.h"
#include "elementwise.h"

/* Runs `call` on this thread's slice [lo, hi) of [0, n). */
#define PARALLEL_SLICES(ctx, n, call)                                             \
    _Pragma("omp parallel num_threads((ctx)->threads) if ((n) >= CPU_PARALLEL_MIN)") \
    {                                                                              \
        size_t lo, hi;                                                             \
        cpu_slice((n), &lo, &hi);                                                  \
        call;                                                                      \
    }

CPU_HOT static void axpby_range(size_t n, float a, const float *restrict x, float b,
                                float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = axpby_elem(a, x[i], b, y[i]);
}

void cpu_vec_axpby(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y)
{
    PARALLEL_SLICES(ctx, n, axpby_range(hi - lo, a, x + lo, b, y + lo))
}

CPU_HOT static void scale_range(size_t n, float a, float *restrict x)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

void cpu_vec_scale(backend_ctx *ctx, size_t n, float a, float *x)
{
    PARALLEL_SLICES(ctx, n, scale_range(hi - lo, a, x + lo))
}

/* Blocks of MEAN_BLOCK elements: every input of a block is read into acc
 * before out is written, so out may be one of xs. */
enum { MEAN_BLOCK = 512 };

CPU_HOT static void mean_range(size_t lo, size_t hi, const float *const *xs, int k, float *out)
{
    const float inv_k = 1.0f / (float)k;
    float acc[MEAN_BLOCK];
    for (size_t b0 = lo; b0 < hi; b0 += MEAN_BLOCK) {
        const size_t len = hi - b0 < MEAN_BLOCK ? hi - b0 : MEAN_BLOCK;
        const float *restrict x0 = xs[0] + b0;
        for (size_t i = 0; i < len; i++)
            acc[i] = x0[i];
        for (int j = 1; j < k; j++) {
            const float *restrict xj = xs[j] + b0;
            for (size_t i = 0; i < len; i++)
                acc[i] += xj[i];
        }
        float *restrict o = out + b0;
        for (size_t i = 0; i < len; i++)
            o[i] = acc[i] * inv_k;
    }
}

void cpu_vec_mean(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out)
{
    PARALLEL_SLICES(ctx, n, mean_range(lo, hi, xs, k, out))
}

/* The sum runs over fixed blocks, each summed in double and the block sums
 * added in order, so the result has the same bits at any thread count. At
 * most DIST2_BLOCKS blocks, of at least DIST2_MIN_BLOCK elements. */
enum { DIST2_BLOCKS = 1024, DIST2_MIN_BLOCK = 16384 };

CPU_HOT static double dist2_range(size_t n, const float *restrict a, const float *restrict b)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return s;
}

double cpu_vec_dist2(backend_ctx *ctx, size_t n, const float *a, const float *b)
{
    size_t block = (n + DIST2_BLOCKS - 1) / DIST2_BLOCKS;
    block = block < DIST2_MIN_BLOCK ? DIST2_MIN_BLOCK : block;
    const size_t blocks = (n + block - 1) / block;
    double part[DIST2_BLOCKS];
#pragma omp parallel for schedule(static) num_threads(ctx->threads) if (n >= CPU_PARALLEL_MIN)
    for (size_t k = 0; k < blocks; k++) {
        const size_t lo = k * block, len = n - lo < block ? n - lo : block;
        part[k] = dist2_range(len, a + lo, b + lo);
    }
    double s = 0.0;
    for (size_t k = 0; k < blocks; k++)
        s += part[k];
    return s;
}

CPU_HOT static void sgd_momentum_range(size_t n, float lr, float mu, float wd, int nesterov,
                                       float *restrict w, float *restrict v,
                                       const float *restrict g)
{
    for (size_t i = 0; i < n; i++)
        sgd_momentum_elem(&w[i], &v[i], g[i], lr, mu, wd, nesterov);
}

void cpu_vec_sgd_momentum(backend_ctx *ctx, size_t n, float lr, float mu, float wd, int nesterov,
                          float *w, float *v, const float *g)
{
    PARALLEL_SLICES(ctx, n, sgd_momentum_range(hi - lo, lr, mu, wd, nesterov, w + lo, v + lo, g + lo))
}

CPU_HOT static void parle_inner_range(size_t n, float eta, float mu, float lambda, float gamma,
                                      float alpha, float *restrict y, float *restrict z,
                                      float *restrict v, const float *restrict g,
                                      const float *restrict xhat)
{
    for (size_t i = 0; i < n; i++)
        parle_inner_elem(&y[i], &z[i], &v[i], g[i], xhat[i], eta, mu, lambda, gamma, alpha);
}

void cpu_vec_parle_inner(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float gamma,
                         float alpha, float *y, float *z, float *v, const float *g,
                         const float *xhat)
{
    PARALLEL_SLICES(ctx, n, parle_inner_range(hi - lo, eta, mu, lambda, gamma, alpha, y + lo,
                                              z + lo, v + lo, g + lo, xhat + lo))
}

/* The outer step is Nesterov momentum on d taken from xhat; x is not restrict
 * because it may be xhat (xhat[i] is read before x[i] is written). */
CPU_HOT static void parle_outer_range(size_t n, float eta, float mu, float rho, float *x,
                                      float *restrict u, const float *xhat,
                                      const float *restrict z, const float *restrict zbar)
{
    for (size_t i = 0; i < n; i++) {
        const float d = parle_outer_dir_elem(xhat[i], z[i], zbar[i], rho);
        float w = xhat[i];
        sgd_momentum_elem(&w, &u[i], d, eta, mu, 0.0f, 1);
        x[i] = w;
    }
}

void cpu_vec_parle_outer(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                         float *u, const float *xhat, const float *z, const float *zbar)
{
    PARALLEL_SLICES(ctx, n, parle_outer_range(hi - lo, eta, mu, rho, x + lo, u + lo, xhat + lo,
                                              z + lo, zbar + lo))
}

CPU_HOT static void elastic_step_range(size_t n, float eta, float mu, float lambda, float rho,
                                       float *restrict x, float *restrict u,
                                       const float *restrict g, const float *restrict xbar)
{
    for (size_t i = 0; i < n; i++) {
        const float d = elastic_dir_elem(x[i], g[i], xbar[i], lambda, rho);
        sgd_momentum_elem(&x[i], &u[i], d, eta, mu, 0.0f, 1);
    }
}

void cpu_vec_elastic_step(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float rho,
                          float *x, float *u, const float *g, const float *xbar)
{
    PARALLEL_SLICES(ctx, n, elastic_step_range(hi - lo, eta, mu, lambda, rho, x + lo, u + lo,
                                               g + lo, xbar + lo))
}

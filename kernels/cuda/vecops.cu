/* Vector ops, ReLU and dropout on CUDA. Each is one grid-stride loop over the
 * per-element functions of elementwise.h and philox.h, the very ones the CPU
 * loops call, so the two backends cannot drift apart. The file is built with
 * --fmad=false: the CPU build does not contract a*b+c into FMA either, so both
 * round the same way and agree bit for bit. vec_dist2 is the one reduction. */
#include "vecops_cuda.h"
#include "act.cuh"
#include "cuda_check.h"
#include "elementwise.h"
#include "launch.cuh"
#include "philox.h"

extern "C" int cuda_vec_axpby(cudaStream_t s, size_t n, float a, const float *x, float b, float *y,
                              char *err, size_t errlen)
{
    auto f = [=] __device__(size_t i) { y[i] = axpby_elem(a, x[i], b, y[i]); };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

extern "C" int cuda_vec_scale(cudaStream_t s, size_t n, float a, float *x, char *err, size_t errlen)
{
    auto f = [=] __device__(size_t i) { x[i] *= a; };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

/* The input pointers travel by value in the kernel's arguments. */
struct mean_inputs {
    const float *x[CUDA_VEC_MEAN_MAX_INPUTS];
};

extern "C" int cuda_vec_mean(cudaStream_t s, size_t n, const float *const *xs, int k, float *out,
                             char *err, size_t errlen)
{
    if (k < 1 || k > CUDA_VEC_MEAN_MAX_INPUTS) {
        snprintf(err, errlen, "cuda_vec_mean: %d inputs, want 1 to %d", k,
                 CUDA_VEC_MEAN_MAX_INPUTS);
        return -1;
    }
    mean_inputs in = {};
    for (int j = 0; j < k; j++)
        in.x[j] = xs[j];
    float inv_k = 1.0f / (float)k;
    auto f = [=] __device__(size_t i) {
        float sum = in.x[0][i];
        for (int j = 1; j < k; j++)
            sum += in.x[j][i];
        out[i] = sum * inv_k;
    };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

extern "C" int cuda_vec_sgd_momentum(cudaStream_t s, size_t n, float lr, float mu, float wd,
                                     int nesterov, float *w, float *v, const float *g, char *err,
                                     size_t errlen)
{
    auto f = [=] __device__(size_t i) { sgd_momentum_elem(&w[i], &v[i], g[i], lr, mu, wd, nesterov); };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

extern "C" int cuda_vec_parle_inner(cudaStream_t s, size_t n, float eta, float mu, float lambda,
                                    float gamma, float alpha, float *y, float *z, float *v,
                                    const float *g, const float *xhat, char *err, size_t errlen)
{
    auto f = [=] __device__(size_t i) {
        parle_inner_elem(&y[i], &z[i], &v[i], g[i], xhat[i], eta, mu, lambda, gamma, alpha);
    };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

/* The outer step is Nesterov momentum from xhat along d, without weight decay. */
extern "C" int cuda_vec_parle_outer(cudaStream_t s, size_t n, float eta, float mu, float rho,
                                    float *x, float *u, const float *xhat, const float *z,
                                    const float *zbar, char *err, size_t errlen)
{
    auto f = [=] __device__(size_t i) {
        float d = parle_outer_dir_elem(xhat[i], z[i], zbar[i], rho);
        float w = xhat[i];
        sgd_momentum_elem(&w, &u[i], d, eta, mu, 0.0f, 1);
        x[i] = w;
    };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

extern "C" int cuda_vec_elastic_step(cudaStream_t s, size_t n, float eta, float mu, float lambda,
                                     float rho, float *x, float *u, const float *g,
                                     const float *xbar, char *err, size_t errlen)
{
    auto f = [=] __device__(size_t i) {
        float d = elastic_dir_elem(x[i], g[i], xbar[i], lambda, rho);
        sgd_momentum_elem(&x[i], &u[i], d, eta, mu, 0.0f, 1);
    };
    CUDA_CHECK(for_each_index(s, n, f));
    return 0;
}

template <typename T>
static int relu_fwd(cudaStream_t s, size_t count, const float *xv, float *yv, char *err,
                    size_t errlen)
{
    const T *x = act_in<T>(xv);
    T *y = act_out<T>(yv);
    auto f = [=] __device__(size_t i) { act_st(y, i, relu_elem(act_ld(x, i))); };
    CUDA_CHECK(for_each_index(s, count, f));
    return 0;
}

template <typename T>
static int relu_bwd(cudaStream_t s, size_t count, const float *yv, const float *dyv, float *dxv,
                    char *err, size_t errlen)
{
    const T *y = act_in<T>(yv), *dy = act_in<T>(dyv);
    T *dx = act_out<T>(dxv);
    auto f = [=] __device__(size_t i) { act_st(dx, i, relu_grad_elem(act_ld(y, i), act_ld(dy, i))); };
    CUDA_CHECK(for_each_index(s, count, f));
    return 0;
}

/* out = mask(in) / (1 - p). Forward and backward are this same map, as the
 * mask is redrawn from (key, counter). One thread per Philox block: uniform i
 * is lane i % 4 of block counter + i / 4, exactly as philox_uniform_at. */
template <typename T>
static int dropout_apply(cudaStream_t s, size_t count, float p, philox_key key, uint64_t counter,
                         const float *inv, float *outv, char *err, size_t errlen)
{
    const T *in = act_in<T>(inv);
    T *out = act_out<T>(outv);
    auto f = [=] __device__(size_t block) {
        philox_out r = philox4x32(key, counter + block);
        size_t first = 4 * block;
        for (unsigned lane = 0; lane < 4 && first + lane < count; lane++)
            act_st(out, first + lane,
                   dropout_elem(act_ld(in, first + lane), philox_uniform(r.v[lane]), p));
    };
    CUDA_CHECK(for_each_index(s, (count + 3) / 4, f));
    return 0;
}

/* ACT_DISPATCH's test, on a type in place of a context. */
struct act_of {
    enum backend_dtype act;
};

extern "C" int cuda_relu_forward(cudaStream_t s, enum backend_dtype act, size_t count,
                                 const float *x, float *y, char *err, size_t errlen)
{
    const act_of a = {act};
    return ACT_DISPATCH(&a, relu_fwd, s, count, x, y, err, errlen);
}

extern "C" int cuda_relu_backward(cudaStream_t s, enum backend_dtype act, size_t count,
                                  const float *y, const float *dy, float *dx, char *err,
                                  size_t errlen)
{
    const act_of a = {act};
    return ACT_DISPATCH(&a, relu_bwd, s, count, y, dy, dx, err, errlen);
}

extern "C" int cuda_dropout_forward(cudaStream_t s, enum backend_dtype act, size_t count, float p,
                                    philox_key key, uint64_t counter, const float *x, float *y,
                                    char *err, size_t errlen)
{
    const act_of a = {act};
    return ACT_DISPATCH(&a, dropout_apply, s, count, p, key, counter, x, y, err, errlen);
}

extern "C" int cuda_dropout_backward(cudaStream_t s, enum backend_dtype act, size_t count,
                                     float p, philox_key key, uint64_t counter, const float *dy,
                                     float *dx, char *err, size_t errlen)
{
    const act_of a = {act};
    return ACT_DISPATCH(&a, dropout_apply, s, count, p, key, counter, dy, dx, err, errlen);
}

/* Per-block sums of (a - b)^2 in double: each thread strides over the
 * vector, then the block adds its threads' sums. */
__global__ void dist2_partial_kernel(size_t n, const float *a, const float *b, double *partial)
{
    double sum = 0.0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double d = (double)a[i] - (double)b[i];
        sum += d * d;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        partial[blockIdx.x] = sum;
}

__global__ void dist2_final_kernel(int blocks, const double *partial, double *out)
{
    double sum = 0.0;
    for (int i = threadIdx.x; i < blocks; i += blockDim.x)
        sum += partial[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        *out = sum;
}

/* Two launches, the second summing the first's per-block partials, so the
 * order of the additions depends on n only: the same inputs give the same
 * bits every time. */
extern "C" int cuda_vec_dist2(cudaStream_t s, size_t n, const float *a, const float *b,
                              double *scratch, char *err, size_t errlen)
{
    size_t blocks = (n + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK;
    if (blocks > CUDA_VEC_DIST2_BLOCKS)
        blocks = CUDA_VEC_DIST2_BLOCKS;
    if (blocks == 0)
        blocks = 1; /* n = 0 still writes the sum, 0 */
    double *partial = scratch + 1;
    dist2_partial_kernel<<<(unsigned)blocks, THREADS_PER_BLOCK, 0, s>>>(n, a, b, partial);
    CUDA_CHECK(cudaGetLastError());
    dist2_final_kernel<<<1, THREADS_PER_BLOCK, 0, s>>>((int)blocks, partial, scratch);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

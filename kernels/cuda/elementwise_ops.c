/* The vector ops, ReLU and dropout of backend.h on the context's stream:
 * vecops.cu's kernels, their err-buffer failures made sticky errors. */
#include <math.h>

#include "backend_cuda.h"
#include "cuda_check.h"
#include "vecops_cuda.h"

/* `call` names S for the stream and ERR, ERRLEN for the buffer it fills. */
#define RUN(ctx, call)                                      \
    do {                                                    \
        cudaStream_t S = cuda_stream_of(ctx);               \
        char ERR[256];                                      \
        const size_t ERRLEN = sizeof ERR;                   \
        if ((call) != 0) {                                  \
            backend_fail((ctx), "%s", ERR);                 \
            cuda_probe_device(ctx);                         \
        }                                                   \
    } while (0)

void cuda_relu_forward_op(backend_ctx *ctx, size_t count, const float *x, float *y)
{
    RUN(ctx, cuda_relu_forward(S, ctx->act, count, x, y, ERR, ERRLEN));
}

void cuda_relu_backward_op(backend_ctx *ctx, size_t count, const float *y, const float *dy,
                           float *dx)
{
    RUN(ctx, cuda_relu_backward(S, ctx->act, count, y, dy, dx, ERR, ERRLEN));
}

void cuda_dropout_forward_op(backend_ctx *ctx, size_t count, float p, philox_key key,
                             uint64_t counter, const float *x, float *y)
{
    RUN(ctx, cuda_dropout_forward(S, ctx->act, count, p, key, counter, x, y, ERR, ERRLEN));
}

void cuda_dropout_backward_op(backend_ctx *ctx, size_t count, float p, philox_key key,
                              uint64_t counter, const float *dy, float *dx)
{
    RUN(ctx, cuda_dropout_backward(S, ctx->act, count, p, key, counter, dy, dx, ERR, ERRLEN));
}

void cuda_vec_axpby_op(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y)
{
    RUN(ctx, cuda_vec_axpby(S, n, a, x, b, y, ERR, ERRLEN));
}

void cuda_vec_scale_op(backend_ctx *ctx, size_t n, float a, float *x)
{
    RUN(ctx, cuda_vec_scale(S, n, a, x, ERR, ERRLEN));
}

void cuda_vec_mean_op(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out)
{
    RUN(ctx, cuda_vec_mean(S, n, xs, k, out, ERR, ERRLEN));
}

/* The sum comes back through the context's pinned buffer. */
double cuda_vec_dist2_op(backend_ctx *ctx, size_t n, const float *a, const float *b)
{
    cuda_impl *im = cuda_impl_of(ctx);
    double *scratch = cuda_scratch(ctx, CUDA_VEC_DIST2_SCRATCH * sizeof(double));
    if (!scratch)
        return NAN;
    RUN(ctx, cuda_vec_dist2(S, n, a, b, scratch, ERR, ERRLEN));
    if (backend_failed(ctx) ||
        !CUDA_OK(ctx, cudaMemcpyAsync(im->host, scratch, sizeof(double), cudaMemcpyDeviceToHost,
                                      im->stream)) ||
        !CUDA_OK(ctx, cudaStreamSynchronize(im->stream)))
        return NAN;
    return *(const double *)im->host;
}

void cuda_vec_sgd_momentum_op(backend_ctx *ctx, size_t n, float lr, float mu, float wd,
                              int nesterov, float *w, float *v, const float *g)
{
    RUN(ctx, cuda_vec_sgd_momentum(S, n, lr, mu, wd, nesterov, w, v, g, ERR, ERRLEN));
}

void cuda_vec_parle_inner_op(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                             float gamma, float alpha, float *y, float *z, float *v,
                             const float *g, const float *xhat)
{
    RUN(ctx, cuda_vec_parle_inner(S, n, eta, mu, lambda, gamma, alpha, y, z, v, g, xhat, ERR,
                                  ERRLEN));
}

void cuda_vec_parle_outer_op(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                             float *u, const float *xhat, const float *z, const float *zbar)
{
    RUN(ctx, cuda_vec_parle_outer(S, n, eta, mu, rho, x, u, xhat, z, zbar, ERR, ERRLEN));
}

void cuda_vec_elastic_step_op(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                              float rho, float *x, float *u, const float *g, const float *xbar)
{
    RUN(ctx, cuda_vec_elastic_step(S, n, eta, mu, lambda, rho, x, u, g, xbar, ERR, ERRLEN));
}

/* The public side of backend.h: each op skips once the context has failed
 * (the first error is the one worth reporting, and later ops would only
 * compute on its garbage) and otherwise forwards to the context's table. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "parle_config.h"

static void fail_v(backend_ctx *ctx, const char *fmt, va_list ap)
{
    if (ctx->failed)
        return;
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    ctx->failed = 1;
}

void backend_fail(backend_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(ctx, fmt, ap);
    va_end(ap);
}

void backend_fail_device(backend_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(ctx, fmt, ap);
    va_end(ap);
    ctx->device_fault = 1;
}

int backend_ctx_init_cuda(backend_ctx *ctx, int device, enum backend_precision precision,
                          int deterministic, char *err, size_t errlen)
{
    memset(ctx, 0, sizeof *ctx);
#if PARLE_HAVE_CUDA
    if (backend_cuda_ctx_init(ctx, device, err, errlen) != 0)
        return -1;
    ctx->precision = precision;
    ctx->act = backend_act_dtype(device, precision);
    ctx->deterministic = deterministic;
    return 0;
#else
    (void)device, (void)precision, (void)deterministic;
    snprintf(err, errlen, "this parle was built without CUDA");
    return -1;
#endif
}

void backend_ctx_plan(backend_ctx *ctx, int device, enum backend_precision precision)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->device = device;
    ctx->precision = precision;
    ctx->act = backend_act_dtype(device, precision);
}

int backend_cuda_devices(void)
{
#if PARLE_HAVE_CUDA
    return backend_cuda_device_count();
#else
    return 0;
#endif
}

int backend_cuda_device_info(int device, char *name, size_t namelen, size_t *total_bytes)
{
#if PARLE_HAVE_CUDA
    return backend_cuda_device_props(device, name, namelen, total_bytes);
#else
    (void)device, (void)name, (void)namelen, (void)total_bytes;
    return -1;
#endif
}

int backend_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
#if PARLE_HAVE_CUDA
    return backend_cuda_mem(device, free_bytes, total_bytes);
#else
    (void)device, (void)free_bytes, (void)total_bytes;
    return -1;
#endif
}

/* Safe to call twice. */
void backend_ctx_free(backend_ctx *ctx)
{
    /* The workspace first: freeing it may need the backend's state. */
    if (ctx->workspace)
        ctx->ops->free(ctx, ctx->workspace);
    if (ctx->ops)
        ctx->ops->ctx_free(ctx);
    memset(ctx, 0, sizeof *ctx);
}

float *backend_workspace(backend_ctx *ctx, size_t floats)
{
    if (ctx->failed)
        return NULL;
    if (ctx->workspace && floats <= ctx->workspace_floats)
        return ctx->workspace;
    /* Whole 64-byte lines, at least one, so 0 floats still gets a pointer. */
    size_t bytes = floats ? (floats * sizeof(float) + 63) & ~(size_t)63 : 64;
    float *p = ctx->ops->alloc(ctx, bytes);
    if (!p)
        return NULL;
    if (ctx->workspace)
        ctx->ops->free(ctx, ctx->workspace);
    ctx->workspace = p;
    ctx->workspace_floats = bytes / sizeof(float);
    return p;
}

/* ---- memory ---- */

void *backend_alloc(backend_ctx *ctx, size_t bytes)
{
    return ctx->failed ? NULL : ctx->ops->alloc(ctx, bytes);
}

/* Releasing is never skipped, so that a failed context can be torn down. */
void backend_free(backend_ctx *ctx, void *p)
{
    if (p)
        ctx->ops->free(ctx, p);
}

void backend_zero(backend_ctx *ctx, void *p, size_t bytes)
{
    if (!ctx->failed)
        ctx->ops->zero(ctx, p, bytes);
}

void backend_copy(backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (!ctx->failed)
        ctx->ops->copy(ctx, dst, src, bytes);
}

void backend_upload(backend_ctx *ctx, void *dst, const void *host_src, size_t bytes)
{
    if (!ctx->failed)
        ctx->ops->upload(ctx, dst, host_src, bytes);
}

void backend_download(backend_ctx *ctx, void *host_dst, const void *src, size_t bytes)
{
    if (!ctx->failed)
        ctx->ops->download(ctx, host_dst, src, bytes);
}

void *backend_host_alloc(backend_ctx *ctx, size_t bytes)
{
    return ctx->failed ? NULL : ctx->ops->host_alloc(ctx, bytes);
}

void backend_host_free(backend_ctx *ctx, void *p)
{
    if (p)
        ctx->ops->host_free(ctx, p);
}

const void *backend_stage(backend_ctx *ctx, void *staging, const void *host, size_t bytes)
{
    return ctx->failed ? NULL : ctx->ops->stage(ctx, staging, host, bytes);
}

int backend_sync(backend_ctx *ctx)
{
    if (!ctx->failed)
        ctx->ops->sync(ctx);
    return ctx->failed ? -1 : 0;
}

const void *backend_stage_async(backend_ctx *ctx, int slot, void *staging, const void *host,
                                size_t bytes)
{
    if (ctx->failed)
        return NULL;
    return ctx->ops->stage_async ? ctx->ops->stage_async(ctx, slot, staging, host, bytes)
                                 : ctx->ops->stage(ctx, staging, host, bytes);
}

void backend_stage_wait(backend_ctx *ctx, int slot)
{
    if (!ctx->failed && ctx->ops->stage_wait)
        ctx->ops->stage_wait(ctx, slot);
}

void backend_stage_done(backend_ctx *ctx, int slot)
{
    if (!ctx->failed && ctx->ops->stage_done)
        ctx->ops->stage_done(ctx, slot);
}

/* ---- compute ---- */

void gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
          const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (!ctx->failed)
        ctx->ops->gemm(ctx, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x, const float *w,
                    const float *b, float *y)
{
    if (!ctx->failed)
        ctx->ops->conv2d_forward(ctx, d, n, x, w, b, y);
}

void conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                          const float *w, float *dx)
{
    if (!ctx->failed)
        ctx->ops->conv2d_backward_data(ctx, d, n, dy, w, dx);
}

void conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                            const float *dy, float *dw, float *db)
{
    if (!ctx->failed)
        ctx->ops->conv2d_backward_filter(ctx, d, n, x, dy, dw, db);
}

void maxpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y,
                       int32_t *argmax)
{
    if (!ctx->failed)
        ctx->ops->maxpool2d_forward(ctx, d, n, x, y, argmax);
}

void maxpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                        const int32_t *argmax, float *dx)
{
    if (!ctx->failed)
        ctx->ops->maxpool2d_backward(ctx, d, n, dy, argmax, dx);
}

void avgpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y)
{
    if (!ctx->failed)
        ctx->ops->avgpool2d_forward(ctx, d, n, x, y);
}

void avgpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy, float *dx)
{
    if (!ctx->failed)
        ctx->ops->avgpool2d_backward(ctx, d, n, dy, dx);
}

void batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *running_mean,
                             float *running_var, float momentum, float eps, float *y,
                             float *save_mean, float *save_invstd)
{
    if (!ctx->failed)
        ctx->ops->batchnorm_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean,
                                          running_var, momentum, eps, y, save_mean, save_invstd);
}

void batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float eps, float *y)
{
    if (!ctx->failed)
        ctx->ops->batchnorm_forward_infer(ctx, n, c, hw, x, gamma, beta, running_mean,
                                          running_var, eps, y);
}

void batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                        const float *gamma, const float *save_mean, const float *save_invstd,
                        float *dx, float *dgamma, float *dbeta)
{
    if (!ctx->failed)
        ctx->ops->batchnorm_backward(ctx, n, c, hw, x, dy, gamma, save_mean, save_invstd, dx,
                                     dgamma, dbeta);
}

/* Composed where the backend has no fused pass: both ops are element-wise
 * after their statistics, so running them in place is safe. */
void batchnorm_relu_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                  const float *gamma, const float *beta, float *running_mean,
                                  float *running_var, float momentum, float eps, float *y,
                                  float *save_mean, float *save_invstd)
{
    if (ctx->failed)
        return;
    if (ctx->ops->batchnorm_relu_forward_train) {
        ctx->ops->batchnorm_relu_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean,
                                               running_var, momentum, eps, y, save_mean,
                                               save_invstd);
        return;
    }
    batchnorm_forward_train(ctx, n, c, hw, x, gamma, beta, running_mean, running_var, momentum,
                            eps, y, save_mean, save_invstd);
    relu_forward(ctx, (size_t)n * c * hw, y, y);
}

/* Composed: dy masked in place by y, then BN's backward on it. */
void batchnorm_relu_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *y, float *dy, const float *gamma, const float *beta,
                             const float *save_mean, const float *save_invstd, float *dx,
                             float *dgamma, float *dbeta)
{
    if (ctx->failed)
        return;
    if (ctx->ops->batchnorm_relu_backward) {
        ctx->ops->batchnorm_relu_backward(ctx, n, c, hw, x, y, dy, gamma, beta, save_mean,
                                          save_invstd, dx, dgamma, dbeta);
        return;
    }
    relu_backward(ctx, (size_t)n * c * hw, y, dy, dy);
    batchnorm_backward(ctx, n, c, hw, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

int backend_fuses_bn_relu_maxpool(const backend_ctx *ctx, const pool2d_desc *pd)
{
    return ctx->ops && ctx->ops->fuses_bn_relu_maxpool && ctx->ops->fuses_bn_relu_maxpool(pd);
}

void batchnorm_relu_maxpool_forward_train(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                          const float *x, const float *gamma, const float *beta,
                                          float *running_mean, float *running_var,
                                          float momentum, float eps, float *y, int32_t *argmax,
                                          float *save_mean, float *save_invstd)
{
    if (!ctx->failed)
        ctx->ops->batchnorm_relu_maxpool_forward_train(ctx, n, pd, x, gamma, beta, running_mean,
                                                       running_var, momentum, eps, y, argmax,
                                                       save_mean, save_invstd);
}

void batchnorm_relu_maxpool_backward(backend_ctx *ctx, int n, const pool2d_desc *pd,
                                     const float *x, const float *dy, const int32_t *argmax,
                                     const float *gamma, const float *beta,
                                     const float *save_mean, const float *save_invstd,
                                     float *dx, float *dgamma, float *dbeta)
{
    if (!ctx->failed)
        ctx->ops->batchnorm_relu_maxpool_backward(ctx, n, pd, x, dy, argmax, gamma, beta,
                                                  save_mean, save_invstd, dx, dgamma, dbeta);
}

int backend_fuses_conv_filter_bn(const backend_ctx *ctx, const conv2d_desc *cd,
                                 const pool2d_desc *pd)
{
    return ctx->ops && ctx->ops->fuses_conv_filter_bn && ctx->ops->fuses_conv_filter_bn(cd, pd);
}

void conv2d_backward_filter_bn_relu_maxpool(backend_ctx *ctx, int n, const conv2d_desc *cd,
                                            const float *x_conv, const pool2d_desc *pd,
                                            const float *x, const float *dy,
                                            const int32_t *argmax, const float *gamma,
                                            const float *beta, const float *save_mean,
                                            const float *save_invstd, const float *dgamma,
                                            const float *dbeta, float *dw, float *db)
{
    if (!ctx->failed)
        ctx->ops->conv2d_backward_filter_bn_relu_maxpool(ctx, n, cd, x_conv, pd, x, dy, argmax,
                                                         gamma, beta, save_mean, save_invstd,
                                                         dgamma, dbeta, dw, db);
}

void relu_forward(backend_ctx *ctx, size_t count, const float *x, float *y)
{
    if (!ctx->failed)
        ctx->ops->relu_forward(ctx, count, x, y);
}

void relu_backward(backend_ctx *ctx, size_t count, const float *y, const float *dy, float *dx)
{
    if (!ctx->failed)
        ctx->ops->relu_backward(ctx, count, y, dy, dx);
}

void dropout_forward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                     const float *x, float *y)
{
    if (!ctx->failed)
        ctx->ops->dropout_forward(ctx, count, p, key, counter, x, y);
}

void dropout_backward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                      const float *dy, float *dx)
{
    if (!ctx->failed)
        ctx->ops->dropout_backward(ctx, count, p, key, counter, dy, dx);
}

void linear_forward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                    const float *b, float *y)
{
    if (!ctx->failed)
        ctx->ops->linear_forward(ctx, n, in, out, x, w, b, y);
}

void linear_backward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, float *db)
{
    if (!ctx->failed)
        ctx->ops->linear_backward(ctx, n, in, out, x, w, dy, dx, dw, db);
}

float softmax_xent(backend_ctx *ctx, int n, int classes, const float *logits,
                   const int32_t *labels, float *dlogits, int *correct)
{
    if (ctx->failed) {
        if (correct)
            *correct = 0;
        return NAN;
    }
    return ctx->ops->softmax_xent(ctx, n, classes, logits, labels, dlogits, correct);
}

/* ---- activations ---- */

/* A backend without bf16 activations never gets a context that has them;
 * if it did (a plan context's type set on a real one), that is an error. */
static void no_bf16(backend_ctx *ctx)
{
    backend_fail(ctx, "backend %s: no bf16 activations", ctx->ops->name);
}

void act_add(backend_ctx *ctx, size_t n, const float *x, float *y)
{
    if (ctx->failed)
        return;
    if (ctx->act == DTYPE_F32)
        ctx->ops->vec_axpby(ctx, n, 1.0f, x, 1.0f, y);
    else if (ctx->ops->act_add)
        ctx->ops->act_add(ctx, n, x, y);
    else
        no_bf16(ctx);
}

const float *act_from_f32(backend_ctx *ctx, size_t n, const float *x, float *out)
{
    if (ctx->failed)
        return NULL;
    if (ctx->act == DTYPE_F32)
        return x;
    if (!ctx->ops->act_from_f32) {
        no_bf16(ctx);
        return NULL;
    }
    ctx->ops->act_from_f32(ctx, n, x, out);
    return out;
}

/* ---- vector ops ---- */

void vec_axpby(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y)
{
    if (!ctx->failed)
        ctx->ops->vec_axpby(ctx, n, a, x, b, y);
}

void vec_scale(backend_ctx *ctx, size_t n, float a, float *x)
{
    if (!ctx->failed)
        ctx->ops->vec_scale(ctx, n, a, x);
}

void vec_mean(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out)
{
    if (!ctx->failed)
        ctx->ops->vec_mean(ctx, n, xs, k, out);
}

double vec_dist2(backend_ctx *ctx, size_t n, const float *a, const float *b)
{
    return ctx->failed ? NAN : ctx->ops->vec_dist2(ctx, n, a, b);
}

void vec_sgd_momentum(backend_ctx *ctx, size_t n, float lr, float mu, float wd, int nesterov,
                      float *w, float *v, const float *g)
{
    if (!ctx->failed)
        ctx->ops->vec_sgd_momentum(ctx, n, lr, mu, wd, nesterov, w, v, g);
}

void vec_parle_inner(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float gamma,
                     float alpha, float *y, float *z, float *v, const float *g, const float *xhat)
{
    if (!ctx->failed)
        ctx->ops->vec_parle_inner(ctx, n, eta, mu, lambda, gamma, alpha, y, z, v, g, xhat);
}

void vec_parle_outer(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                     float *u, const float *xhat, const float *z, const float *zbar)
{
    if (!ctx->failed)
        ctx->ops->vec_parle_outer(ctx, n, eta, mu, rho, x, u, xhat, z, zbar);
}

void vec_elastic_step(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float rho,
                      float *x, float *u, const float *g, const float *xbar)
{
    if (!ctx->failed)
        ctx->ops->vec_elastic_step(ctx, n, eta, mu, lambda, rho, x, u, g, xbar);
}

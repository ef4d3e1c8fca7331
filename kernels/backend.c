/* The public side of backend.h: each op skips once the context has failed
 * (the first error is the one worth reporting, and later ops would only
 * compute on its garbage) and otherwise forwards to the context's table. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend_ops.h"
#include "parle_config.h"

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
    return backend_gpu_probe()->count;
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

/* The uniform ops of backend_ops.def (BACKEND_OP, BACKEND_OP_FUSED): skip
 * once failed, else forward. The other kinds are written below by hand. */
#define BACKEND_OP(ret, name, params, args) \
    ret name params                         \
    {                                       \
        if (!ctx->failed)                   \
            ctx->ops->name args;            \
    }
#define BACKEND_OP_WRAPPED(ret, name, params, args)
#define BACKEND_OP_OPTIONAL(ret, name, params, args)
#define BACKEND_OP_TABLE(ret, name, params, args)
#include "backend_ops.def"

/* By hand from here on: the ops whose entry may be NULL (BACKEND_OP_OPTIONAL,
 * BACKEND_OP_TABLE) or that return a value on a failed context
 * (BACKEND_OP_WRAPPED); each says what it does beyond skip-or-forward. */

/* Optional: composed where the backend has no fused pass: both ops are element-wise
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

/* Optional: composed, dy masked in place by y, then BN's backward on it. */
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

/* Table-only entries: asked without a context's failure (a plan context has
 * no ops), and a NULL entry answers no. */
int backend_fuses_bn_relu_maxpool(const backend_ctx *ctx, const pool2d_desc *pd)
{
    return ctx->ops && ctx->ops->fuses_bn_relu_maxpool && ctx->ops->fuses_bn_relu_maxpool(pd);
}

int backend_fuses_conv_filter_bn(const backend_ctx *ctx, const conv2d_desc *cd,
                                 const pool2d_desc *pd)
{
    return ctx->ops && ctx->ops->fuses_conv_filter_bn && ctx->ops->fuses_conv_filter_bn(cd, pd);
}

/* Wrapped: on a failed context, NaN and no hits. */
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

/* Optional: fp32 activations are vectors (vec_axpby); only bf16 ones need
 * the backend's entry. */
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

/* Table-only: returns x itself for fp32 activations, else the converted out. */
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

/* Wrapped: NaN on a failed context. */
double vec_dist2(backend_ctx *ctx, size_t n, const float *a, const float *b)
{
    return ctx->failed ? NAN : ctx->ops->vec_dist2(ctx, n, a, b);
}

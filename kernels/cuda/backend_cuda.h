/* The CUDA backend's private state and the ops its files implement, each
 * with the meaning and arguments of its namesake in backend.h (private to
 * kernels/cuda). Every op queues its work on the context's stream and
 * returns; only the ops that return a value from the device (softmax_xent,
 * vec_dist2, download, sync) wait for it. Callable from C and CUDA C++. */
#ifndef PARLE_BACKEND_CUDA_H
#define PARLE_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend_ops.h"

typedef struct conv_cache conv_cache; /* conv_plans.c */

typedef struct cuda_impl {
    cudaStream_t stream;     /* non-blocking: no implicit sync with the legacy stream */
    /* Batches staged ahead (backend_stage_async): copies on their own
     * stream; per slot, `copied` after its copies (the compute waits on it
     * before reading the slot) and `consumed` after the compute's last read
     * of it (the next copy into the slot waits on it). */
    cudaStream_t copy;
    cudaEvent_t copied[BACKEND_STAGE_SLOTS], consumed[BACKEND_STAGE_SLOTS];
    cublasHandle_t cublas;   /* bound to stream */
    cudnnHandle_t cudnn;     /* bound to stream */
    int cublas_precision;    /* the precision cublas's math mode is set for, -1: none yet */
    conv_cache *convs;       /* cuDNN descriptors and algorithms per shape */
    void *scratch;           /* device scratch: cuDNN workspace, bf16 operand copies,
                                reduction partials */
    size_t scratch_bytes;
    void *host;              /* pinned CUDA_HOST_BYTES that results come back through */
} cuda_impl;

enum { CUDA_HOST_BYTES = 64 };

static inline cuda_impl *cuda_impl_of(backend_ctx *ctx) { return (cuda_impl *)ctx->impl; }
static inline cudaStream_t cuda_stream_of(backend_ctx *ctx) { return cuda_impl_of(ctx)->stream; }

/* backend_cuda.c: device scratch of at least `bytes`, grown (never shrunk)
 * as needed; NULL with the sticky error set. Contents are not kept across
 * ops, and one op's scratch is free again once the next op is queued
 * (stream order), so every op may use all of it. */
void *cuda_scratch(backend_ctx *ctx, size_t bytes);
/* backend_cuda.c: the scratch of one op cut into `count` parts that it uses
 * at once, parts[i] of bytes[i] (NULL where 0), each 256-byte aligned as
 * cudaMalloc's memory is. 0, or -1 with the sticky error set. */
int cuda_scratch_parts(backend_ctx *ctx, int count, const size_t *bytes, void **parts);
/* backend_cuda.c: cuBLAS handle with the math mode of ctx->precision (bf16
 * is asked for per call, by cuda_gemm_op's compute type). */
cublasHandle_t cuda_cublas(backend_ctx *ctx);

/* conv_plans.c: the cache of cuDNN descriptors and algorithms. */
conv_cache *conv_cache_new(void);
void conv_cache_free(conv_cache *cache);

/* bf16.cu: n values between fp32 and bf16 (as bit patterns: C has no bf16
 * type), rounding to nearest even one way, exactly the other. */
/* The table's zero op, also for the ops that zero an output of an empty
 * shape (conv_cudnn.c, batchnorm.cu) without going back through backend.c. */
void cuda_zero_op(backend_ctx *ctx, void *p, size_t bytes);
void cuda_to_bf16(backend_ctx *ctx, size_t n, const float *x, uint16_t *y);
void cuda_from_bf16(backend_ctx *ctx, size_t n, const uint16_t *x, float *y);

/* bias.cu: an activation tensor (ctx->act) seen as [n][c][inner] (inner = 1
 * after a linear layer, out_h out_w after a convolution); b and db fp32. */
/* y[i][ch][j] = b[ch], or 0 where b is NULL. */
void cuda_bias_fill(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *y);
/* y[i][ch][j] += b[ch]. */
void cuda_bias_add(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *y);
/* db[ch] = sum over i, j of dy[i][ch][j]. */
void cuda_bias_grad(backend_ctx *ctx, int n, int c, size_t inner, const float *dy, float *db);

/* batchnorm_split.cu: the training batch norm that ctx->batchnorm_split
 * selects (kernels/bn_split.h), with the ReLU after it fused when `relu`
 * (then backward masks dy where beta + gamma invstd (x - mean) <= 0, and
 * beta may be NULL without it); the arguments and aliasing of
 * batchnorm_relu_forward_train and batchnorm_relu_backward; backward wants
 * c >= 1 and n hw >= 1 (its callers handle the empty batch). */
void cuda_bn_split_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                 const float *gamma, const float *beta, float *running_mean,
                                 float *running_var, float momentum, float eps, int relu,
                                 float *y, float *save_mean, float *save_invstd);
void cuda_bn_split_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                            const float *dy, const float *gamma, const float *beta,
                            const float *save_mean, const float *save_invstd, int relu,
                            float *dx, float *dgamma, float *dbeta);

/* The ops, one cuda_<name>_op per entry of backend_ops.def, with its
 * namesake's meaning and arguments: conv2d_* in conv_cudnn.c; gemm and
 * linear_* in linear_cublas.c; maxpool2d_* and avgpool2d_* in pool.cu;
 * batchnorm_forward_* and batchnorm_backward in batchnorm.cu; softmax_xent
 * in softmax_xent.cu; act_add and act_from_f32 (bf16 activations) in
 * bf16.cu; relu_*, dropout_* and vec_* in elementwise_ops.c, which runs
 * vecops.cu's kernels on the context's stream; batchnorm_relu_* in
 * batchnorm.cu (fused by the split kernels, else batch norm then ReLU). The
 * fuses_* and the ops they allow have no CUDA version (NULL entries). */
#define BACKEND_OP(ret, name, params, args) ret cuda_##name##_op params;
#include "backend_ops.def"

#ifdef __cplusplus
}
#endif

#endif

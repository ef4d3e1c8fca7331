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

typedef struct conv_cache conv_cache; /* conv_cudnn.c */

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
 * is asked for per call, by cuda_gemm's compute type). */
cublasHandle_t cuda_cublas(backend_ctx *ctx);

/* conv_cudnn.c */
conv_cache *conv_cache_new(void);
void conv_cache_free(conv_cache *cache);
void cuda_conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                         const float *w, const float *b, float *y);
void cuda_conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                               const float *w, float *dx);
void cuda_conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                                 const float *dy, float *dw, float *db);

/* linear_cublas.c */
void cuda_gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
void cuda_linear_forward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                         const float *b, float *y);
void cuda_linear_backward(backend_ctx *ctx, int n, int in, int out, const float *x,
                          const float *w, const float *dy, float *dx, float *dw, float *db);

/* bf16.cu: n values between fp32 and bf16 (as bit patterns: C has no bf16
 * type), rounding to nearest even one way, exactly the other. */
void cuda_to_bf16(backend_ctx *ctx, size_t n, const float *x, uint16_t *y);
void cuda_from_bf16(backend_ctx *ctx, size_t n, const uint16_t *x, float *y);
/* bf16.cu: the act ops of backend.h (bf16 activations only). */
void cuda_act_add(backend_ctx *ctx, size_t n, const float *x, float *y);
void cuda_act_from_f32(backend_ctx *ctx, size_t n, const float *x, float *out);

/* bias.cu: an activation tensor (ctx->act) seen as [n][c][inner] (inner = 1
 * after a linear layer, out_h out_w after a convolution); b and db fp32. */
/* y[i][ch][j] = b[ch], or 0 where b is NULL. */
void cuda_bias_fill(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *y);
/* y[i][ch][j] += b[ch]. */
void cuda_bias_add(backend_ctx *ctx, int n, int c, size_t inner, const float *b, float *y);
/* db[ch] = sum over i, j of dy[i][ch][j]. */
void cuda_bias_grad(backend_ctx *ctx, int n, int c, size_t inner, const float *dy, float *db);

/* pool.cu */
void cuda_maxpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                            float *y, int32_t *argmax);
void cuda_maxpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                             const int32_t *argmax, float *dx);
void cuda_avgpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x,
                            float *y);
void cuda_avgpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                             float *dx);

/* batchnorm.cu */
void cuda_batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                  const float *gamma, const float *beta, float *running_mean,
                                  float *running_var, float momentum, float eps, float *y,
                                  float *save_mean, float *save_invstd);
void cuda_batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                                  const float *gamma, const float *beta,
                                  const float *running_mean, const float *running_var, float eps,
                                  float *y);
void cuda_batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *dy, const float *gamma, const float *save_mean,
                             const float *save_invstd, float *dx, float *dgamma, float *dbeta);

/* softmax_xent.cu */
float cuda_softmax_xent(backend_ctx *ctx, int n, int classes, const float *logits,
                        const int32_t *labels, float *dlogits, int *correct);

/* elementwise_ops.c: vecops.cu's kernels on the context's stream. */
void cuda_relu_forward_op(backend_ctx *ctx, size_t count, const float *x, float *y);
void cuda_relu_backward_op(backend_ctx *ctx, size_t count, const float *y, const float *dy,
                           float *dx);
void cuda_dropout_forward_op(backend_ctx *ctx, size_t count, float p, philox_key key,
                             uint64_t counter, const float *x, float *y);
void cuda_dropout_backward_op(backend_ctx *ctx, size_t count, float p, philox_key key,
                              uint64_t counter, const float *dy, float *dx);
void cuda_vec_axpby_op(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y);
void cuda_vec_scale_op(backend_ctx *ctx, size_t n, float a, float *x);
void cuda_vec_mean_op(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out);
double cuda_vec_dist2_op(backend_ctx *ctx, size_t n, const float *a, const float *b);
void cuda_vec_sgd_momentum_op(backend_ctx *ctx, size_t n, float lr, float mu, float wd,
                              int nesterov, float *w, float *v, const float *g);
void cuda_vec_parle_inner_op(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                             float gamma, float alpha, float *y, float *z, float *v,
                             const float *g, const float *xhat);
void cuda_vec_parle_outer_op(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                             float *u, const float *xhat, const float *z, const float *zbar);
void cuda_vec_elastic_step_op(backend_ctx *ctx, size_t n, float eta, float mu, float lambda,
                              float rho, float *x, float *u, const float *g, const float *xbar);

#ifdef __cplusplus
}
#endif

#endif

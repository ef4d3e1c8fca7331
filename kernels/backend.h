/* The compute backend seam (design.md §3).
 *
 * A replica owns one backend_ctx: its device, its math thread count and its
 * scratch workspace. Nothing here keeps process-global state, so one thread
 * per replica (or per GPU) is safe. Tensors are float32, NCHW, contiguous.
 * Backward functions overwrite (=) their outputs; they never accumulate. */
#ifndef PARLE_BACKEND_H
#define PARLE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "philox.h"

#define BACKEND_CONV_PLANS 48
struct conv_plan;
struct dnnl_engine;
struct dnnl_stream;

typedef struct backend_ctx {
    int device;          /* -1: CPU; >= 0: CUDA device id */
    int threads;         /* math threads this replica may use (CPU) */
    float *workspace;    /* grown on demand by backend_workspace() */
    size_t workspace_floats;
    /* CPU: oneDNN convolution primitives made so far, one per (direction,
     * shape, batch, threads, bias), reused round-robin when full; created
     * on first use with the engine and stream they run on. */
    struct conv_plan *conv_plans[BACKEND_CONV_PLANS];
    int conv_plan_next;
    struct dnnl_engine *dnnl_engine;
    struct dnnl_stream *dnnl_stream;
} backend_ctx;

/* Prepare a CPU context; `threads` >= 1. Sets the calling thread's OpenMP
 * thread count, so call it from the replica thread that will use it. */
void backend_ctx_init_cpu(backend_ctx *ctx, int threads);
void backend_ctx_free(backend_ctx *ctx);
/* Scratch of at least `floats` floats (NULL if out of memory). */
float *backend_workspace(backend_ctx *ctx, size_t floats);

/* Row-major C = alpha op(A) op(B) + beta C; op(A) is M x K, op(B) is K x N. */
void gemm(backend_ctx *ctx, int trans_a, int trans_b, int M, int N, int K, float alpha,
          const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- 2-D convolution (square kernel, symmetric padding) ---- */
typedef struct conv2d_desc {
    int in_c, in_h, in_w;
    int out_c, k, stride, pad;
    int out_h, out_w;    /* filled by conv2d_desc_init */
} conv2d_desc;
void conv2d_desc_init(conv2d_desc *d, int in_c, int in_h, int in_w, int out_c, int k, int stride,
                      int pad);
/* w: [out_c, in_c, k, k]; b: [out_c] or NULL. */
void conv2d_forward(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x, const float *w,
                    const float *b, float *y);
void conv2d_backward_data(backend_ctx *ctx, const conv2d_desc *d, int n, const float *dy,
                          const float *w, float *dx);
/* db may be NULL (no bias). */
void conv2d_backward_filter(backend_ctx *ctx, const conv2d_desc *d, int n, const float *x,
                            const float *dy, float *dw, float *db);

/* ---- pooling ---- */
typedef struct pool2d_desc {
    int c, in_h, in_w, k, stride, pad;
    int out_h, out_w;    /* filled by pool2d_desc_init (floor mode, as PyTorch) */
} pool2d_desc;
void pool2d_desc_init(pool2d_desc *d, int c, int in_h, int in_w, int k, int stride, int pad);
/* argmax: one int32 per output element, the input index within its plane. */
void maxpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y,
                       int32_t *argmax);
void maxpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy,
                        const int32_t *argmax, float *dx);
/* Average pooling counts padding in the divisor (PyTorch's count_include_pad). */
void avgpool2d_forward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *x, float *y);
void avgpool2d_backward(backend_ctx *ctx, const pool2d_desc *d, int n, const float *dy, float *dx);

/* ---- batch normalisation over (n, hw) per channel; hw = 1 for 1-D ---- */
/* Training: normalise with batch statistics, save mean and 1/sqrt(var+eps) for
 * backward, and update the running statistics with the unbiased variance:
 * r = (1 - momentum) r + momentum batch_stat (momentum 1/k gives a cumulative mean). */
void batchnorm_forward_train(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, float *running_mean,
                             float *running_var, float momentum, float eps, float *y,
                             float *save_mean, float *save_invstd);
void batchnorm_forward_infer(backend_ctx *ctx, int n, int c, int hw, const float *x,
                             const float *gamma, const float *beta, const float *running_mean,
                             const float *running_var, float eps, float *y);
void batchnorm_backward(backend_ctx *ctx, int n, int c, int hw, const float *x, const float *dy,
                        const float *gamma, const float *save_mean, const float *save_invstd,
                        float *dx, float *dgamma, float *dbeta);

/* ---- activations ---- */
void relu_forward(backend_ctx *ctx, size_t count, const float *x, float *y);
/* Uses the output y; dx may alias dy. */
void relu_backward(backend_ctx *ctx, size_t count, const float *y, const float *dy, float *dx);
/* Element i is kept iff philox_uniform_at(key, counter, i) >= p; backward
 * redraws the same mask from the same (key, counter), so none is stored. */
void dropout_forward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                     const float *x, float *y);
void dropout_backward(backend_ctx *ctx, size_t count, float p, philox_key key, uint64_t counter,
                      const float *dy, float *dx);

/* ---- linear: y[n, out] = x[n, in] w^T + b, w: [out, in] (PyTorch layout) ---- */
void linear_forward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                    const float *b, float *y);
/* dx may be NULL (first layer). */
void linear_backward(backend_ctx *ctx, int n, int in, int out, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, float *db);

/* ---- softmax cross-entropy, mean over the batch ---- */
/* Returns the mean loss; writes dlogits = (softmax - onehot) / n when dlogits
 * is not NULL, and the number of argmax hits in *correct when not NULL. */
float softmax_xent(backend_ctx *ctx, int n, int classes, const float *logits,
                   const int32_t *labels, float *dlogits, int *correct);

/* ---- vector ops for optimizers and couplings (loops over elementwise.h) ---- */
void vec_axpby(backend_ctx *ctx, size_t n, float a, const float *x, float b, float *y);
void vec_scale(backend_ctx *ctx, size_t n, float a, float *x);
/* out = (1/k) sum_j xs[j]; out may alias one of xs. */
void vec_mean(backend_ctx *ctx, size_t n, const float *const *xs, int k, float *out);
void vec_sgd_momentum(backend_ctx *ctx, size_t n, float lr, float mu, float wd, int nesterov,
                      float *w, float *v, const float *g);
void vec_parle_inner(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float gamma,
                     float alpha, float *y, float *z, float *v, const float *g, const float *xhat);
/* x = xhat - eta (d + mu u), u = mu u + d, d = (xhat - z) + rho (xhat - zbar).
 * x and xhat may alias. */
void vec_parle_outer(backend_ctx *ctx, size_t n, float eta, float mu, float rho, float *x,
                     float *u, const float *xhat, const float *z, const float *zbar);
/* Elastic-SGD (L = 0): d = g + lambda x + rho (x - xbar); u = mu u + d; x -= eta (d + mu u). */
void vec_elastic_step(backend_ctx *ctx, size_t n, float eta, float mu, float lambda, float rho,
                      float *x, float *u, const float *g, const float *xbar);

#endif
